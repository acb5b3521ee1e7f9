"""When an InferenceReplica is at rest (`workflows.replica.rest.at_rest`), which lets a run hand
over to a new one early (`history_budget.hands_over_at_rest`)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from models.instance import InstanceOperation, InstancePhase, InstanceStatus
from planning.replica.revisions import RevisionState
from tests.unit.replica_rows import ready_report, replica_config
from workflows.replica.messages import ReplicaState
from workflows.replica.rest import at_rest

pytestmark = pytest.mark.unit

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
REVISION = "bbbbbbbb"


def instance(index: int, phase: InstancePhase = InstancePhase.READY, operation: str | None = None) -> InstanceStatus:
    status = ready_report(index, REVISION, NOW, phase)
    if operation is not None:
        begun = InstanceOperation(id="update-2", type=operation, step="CreatePods", started_at=NOW)
        status = status.model_copy(update={"operation": begun})
    return status


def state(**fields: Any) -> ReplicaState:
    values: dict[str, Any] = {"instances": {0: instance(0), 1: instance(1)}, "last_desired": 2}
    values.update(fields)
    return ReplicaState(config=replica_config(REVISION), **values)


def with_instance(status: InstanceStatus) -> Callable[[], ReplicaState]:
    return lambda: state(instances={0: instance(0), status.index: status})


@pytest.mark.parametrize(
    ("make", "rests"),
    [
        (lambda: state(), True),
        (lambda: state(instances={}), True),
        (with_instance(instance(1, InstancePhase.UPDATING)), False),
        (with_instance(instance(1, InstancePhase.READY, operation="Update")), False),
        (with_instance(instance(1, InstancePhase.FAILED)), True),
        (lambda: state(launched={2: REVISION}), False),
        (lambda: state(requested_updates={1: "cccccccc"}), False),
        (lambda: state(removing=[1]), False),
        (lambda: state(pending_resets=["all"]), False),
        (lambda: state(pending_releases=[REVISION]), False),
        (lambda: state(deleting=True), False),
        (lambda: state(revisions=RevisionState(current=REVISION, update="cccccccc")), False),
    ],
    ids=[
        "all-ready",
        "no-instances",
        "an-instance-updating",
        "an-operation-on-a-ready-one",
        "a-failed-one-rests",
        "a-start-unanswered",
        "an-update-unanswered",
        "a-removal-unanswered",
        "a-reset-waiting",
        "a-release-waiting",
        "deleting",
        "a-rollout-under-way",
    ],
)
def test_at_rest(make: Callable[[], ReplicaState], rests: bool) -> None:
    assert at_rest(make()) is rests
