"""`planning.clusters.reachability`: a WorkloadCluster's `Ready` condition (reference §16)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from models.inferencereplica import Condition
from models.workloadcluster import READY_REASONS
from planning.clusters.reachability import (
    SOURCE_CLUSTER_PROFILE,
    ClusterObservation,
    ProbeFailure,
    ready_condition,
)

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
REFUSED = ProbeFailure("connection refused")


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


CASES = [
    ("cluster profile", ClusterObservation(source=SOURCE_CLUSTER_PROFILE), "False", "ClusterProfileUnsupported",
     ["clusterProfileRef is not supported", "kubeConfig"]),
    ("secret missing", ClusterObservation(secret_missing="Secret ome/wa-kubeconfig"), "False", "SecretNotFound",
     ["Secret ome/wa-kubeconfig not found"]),
    ("key missing", ClusterObservation(secret_missing='key "kubeconfig" of Secret ome/wa'), "False",
     "SecretNotFound", ['key "kubeconfig" of Secret ome/wa not found']),
    ("bad kubeconfig", ClusterObservation(secret_ref="ome/wa", kubeconfig_problem="server 'http://x' is not https://"),
     "False", "BadKubeConfig", ["kubeconfig in Secret ome/wa: server 'http://x' is not https://"]),
    ("reachable", ClusterObservation(last_success=NOW), "True", "Reachable", ["GET /version answered"]),
    ("failing within grace", ClusterObservation(probe=REFUSED, last_success=ago(30), first_failure=ago(15)),
     "True", "ProbeFailedRetrying",
     ["failing since 2026-01-02T03:03:50Z", "within the 2m0s connection grace", "connection refused"]),
    ("failing past grace", ClusterObservation(probe=REFUSED, last_success=ago(200), first_failure=ago(120)),
     "False", "ConnectionFailed", ["past the 2m0s connection grace: connection refused"]),
    ("never reached", ClusterObservation(probe=REFUSED, first_failure=ago(1)), "False", "ConnectionFailed",
     ["never succeeded: connection refused"]),
    # A secret problem outranks an old probe failure.
    ("secret beats probe", ClusterObservation(secret_missing="Secret a/b", probe=REFUSED), "False", "SecretNotFound",
     []),
]


@pytest.mark.parametrize(("seen", "status", "reason", "fragments"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_ready_condition_rows(seen: ClusterObservation, status: str, reason: str, fragments: list[str]) -> None:
    condition = ready_condition(seen, NOW)
    assert (condition.type, condition.status, condition.reason) == ("Ready", status, reason)
    assert READY_REASONS[reason] == status
    for fragment in fragments:
        assert fragment in condition.message


def test_grace_is_a_setting() -> None:
    seen = ClusterObservation(probe=REFUSED, last_success=ago(40), first_failure=ago(30))
    assert ready_condition(seen, NOW, connection_grace_seconds=20).reason == "ConnectionFailed"
    assert ready_condition(seen, NOW, connection_grace_seconds=60).reason == "ProbeFailedRetrying"


def test_last_transition_time_moves_only_with_the_status() -> None:
    earlier = ago(600)
    reachable = Condition(type="Ready", status="True", reason="Reachable", last_transition_time=earlier)
    retrying = ready_condition(
        ClusterObservation(probe=REFUSED, last_success=ago(20), first_failure=ago(5)), NOW, reachable
    )
    assert (retrying.reason, retrying.last_transition_time) == ("ProbeFailedRetrying", earlier)
    failed = ready_condition(ClusterObservation(probe=REFUSED, first_failure=ago(5)), NOW, retrying)
    assert (failed.status, failed.last_transition_time) == ("False", NOW)


def test_observed_generation_is_carried() -> None:
    assert ready_condition(ClusterObservation(generation=7), NOW).observed_generation == 7
