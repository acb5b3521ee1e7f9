"""Canary metric analysis: the sample activity's contract and the worker's analysis settings.

A canary step with `analysis` (spec reference §2) is judged one sample at a time: the
workflow resolves where the metrics live (`planning/rollout/analysis/source.py`), hands the
pinned metrics, the template fields and an explicit evaluation time to the activity
registered as `PROMETHEUS_ANALYSIS_SAMPLE` (`activities/prometheus.py`), and records the
judged sample it gets back. The names and models here are what both sides import, so they
agree without importing each other.

Public API:
- `PROMETHEUS_ANALYSIS_SAMPLE`: the activity's registered name
- input: `AnalysisSampleInput`, `PrometheusTarget`, `BearerTokenRef`, `TemplateFields`
- result: `AnalysisSampleResult`, `MetricResult` (the §2.6 `metricResults[]` entry), `Verdict`
- settings the workflow receives from the worker: `CanaryAnalysisConfig`, `MetricProviderBinding`
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from models.base import MessageModel, StatusModel
from models.inferenceservice import AnalysisMetric, SecretKeyRef

PROMETHEUS_ANALYSIS_SAMPLE = "prometheus.analysis_sample"
ROLLOUT_CANARY_SETTINGS = "rollout.canary_settings"
"""The activity that hands a Rollout the worker's canary settings (`CanarySettingsResult`)."""

Verdict = Literal["Pass", "Fail", "Inconclusive"]

AUTH_ENTRY = "auth"
"""The single `metricResults` entry of a sample whose bearer token could not be read (§2.6)."""
PROMETHEUS_ENTRY = "prometheus"
"""The single `metricResults` entry of a sample for which no Prometheus client could be built
(no address configured, or an address that is not an http(s) URL) (§2.6)."""


class MetricProviderBinding(MessageModel):
    """One entry of the cluster's `metricProviders` configuration (§2.2)."""

    server_address: str
    """Base URL of the provider's Prometheus HTTP API."""
    auth_secret_ref: SecretKeyRef | None = None
    """Bearer-token Secret, read in the InferenceService's namespace (copied there per namespace)."""
    headers: dict[str, str] = Field(default_factory=dict)
    """Plain headers sent with every query; a canary's own `headers` override them per key."""


class CanaryAnalysisConfig(MessageModel):
    """The worker's `canaryAnalysis` settings and `metricProviders` bindings (§2.2), as the
    workflow receives them. Values are kept as configured; `planning/rollout/analysis/source.py`
    applies the defaults and the fall-back for invalid values."""

    bundled_prometheus_address: str | None = None
    """The worker's own Prometheus URL; None when the worker has none configured."""
    default_provider: str | None = None
    query_timeout: str | None = None
    """Go duration; budget for all queries of one sample (default 5s)."""
    max_concurrency: int | None = None
    """Samples a worker runs at once (default 8)."""
    cache_ttl: str | None = None
    """Go duration a finished sample may be reused for (default 2m)."""
    metric_providers: dict[str, MetricProviderBinding] = Field(default_factory=dict)


class BearerTokenRef(MessageModel):
    """A key of a Secret holding a bearer token; read afresh on every sample."""

    namespace: str
    name: str
    key: str
    declared_by: str = "prometheus.authRef"
    """Where the reference comes from, so an error says what to fix (the canary's `authRef`, or
    a binding's `authSecretRef`)."""


class PrometheusTarget(MessageModel):
    """Where one sample's queries go, as resolved from the canary's `prometheus` block."""

    address: str | None
    """Base URL of the Prometheus HTTP API; None when nothing is configured, which makes every
    sample inconclusive."""
    headers: dict[str, str] = Field(default_factory=dict)
    bearer_token: BearerTokenRef | None = None
    provider: str | None = None
    """The `metricProviders` binding the address comes from, if any (for messages)."""


class TemplateFields(MessageModel):
    """The values of a metric query's Go-template fields (§2.3); the services are derived."""

    namespace: str
    isvc_name: str
    component: str
    """The canary group's router, else its engine."""
    canary_revision: str
    stable_revision: str


class AnalysisSampleInput(MessageModel):
    """One sample of one canary step: every metric queried at `time` within `query_timeout_seconds`."""

    target: PrometheusTarget
    metrics: list[AnalysisMetric] = Field(min_length=1)
    """The step's pinned metrics; their queries are templates rendered with `fields`."""
    fields: TemplateFields
    time: datetime
    """Evaluation time of every query (`time=` of `/api/v1/query`), chosen by the workflow, so
    a retried or replayed sample asks Prometheus the same question."""
    query_timeout_seconds: float = Field(default=5.0, gt=0)
    """Budget for all queries of this sample together."""
    step_number: int = Field(ge=1)
    """1-based, as `rollout status` counts steps; only for the summary."""
    sample_number: int = Field(ge=1)
    """1-based count of samples taken at this step; only for the summary."""


class MetricResult(StatusModel):
    """An entry of `status.components.<primary>.canary.metricResults` (§2.6)."""

    name: str
    value: str
    """The worst value of the metric's result vector, as Prometheus wrote it; empty when inconclusive."""
    threshold: str
    operator: str
    passed: bool
    message: str
    """Empty for a conclusive result; `no data`, `template error: ...`, `resolve bearer token: ...`
    or what went wrong with the query otherwise."""
    time: datetime

    @property
    def breached(self) -> bool:
        """Measured and outside its threshold (a failing check, unlike an inconclusive one)."""
        return not self.passed and self.value != ""

    @property
    def inconclusive(self) -> bool:
        return not self.passed and self.value == ""


class AnalysisSampleResult(MessageModel):
    """A judged sample: its verdict, the status entries, and one line for people."""

    verdict: Verdict
    metric_results: list[MetricResult]
    summary: str
    """E.g. `step 2 sample 3: Fail (error_rate 0.21 >= 0.05)`, for the Temporal UI and events."""


class CanarySettingsResult(MessageModel):
    """The worker's canary settings as a Rollout reads them: at run start (a `providerRef`
    without a binding parks the run) and before every sample (bindings are re-read)."""

    analysis: CanaryAnalysisConfig = Field(default_factory=CanaryAnalysisConfig)
    default_ready_timeout: str | None = "15m"
    """The operator's default canary ready timeout (spec reference §1.6); None: none."""
