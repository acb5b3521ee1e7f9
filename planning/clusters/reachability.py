"""A WorkloadCluster's `Ready` condition (reference §16): reachability only, never capacity.

The first row that matches decides:

| Reason                      | Status | When                                                              |
|-----------------------------|--------|-------------------------------------------------------------------|
| `ClusterProfileUnsupported` | False  | `spec.clusterSource.clusterProfileRef` is used                    |
| `SecretNotFound`            | False  | the kubeconfig Secret, or its key, does not exist                 |
| `BadKubeConfig`             | False  | the kubeconfig breaks a rule (`models.kubeconfig`)                |
| `Reachable`                 | True   | the last GET /version answered                                    |
| `ProbeFailedRetrying`       | True   | GET /version fails, for less than `connectionGrace` (default 2m) since the last success |
| `ConnectionFailed`          | False  | GET /version fails, past the grace or never succeeded             |

`lastTransitionTime` moves only when the status does; `observedGeneration` is the
WorkloadCluster's generation the condition was computed for.

Public API: `ClusterObservation`, `ready_condition`, `ProbeFailure`, `SOURCE_KUBECONFIG`,
`SOURCE_CLUSTER_PROFILE`, `DEFAULT_CONNECTION_GRACE_SECONDS`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from models.duration import format_duration
from models.inferencereplica import Condition

SOURCE_KUBECONFIG = "kubeConfig"
SOURCE_CLUSTER_PROFILE = "clusterProfileRef"
DEFAULT_CONNECTION_GRACE_SECONDS = 120.0
READY = "Ready"


@dataclass(frozen=True)
class ProbeFailure:
    """GET /version failed: `error` is what the client said (capped by the caller)."""

    error: str


@dataclass(frozen=True)
class ClusterObservation:
    """What the directory saw of one WorkloadCluster in one pass.

    `secret_missing` says what is missing (`Secret ome/wa-kubeconfig` or `key "kubeconfig" in
    Secret ome/wa-kubeconfig`), `kubeconfig_problem` is a `KubeConfigError`'s message, `probe`
    the outcome of GET /version (None: reached, or not probed because of an earlier problem).
    `last_success` is the last reached probe, `first_failure` the first failed one after it.
    """

    source: str = SOURCE_KUBECONFIG
    secret_ref: str = ""
    secret_missing: str | None = None
    kubeconfig_problem: str | None = None
    probe: ProbeFailure | None = None
    last_success: datetime | None = None
    first_failure: datetime | None = None
    generation: int | None = None


def ready_condition(
    seen: ClusterObservation,
    now: datetime,
    previous: Condition | None = None,
    connection_grace_seconds: float = DEFAULT_CONNECTION_GRACE_SECONDS,
) -> Condition:
    """The `Ready` condition for `seen` at `now`; `previous` is the one on the object."""
    status, reason, message = _row(seen, now, connection_grace_seconds)
    kept = previous is not None and previous.status == status and previous.last_transition_time is not None
    return Condition(
        type=READY,
        status=status,
        reason=reason,
        message=message,
        last_transition_time=previous.last_transition_time if kept and previous is not None else now,
        observed_generation=seen.generation,
    )


def _row(seen: ClusterObservation, now: datetime, grace: float) -> tuple[str, str, str]:
    if seen.source == SOURCE_CLUSTER_PROFILE:
        return (
            "False",
            "ClusterProfileUnsupported",
            "spec.clusterSource.clusterProfileRef is not supported: point spec.clusterSource.kubeConfig "
            "at a kubeconfig Secret instead",
        )
    if seen.secret_missing is not None:
        return (
            "False",
            "SecretNotFound",
            f"{seen.secret_missing} not found: create it with the cluster's kubeconfig, or fix "
            f"spec.clusterSource.kubeConfig",
        )
    if seen.kubeconfig_problem is not None:
        where = f" in Secret {seen.secret_ref}" if seen.secret_ref else ""
        return ("False", "BadKubeConfig", f"kubeconfig{where}: {seen.kubeconfig_problem}")
    if seen.probe is None:
        return ("True", "Reachable", "GET /version answered")
    failing_since = seen.first_failure or now
    since = rfc3339(failing_since)
    if seen.last_success is not None:
        if (now - failing_since).total_seconds() < grace:
            return (
                "True",
                "ProbeFailedRetrying",
                f"GET /version failing since {since}, within the {format_duration(grace)} connection grace; "
                f"retrying: {seen.probe.error}",
            )
        return (
            "False",
            "ConnectionFailed",
            f"GET /version failing since {since}, past the {format_duration(grace)} connection grace: "
            f"{seen.probe.error}",
        )
    return ("False", "ConnectionFailed", f"GET /version failed and never succeeded: {seen.probe.error}")


def rfc3339(moment: datetime) -> str:
    """`2026-01-02T03:04:05Z`, as Kubernetes writes times (UTC, whole seconds)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
