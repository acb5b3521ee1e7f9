"""Where a canary's metrics live, and the limits of sampling them (spec reference §2.2).

A canary's `prometheus` block names its source one of three ways, resolved against the
cluster's configuration (`CanaryAnalysisConfig`: the `metricProviders` bindings, the
`defaultProvider`, and the bundled address, which is the worker's own Prometheus URL):

| canary's block | address | bearer token | headers |
| --- | --- | --- | --- |
| unset or empty, `defaultProvider` bound | the default binding's | `authRef`, else the binding's | binding's, overridden per key by the canary's |
| unset or empty, otherwise | bundled | `authRef` | the canary's |
| `providerRef`, bound | the binding's | `authRef`, else the binding's | binding's, overridden per key |
| `providerRef`, unbound mid-run | bundled | none | none |
| `serverAddress` | that URL | `authRef` | the canary's |

A `providerRef` that is unbound when a run starts parks the run (`ProviderUnbound`) instead;
`check_source` is that run-start check and `resolve_source` the per-sample resolution (the
binding and the token Secret are re-read on every sample, so a binding added mid-run is
used from the next sample). Token Secrets are read in the InferenceService's namespace.

The `canaryAnalysis` limits: `queryTimeout` (5s, budget for all queries of one sample),
`maxConcurrency` (8 samples at once), `cacheTTL` (2m reuse of a finished sample); a missing,
non-positive or unreadable value falls back to its default.
"""

from __future__ import annotations

from dataclasses import dataclass

from models.canary_analysis import (
    BearerTokenRef,
    CanaryAnalysisConfig,
    MetricProviderBinding,
    PrometheusTarget,
)
from models.duration import parse_duration
from models.inferenceservice import PrometheusSource, SecretKeyRef
from planning.rollout.plan import Parked

DEFAULT_QUERY_TIMEOUT_SECONDS = 5.0
DEFAULT_MAX_CONCURRENCY = 8
DEFAULT_CACHE_TTL_SECONDS = 120.0

AUTH_REF_FIELD = "prometheus.authRef"


@dataclass(frozen=True)
class AnalysisLimits:
    """The `canaryAnalysis` limits in effect."""

    query_timeout_seconds: float = DEFAULT_QUERY_TIMEOUT_SECONDS
    """Budget for all queries of one sample: a slow Prometheus makes the sample inconclusive
    rather than holding a worker slot."""
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY
    """Samples run at once, so many canaries sampling together cannot flood Prometheus."""
    cache_ttl_seconds: float = DEFAULT_CACHE_TTL_SECONDS
    """How long a finished sample may be reused instead of querying again."""


def _positive_duration(text: str | None, default: float) -> float:
    if text is None:
        return default
    try:
        seconds = parse_duration(text)
    except ValueError:
        return default
    return seconds if seconds > 0 else default


def analysis_limits(config: CanaryAnalysisConfig) -> AnalysisLimits:
    """The configured limits, each invalid or missing one replaced by its default."""
    concurrency = config.max_concurrency
    return AnalysisLimits(
        query_timeout_seconds=_positive_duration(config.query_timeout, DEFAULT_QUERY_TIMEOUT_SECONDS),
        max_concurrency=concurrency if concurrency is not None and concurrency >= 1 else DEFAULT_MAX_CONCURRENCY,
        cache_ttl_seconds=_positive_duration(config.cache_ttl, DEFAULT_CACHE_TTL_SECONDS),
    )


def provider_unbound_message(group_index: int, provider: str) -> str:
    return (
        f'groups[{group_index}]: metric provider "{provider}" is not bound in this cluster\'s '
        "metricProviders configuration"
    )


def check_source(group_index: int, source: PrometheusSource | None, config: CanaryAnalysisConfig) -> Parked | None:
    """At run start: the park of a canary whose `providerRef` names no binding, else None."""
    if source is None:
        return None
    if source.provider_ref is not None and source.server_address:
        # Admission refuses this; a plan pinned before that rule must not pick one silently.
        return Parked(
            "PlanInvalid",
            f"groups[{group_index}]: prometheus: at most one of providerRef and serverAddress may be set",
        )
    if source.provider_ref is not None and source.provider_ref.name not in config.metric_providers:
        return Parked("ProviderUnbound", provider_unbound_message(group_index, source.provider_ref.name))
    return None


def _token(namespace: str, ref: SecretKeyRef | None, declared_by: str) -> BearerTokenRef | None:
    if ref is None:
        return None
    return BearerTokenRef(namespace=namespace, name=ref.name, key=ref.key, declared_by=declared_by)


def _from_binding(
    name: str, binding: MetricProviderBinding, source: PrometheusSource | None, namespace: str
) -> PrometheusTarget:
    canary_token = source.auth_ref if source is not None else None
    if canary_token is not None:
        token = _token(namespace, canary_token, AUTH_REF_FIELD)
    else:
        token = _token(namespace, binding.auth_secret_ref, f'metricProviders["{name}"].authSecretRef')
    headers = {**binding.headers, **((source.headers if source is not None else None) or {})}
    return PrometheusTarget(address=binding.server_address, headers=headers, bearer_token=token, provider=name)


def _with_canary_auth(address: str | None, source: PrometheusSource | None, namespace: str) -> PrometheusTarget:
    if source is None:
        return PrometheusTarget(address=address)
    return PrometheusTarget(
        address=address,
        headers=dict(source.headers or {}),
        bearer_token=_token(namespace, source.auth_ref, AUTH_REF_FIELD),
    )


def resolve_source(source: PrometheusSource | None, config: CanaryAnalysisConfig, namespace: str) -> PrometheusTarget:
    """Where this sample's queries go (the table in the module docstring); never parks."""
    bundled = config.bundled_prometheus_address or None
    if source is not None and source.provider_ref is not None:
        name = source.provider_ref.name
        binding = config.metric_providers.get(name)
        if binding is None:
            # Unbound mid-run: the bundled Prometheus, without the canary's credentials, which
            # were meant for the provider.
            return PrometheusTarget(address=bundled)
        return _from_binding(name, binding, source, namespace)
    if source is not None and source.server_address:
        return _with_canary_auth(source.server_address, source, namespace)
    default = config.default_provider
    if default and default in config.metric_providers:
        return _from_binding(default, config.metric_providers[default], source, namespace)
    # No default provider, or an unbound one: the bundled address, silently (§2.2).
    return _with_canary_auth(bundled, source, namespace)
