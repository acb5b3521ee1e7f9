"""InferenceReplica status projection and `kubectl get irep` columns (reference §8)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from models.inferencereplica import Condition
from models.instance import InstanceFailure, InstancePhase, InstanceStatus, RetryBlock, RetryBlockState
from planning.replica.conditions import PlannedCondition
from planning.replica.facts import ReplicaCounts
from planning.replica.hold import HoldGate, RolloutHold
from planning.replica.revisions import RevisionState
from planning.replica.status import get_irep_columns, label_selector, project_status, with_transitions
from tests.unit.planning.replica.rows import NEW, NOW, OLD

pytestmark = pytest.mark.unit


def status(index: int, phase: InstancePhase = InstancePhase.READY) -> InstanceStatus:
    return InstanceStatus(
        namespace="prod",
        isvc="chat",
        component="engine",
        index=index,
        phase=phase,
        incarnation=1,
        running_revision=OLD,
        target_revision=OLD,
        desired_pods=1,
        total_pods=1,
        ready_pods=1,
        serving_pods=1,
        available_pods=1,
        ready=True,
        serving=True,
        last_failure=InstanceFailure(reason="CrashLoopBackOff", time=NOW)
        if phase == InstancePhase.FAILED
        else None,
    )


def test_projection() -> None:
    block = RetryBlock(
        target_revision=NEW,
        state=RetryBlockState.HELD,
        attempts_started=3,
        first_failure_at=NOW,
        last_failure_at=NOW,
        reason="ErrImagePull",
    )
    hold = RolloutHold(HoldGate.HELD, "held", NEW, NOW)
    result = project_status(
        isvc="chat",
        component="engine",
        generation=5,
        instances=[status(1), status(0, InstancePhase.FAILED)],
        counts=ReplicaCounts(
            replicas=2, ready=2, serving=2, available=1, updated=0, updated_ready=0, failed=1
        ),
        revisions=RevisionState(current=OLD, update=NEW),
        retry_blocks=[block],
        hold=hold,
        conditions=[
            PlannedCondition("Ready", "False", "InstanceFailed", "At least one Instance has Phase=Failed")
        ],
        previous_conditions=[],
        now=NOW,
    )
    wire = result.to_manifest()
    assert wire["observedGeneration"] == 5
    assert (wire["replicas"], wire["readyReplicas"], wire["availableReplicas"]) == (2, 2, 1)
    assert (wire["currentRevision"], wire["updateRevision"]) == (OLD, NEW)
    assert wire["labelSelector"] == "ome.io/component=engine,ome.io/inferenceservice=chat"
    assert [row["index"] for row in wire["instanceStatuses"]] == [0, 1]
    assert wire["instanceStatuses"][0]["lastFailure"]["reason"] == "CrashLoopBackOff"
    assert wire["retryBlocks"][0]["state"] == "Held"
    assert wire["rolloutHold"]["gate"] == "Held"
    assert wire["conditions"][0]["reason"] == "InstanceFailed"
    assert get_irep_columns("engine", 2, result) == ("engine", 2, 2, 2, 1)


def test_transition_time_kept_while_status_unchanged() -> None:
    earlier = NOW - timedelta(minutes=3)
    previous = [
        Condition(type="Ready", status="True", reason="AllInstancesReady", last_transition_time=earlier)
    ]
    same = with_transitions(previous, [PlannedCondition("Ready", "True", "MinimumAvailable", "m")], NOW, 1)
    assert same[0].last_transition_time == earlier
    flipped = with_transitions(previous, [PlannedCondition("Ready", "False", "InstanceFailed", "m")], NOW, 1)
    assert flipped[0].last_transition_time == NOW


def test_label_selector() -> None:
    assert label_selector("chat", "decoder") == "ome.io/component=decoder,ome.io/inferenceservice=chat"
