"""Which reports of a deletion the parent counts from its own request already
(`planning.instance.reports.deletion_counted`): those that only say the Instance is being
deleted; its end, a change in its pods, and a failure still go out."""

from __future__ import annotations

import json
from typing import Any

import pytest
from temporalio.contrib.pydantic import pydantic_data_converter

from models.instance import (
    DeleteRequest,
    InstanceFailure,
    InstanceOperation,
    InstancePhase,
    InstanceStatus,
    RetryBlockState,
)
from planning.instance.reports import deletion_counted, pods_held
from planning.replica.batching import deletion_cost
from tests.unit.planning.replica.rows import NOW
from tests.unit.planning.replica.test_reconcile import block
from tests.unit.planning.replica.test_status import status

pytestmark = pytest.mark.unit

P = InstancePhase
READY = status(1)
DELETE = InstanceOperation(id="delete-2", type="Delete", step="DeletePods", started_at=NOW)


def deleting(**changes: Any) -> InstanceStatus:
    """The Instance a moment into its deletion: out of rotation, its pod Terminating."""
    return READY.model_copy(
        update={"phase": P.DELETING, "operation": DELETE, "draining": True, "serving": False, "serving_pods": 0, **changes}
    )


@pytest.mark.parametrize(
    ("delivered", "now", "expected"),
    [
        # Out of rotation, draining, its pods going: what the request says already.
        (READY, deleting(), True),
        (READY, deleting(ready_pods=0, ready=False, available_pods=0, available=False), True),
        (READY, deleting(operation=DELETE.model_copy(update={"waiting": "NodeUnknown"})), True),
        # A deletion asked while another report was the last one taken: it counts the same.
        (status(1, P.UPDATING), deleting(), True),
        (deleting(), deleting(ready_pods=0), True),
        # Its end: the report the parent forgets it by.
        (READY, deleting(deleted=True, total_pods=0), False),
        (READY, deleting(abandoned=True), False),
        # Not (or no longer) a deletion.
        (READY, READY, False),
        (READY, deleting(phase=P.READY), False),
        # Nothing taken yet to compare with.
        (None, deleting(), False),
        # Its one pod Terminating (not counted in `total_pods`): one pod of the budget all the same.
        (READY, deleting(total_pods=0), True),
        # What the parent counts: the pods a multi-pod Instance holds of the scale-down's budget
        # (down to 1 once they are Terminating), a failure, a retry block.
        (READY.model_copy(update={"total_pods": 2, "desired_pods": 2}), deleting(total_pods=0), False),
        (deleting(total_pods=2), deleting(total_pods=1), False),
        (deleting(total_pods=1), deleting(total_pods=0), True),
        (READY, deleting(last_failure=InstanceFailure(reason="Error", time=NOW)), False),
        (READY, deleting(retry_block=block(RetryBlockState.BACKOFF)), False),
        (READY, deleting(incarnation=2), False),
        (READY, deleting(gang_scheduling_unavailable=True), False),
    ],
)
def test_deletion_counted(delivered: InstanceStatus | None, now: InstanceStatus, expected: bool) -> None:
    assert deletion_counted(delivered, now) is expected


@pytest.mark.parametrize("pods", [0, 1, 2, 3, 8])
def test_the_instance_counts_the_pods_it_holds_as_its_parents_budget_does(pods: int) -> None:
    assert pods_held(deleting(total_pods=pods)) == deletion_cost(pods)


@pytest.mark.parametrize(
    ("wire", "says", "deadline"),
    [
        # A counting parent says the drain deadline, or that there is none.
        ({"counted_since": "2026-01-01T00:00:00Z", "drain_deadline": "2026-01-01T00:10:00Z"}, True, "00:10"),
        ({"counted_since": "2026-01-01T00:00:00Z", "drain_deadline": None}, True, None),
        # A parent of before had no such field: the Instance reckons it from its own spec.
        ({"counted_since": "2026-01-01T00:00:00Z", "drain_deadline_said": False}, False, None),
        # Nor does a deletion the parent does not count say one.
        ({"drain_deadline": None}, False, None),
    ],
)
def test_a_delete_request_says_its_drain_deadline_only_when_the_parent_sent_one(
    wire: dict[str, Any], says: bool, deadline: str | None
) -> None:
    request = DeleteRequest.model_validate({"reason": "ScaleDown", "drain_deadline_said": True, **wire})
    assert request.says_drain_deadline() is says
    shown = request.drain_deadline.strftime("%H:%M") if request.drain_deadline is not None else None
    assert shown == deadline


def test_a_request_of_before_says_no_drain_deadline_across_continue_as_new() -> None:
    """A delete of an old parent waiting in the Instance's state (`pending_delete`) when it
    continues as new still says nothing of its deadline: the new run reckons it itself."""
    old = DeleteRequest.model_validate_json(json.dumps({"reason": "ScaleDown", "counted_since": "2026-01-01T00:00:00Z"}))
    converter = pydantic_data_converter.payload_converter
    (carried,) = converter.from_payloads(converter.to_payloads([old]), [DeleteRequest])
    assert not old.says_drain_deadline() and not carried.says_drain_deadline()
    said = DeleteRequest(reason="ScaleDown", counted_since=NOW, drain_deadline=None, drain_deadline_said=True)
    (carried,) = converter.from_payloads(converter.to_payloads([said]), [DeleteRequest])
    assert carried.says_drain_deadline() and carried.drain_deadline is None
