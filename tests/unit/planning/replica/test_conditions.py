"""IR `Ready`, the ISVC component conditions and the other IR conditions (reference §8, §10)."""

from __future__ import annotations

import pytest

from planning.replica.budget import UpdatePolicy, minimum_serving
from planning.replica.conditions import (
    RolloutProgress,
    component_condition,
    gang_scheduling_condition,
    ready_condition,
    ready_timeout_condition,
    rollout_progress,
)
from planning.replica.facts import ReplicaCounts, replica_counts
from tests.unit.planning.replica.rows import NEW, NOW, OLD, creating, failed, ready, updating

pytestmark = pytest.mark.unit


def counts(ready: int = 0, serving: int = 0, failed: int = 0) -> ReplicaCounts:
    return ReplicaCounts(replicas=max(ready, serving), ready=ready, serving=serving, failed=failed)


def progress(
    in_flight: bool = False,
    staged: bool = False,
    updated: int = 1,
    total: int = 3,
    held: int = 0,
    partition: int = 0,
) -> RolloutProgress:
    return RolloutProgress(NEW, in_flight, staged, updated, total, held, partition)


@pytest.mark.parametrize(
    ("name", "desired", "counted", "minimum", "rollout", "status", "reason", "message"),
    [
        (
            "a failed instance wins over all",
            3,
            counts(3, 3, failed=1),
            3,
            progress(in_flight=True),
            "False",
            "InstanceFailed",
            "At least one Instance has Phase=Failed",
        ),
        (
            "staged",
            4,
            counts(4, 4),
            4,
            progress(staged=True, updated=2, total=4, held=2, partition=2),
            "True",
            "Staged",
            f"Staged at partition 2: 2/4 Instances on {NEW}, 2 held on the prior revision",
        ),
        (
            "rollout in flight",
            3,
            counts(3, 3),
            3,
            progress(in_flight=True, updated=1, total=3),
            "Unknown",
            "RolloutInProgress",
            f"Rolling out {NEW} (1/3 Instances on target)",
        ),
        (
            "no replicas",
            0,
            counts(),
            0,
            None,
            "False",
            "NoReplicas",
            "InferenceReplica has no desired Instances",
        ),
        ("all ready", 2, counts(2, 2), 2, None, "True", "AllInstancesReady", "2/2 Instances Ready"),
        (
            "migration extra is capped",
            2,
            counts(3, 3),
            2,
            None,
            "True",
            "AllInstancesReady",
            "2/2 Instances Ready",
        ),
        (
            "minimum available",
            4,
            counts(3, 3),
            3,
            None,
            "True",
            "MinimumAvailable",
            "3/4 Instances serving (min 3)",
        ),
        (
            "ready but not serving counts as short",
            2,
            counts(2, 1),
            2,
            progress(),
            "True",
            "AllInstancesReady",
            "2/2 Instances Ready",
        ),
        (
            "mismatch",
            3,
            counts(1, 1),
            3,
            None,
            "False",
            "ReplicaCountMismatch",
            "1/3 Instances serving, need 3 (no rollout in flight)",
        ),
        (
            "mismatch at zero",
            2,
            counts(),
            2,
            progress(),
            "False",
            "ReplicaCountMismatch",
            "0/2 Instances serving, need 2 (no rollout in flight)",
        ),
    ],
)
def test_ready_condition_first_match(
    name: str,
    desired: int,
    counted: ReplicaCounts,
    minimum: int,
    rollout: RolloutProgress | None,
    status: str,
    reason: str,
    message: str,
) -> None:
    condition = ready_condition(desired, counted, minimum, rollout)
    assert (condition.type, condition.status, condition.reason, condition.message) == (
        "Ready",
        status,
        reason,
        message,
    ), name


@pytest.mark.parametrize(
    ("name", "policy", "desired", "minimum"),
    [
        ("unset means all desired", UpdatePolicy(), 4, 4),
        ("int", UpdatePolicy(max_unavailable=1), 4, 3),
        ("percent rounds the budget up", UpdatePolicy(max_unavailable="25%"), 3, 2),
        ("larger than desired floors at zero", UpdatePolicy(max_unavailable=9), 2, 0),
    ],
)
def test_minimum_serving(name: str, policy: UpdatePolicy, desired: int, minimum: int) -> None:
    assert minimum_serving(policy, desired) == minimum, name


def test_rollout_progress_in_flight() -> None:
    result = rollout_progress([ready(0, NEW), updating(1), ready(2)], NEW, 0)
    assert result.in_flight and not result.staged
    assert (result.updated, result.total) == (1, 3)


def test_rollout_progress_staged_at_partition() -> None:
    result = rollout_progress([ready(0), ready(1), ready(2, NEW), ready(3, NEW)], NEW, 2)
    assert result.staged and not result.in_flight
    assert (result.updated, result.total, result.held) == (2, 4, 2)


def test_first_create_is_not_a_rollout() -> None:
    result = rollout_progress([creating(0, NEW), creating(1, NEW)], NEW, 0)
    assert not result.in_flight and not result.staged


def test_complete_rollout_is_neither() -> None:
    result = rollout_progress([ready(0, NEW), ready(1, NEW)], NEW, 0)
    assert not result.in_flight and not result.staged


def test_counts_from_rows() -> None:
    rows = [ready(0, NEW), ready(1, NEW, serving_for=1), failed(2), updating(3)]
    result = replica_counts(rows, NEW, NOW, min_ready_seconds=30)
    assert result == ReplicaCounts(
        replicas=4, ready=3, serving=3, available=2, updated=2, updated_ready=2, failed=1
    )


@pytest.mark.parametrize(
    ("name", "desired", "counted", "minimum", "status", "reason", "message"),
    [
        ("no replicas", 0, counts(), 0, "False", "NoReplicas", "Component has no desired Instances"),
        ("all ready", 2, counts(2, 2), 2, "True", "Ready", "All Instances are Ready"),
        ("minimum", 4, counts(3, 3), 3, "True", "MinimumAvailable", "3/4 Instances serving (min 3)"),
        (
            "insufficient",
            4,
            counts(1, 1),
            3,
            "False",
            "InsufficientAvailable",
            "1/4 Instances serving, need 3",
        ),
    ],
)
def test_component_condition(
    name: str, desired: int, counted: ReplicaCounts, minimum: int, status: str, reason: str, message: str
) -> None:
    condition = component_condition("engine", desired, counted, minimum)
    assert (condition.type, condition.status, condition.reason, condition.message) == (
        "EngineReady",
        status,
        reason,
        message,
    ), name


@pytest.mark.parametrize(
    ("component", "kind"), [("engine", "EngineReady"), ("decoder", "DecoderReady"), ("router", "RouterReady")]
)
def test_component_condition_types(component: str, kind: str) -> None:
    assert component_condition(component, 1, counts(1, 1), 1).type == kind


@pytest.mark.parametrize(
    ("multi_pod", "crd", "status", "reason"),
    [
        (True, False, "True", "PodGroupCRDNotInstalled"),
        (True, True, "False", "GangSchedulingAvailable"),
        (False, False, "False", "GangSchedulingAvailable"),
    ],
)
def test_gang_scheduling(multi_pod: bool, crd: bool, status: str, reason: str) -> None:
    condition = gang_scheduling_condition(multi_pod, crd)
    assert (condition.type, condition.status, condition.reason) == (
        "GangSchedulingUnavailable",
        status,
        reason,
    )


@pytest.mark.parametrize(
    ("seconds", "status", "reason", "message_start"),
    [
        (2700.0, "False", "InstanceReadyTimeoutConfigured", "Instance readiness deadline is 45m0s"),
        (1800.0, "False", "InstanceReadyTimeoutConfigured", "Instance readiness deadline is 30m0s"),
        (3600.0, "False", "InstanceReadyTimeoutConfigured", "Instance readiness deadline is 1h0m0s"),
        (None, "True", "InstanceReadyTimeoutUnconfigured", "no instanceReadyTimeout is set"),
        (0.0, "True", "InstanceReadyTimeoutUnconfigured", "no instanceReadyTimeout is set"),
        (-5.0, "True", "InstanceReadyTimeoutUnconfigured", "no instanceReadyTimeout is set"),
    ],
)
def test_ready_timeout(seconds: float | None, status: str, reason: str, message_start: str) -> None:
    condition = ready_timeout_condition(seconds)
    assert (condition.type, condition.status, condition.reason) == (
        "InstanceReadyTimeoutUnconfigured",
        status,
        reason,
    )
    assert condition.message.startswith(message_start)


def test_failed_then_ready_condition_from_rows() -> None:
    rows = [ready(0), failed(1, OLD)]
    result = replica_counts(rows, OLD, NOW, 0)
    assert ready_condition(2, result, 2, rollout_progress(rows, OLD, 0)).reason == "InstanceFailed"


def test_drain_overdue_condition() -> None:
    from datetime import UTC, datetime, timedelta

    from planning.replica.conditions import drain_overdue_condition, next_drain_deadline

    t0 = datetime(2025, 1, 1, tzinfo=UTC)
    deletions = [(3, t0 + timedelta(seconds=60)), (1, t0 + timedelta(seconds=30))]
    calm = drain_overdue_condition(deletions, t0)
    assert (calm.type, calm.status, calm.reason) == ("DrainOverdue", "False", "DrainsWithinDeadline")
    assert next_drain_deadline(deletions, t0) == t0 + timedelta(seconds=30)
    overdue = drain_overdue_condition(deletions, t0 + timedelta(seconds=31))
    assert (overdue.status, overdue.reason) == ("True", "DrainsOverdue")
    assert overdue.message == (
        "drain of instance(s) 1 overdue (earliest deadline 2025-01-01T00:00:30Z); pods still Terminating"
    )
    assert next_drain_deadline(deletions, t0 + timedelta(seconds=31)) == t0 + timedelta(seconds=60)
    assert drain_overdue_condition([], t0).status == "False"
