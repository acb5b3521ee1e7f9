"""Settings of the lifecycle features that reach beyond Temporal and Kubernetes: Prometheus, canary
analysis, migration caps, workload clusters and multi-cluster routing (`OME_PROMETHEUS__*`,
`OME_CANARY__*`, `OME_MIGRATION__*`, `OME_CLUSTERS__*`, `OME_ROUTING__*`). `workers.config.Settings`
gathers them with the process's own groups.
"""

from __future__ import annotations

from typing import Any

from pydantic import model_validator

from models.canary_analysis import CanaryAnalysisConfig, MetricProviderBinding
from models.duration import parse_duration
from models.migration import MigrationAudit
from models.routing_ops import RoutingSettingsResult
from planning.trafficmap.policy import chart_problems
from workers.config_base import SettingsError, SettingsGroup


class PrometheusSettings(SettingsGroup):
    """Where metric-driven decisions (canary analysis, autoscaling) read their figures."""

    url: str | None = None
    """Base URL of the Prometheus HTTP API, e.g. `http://prometheus:9090`. Unset: no Prometheus
    is configured, which is the local stack's case; docker-compose sets it to its own service."""

    worker_metrics_address: str | None = None
    """host:port where the worker serves the Temporal SDK's metrics (task latencies, slots,
    schedule-to-start) at `/metrics` for Prometheus to scrape. Unset: not served, so two local
    workers never fight over a port; docker-compose sets `0.0.0.0:9464`."""

    controller_metrics_address: str | None = None
    """host:port where the controller serves the product's state gauges (`ome_instances`,
    `ome_instance_drains_overdue`, `ome_rollout_hold_*_timestamp_seconds`, rendered from the
    InferenceReplicas it watches) at `/metrics`. Unset: not served; docker-compose and
    deploy/controller.yaml set `0.0.0.0:9465`."""


class CanarySettings(SettingsGroup):
    """Canary rollouts: the operator's default ready timeout and the `canaryAnalysis` settings
    and `metricProviders` bindings of spec reference §1.6 and §2.2."""

    default_ready_timeout: str | None = "15m"
    """Go duration a canary step may wait for its capacity, or for a conclusive sample, when
    neither the InferenceService annotation `ome.io/rollout-ready-timeout` nor the group's
    `canary.readyTimeout` sets one. The chart's 15m; empty: no timeout at all."""

    default_provider: str | None = None
    """Binding in `metric_providers` that canaries without `prometheus` query. Unset: the
    worker's Prometheus (`OME_PROMETHEUS__URL`)."""

    query_timeout: str | None = None
    """Go duration: budget for all queries of one sample (5s when unset or invalid)."""

    max_concurrency: int | None = None
    """Samples the worker runs at once (8 when unset or below 1)."""

    cache_ttl: str | None = None
    """Go duration a finished sample may be reused (2m when unset or invalid)."""

    metric_providers: dict[str, MetricProviderBinding] = {}
    """Bindings a canary names with `prometheus.providerRef`, as JSON:
    `{"cluster-prometheus": {"server_address": "http://prom:9090", "auth_secret_ref":
    {"name": "prom-token", "key": "token"}, "headers": {"X-Scope-OrgID": "team-a"}}}`."""

    def analysis_config(self, prometheus_url: str | None) -> CanaryAnalysisConfig:
        """What a Rollout reads (through an activity) to resolve where its samples go."""
        return CanaryAnalysisConfig(
            bundled_prometheus_address=prometheus_url,
            default_provider=self.default_provider,
            query_timeout=self.query_timeout,
            max_concurrency=self.max_concurrency,
            cache_ttl=self.cache_ttl,
            metric_providers=dict(self.metric_providers),
        )


class MigrationSettings(SettingsGroup):
    """Migration caps: OME's `lifecycle.audit` (spec reference §13). All three must be set
    and above zero; set a cap to 0 or the window empty and migrations wait in `Accepted` with
    `waiting for migration capacity policy (no lifecycle.audit configured)`."""

    max_in_flight_migrations: int | None = 3
    """Chart 3. Read, as OME does, with no effect: one migration per component runs."""

    max_migrations_per_window: int | None = 10
    """Chart 10: migrations a component may begin within `window`; the next fails `RateLimited`."""

    window: str | None = "1h"
    """Go duration (chart `1h`): the rate cap's window, and how long an ended migration stays
    listed in the InferenceReplica's `status.migrations`."""

    @model_validator(mode="after")
    def _durations(self) -> MigrationSettings:
        if self.window:
            try:
                parse_duration(self.window)
            except ValueError as error:
                raise SettingsError(
                    f"OME_MIGRATION__WINDOW={self.window!r} is not a Go duration ({error}); set it like 1h or 30m"
                ) from error
        return self

    def audit(self) -> MigrationAudit | None:
        """The caps a Migration reads (through an activity); None when not all are set above zero."""
        values = (self.max_in_flight_migrations, self.max_migrations_per_window)
        window = parse_duration(self.window) if self.window else 0.0
        if any(v is None or v <= 0 for v in values) or window <= 0:
            return None
        return MigrationAudit(
            max_in_flight_migrations=self.max_in_flight_migrations,
            max_migrations_per_window=self.max_migrations_per_window,
            window_seconds=window,
        )


class ClustersSettings(SettingsGroup):
    """Reaching workload clusters (reference §16): how often WorkloadClusters and their kubeconfig
    Secrets are re-read and probed (GET /version), and how long a failing probe is forgiven."""

    connection_grace: str = "2m"
    """Go duration a reachable cluster's failing GET /version stays `Ready` True
    (`ProbeFailedRetrying`) before it turns `ConnectionFailed`: OME's `connectionGrace`."""

    refresh_interval: str = "15s"
    """Go duration between two passes over the WorkloadClusters: new, removed and changed ones
    (and their Secrets) are picked up, every cluster is probed, and exported InferencePools are
    imported."""

    @model_validator(mode="after")
    def _durations(self) -> ClustersSettings:
        for name in ("connection_grace", "refresh_interval"):
            value = getattr(self, name)
            try:
                seconds = parse_duration(value)
            except ValueError as error:
                raise SettingsError(
                    f"OME_CLUSTERS__{name.upper()}={value!r} is not a Go duration ({error}); set it like 2m or 15s"
                ) from error
            if seconds <= 0 and name == "refresh_interval":
                raise SettingsError(f"OME_CLUSTERS__REFRESH_INTERVAL={value!r} must be above zero; set it like 15s")
        return self

    @property
    def connection_grace_seconds(self) -> float:
        return parse_duration(self.connection_grace)

    @property
    def refresh_interval_seconds(self) -> float:
        return parse_duration(self.refresh_interval)
class RoutingSettings(SettingsGroup):
    """Multi-cluster routing on the control plane (spec reference §17-§21): the chart's
    `ome.multicluster.config.endpoint`, its probe and capacity defaults and the publisher's
    resync. Checked when the worker starts: a bad value stops it with OME's
    `invalid multi-cluster configuration` text."""

    global_gateway: str = ""
    """Gateway the global HTTPRoutes attach to, `ns/name` or `name` (in the route's namespace).
    Empty (the chart's default): no global endpoint; maps are `Withdrawn`."""

    backend_port: int = 0
    """Port of each home gateway that the ExternalName backends point at. Required, 1-65535,
    with a gateway; 0 (the chart's default) withdraws the route."""

    global_host_template: str = ""
    """Go template of the global hostname with only `{{ .Name }}` and `{{ .Namespace }}`, e.g.
    `{{ .Name }}.{{ .Namespace }}.global.example.com`. Empty: only InferenceServices with the
    `ome.io/global-host` annotation are published."""

    resync_interval: str = "1m"
    """Go duration: how often a published route is written again (reverting hand edits and
    retrying a failed publication) when nothing changed. OME's `routing.publisher.resyncInterval`."""

    probe: dict[str, Any] | None = None
    """JSON of the chart's routing health probe (`spec.routing.probe`'s nine fields: path,
    method, acceptStatuses, gateStatuses, period, timeout, failureThreshold, successThreshold,
    allFailedPolicy). Unset (the chart sets none): no probes unless a service sets its own."""

    capacity: dict[str, Any] | None = None
    """JSON of the chart's routing capacity poll (`spec.routing.capacity`: path, method, format,
    samples, quorum, period, timeout, maxAge). Unset: no polling unless a service sets its own."""

    @model_validator(mode="after")
    def _valid(self) -> RoutingSettings:
        problems = chart_problems(self.probe, self.capacity)
        try:
            interval = parse_duration(self.resync_interval)
            if interval <= 0:
                problems.append(f'invalid multi-cluster configuration: routing.publisher.resyncInterval: '
                                f'"{self.resync_interval}" must be positive')
        except ValueError:
            problems.append(f'invalid multi-cluster configuration: routing.publisher.resyncInterval: '
                            f'"{self.resync_interval}" is not a duration (use forms like "30s", "5m")')
        if self.global_gateway and not 1 <= self.backend_port <= 65535:
            problems.append(f"invalid multi-cluster configuration: OME_ROUTING__BACKEND_PORT must be from 1 to 65535 "
                            f"with OME_ROUTING__GLOBAL_GATEWAY set, got {self.backend_port}")
        if problems:
            raise SettingsError("; ".join(problems))
        return self

    def result(self) -> RoutingSettingsResult:
        """What a TrafficMap reads (through an activity)."""
        return RoutingSettingsResult(
            global_gateway=self.global_gateway,
            backend_port=self.backend_port,
            global_host_template=self.global_host_template,
            resync_interval_seconds=parse_duration(self.resync_interval),
            probe=self.probe,
            capacity=self.capacity,
        )
