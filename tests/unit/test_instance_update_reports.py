"""Which reports of an update the parent counts from its own request already
(`planning.instance.reports.counted_by_request`): only those that say the update is under way,
Ready on the old revision before; anything the parent counts otherwise still goes out."""

from __future__ import annotations

from typing import Any

import pytest

from models.instance import InstanceFailure, InstanceOperation, InstancePhase, InstanceStatus, RetryBlockState
from planning.instance.reports import counted_by_request, shows_a_wait
from tests.unit.planning.replica.rows import NEW, NOW
from tests.unit.planning.replica.test_reconcile import block
from tests.unit.planning.replica.test_status import status

pytestmark = pytest.mark.unit

P = InstancePhase
READY_OLD = status(1)
BLOCK = block(RetryBlockState.BACKOFF)


def updating(**changes: Any) -> InstanceStatus:
    """The Instance a moment into a surge update to NEW: its surge pod made, the old one serving."""
    return status(1).model_copy(update={"phase": P.UPDATING, "target_revision": NEW, "total_pods": 2, **changes})


@pytest.mark.parametrize(
    ("delivered", "now", "counted", "expected"),
    [
        # The update's start, and its surge pod made: what the request says already.
        (READY_OLD, updating(total_pods=1), NEW, True),
        (READY_OLD, updating(), NEW, True),
        # The surge pod serving, the old one going: the same pods still count.
        (READY_OLD, updating(pod_names=["chat-engine-1-default-1"]), NEW, True),
        # Not asked with the count, or asked for another revision.
        (READY_OLD, updating(), None, False),
        (READY_OLD, updating(), "chat-engine-rev-cccccccc", False),
        # Nothing the parent took yet, or it took something other than Ready on the old revision.
        (None, updating(), NEW, False),
        (status(1, P.CREATING), updating(), NEW, False),
        (READY_OLD.model_copy(update={"target_revision": NEW}), updating(), NEW, False),
        # The update ended, or became something else.
        (READY_OLD, status(1).model_copy(update={"running_revision": NEW, "target_revision": NEW}), NEW, False),
        (READY_OLD, updating(phase=P.FAILED), NEW, False),
        (READY_OLD, updating(phase=P.DELETING), NEW, False),
        # What the parent counts changed: pods, serving, a failure, a retry block, draining.
        (READY_OLD, updating(ready_pods=0), NEW, False),
        (READY_OLD, updating(serving_pods=0, serving=False), NEW, False),
        (READY_OLD, updating(available_pods=0), NEW, False),
        (READY_OLD, updating(retry_block=BLOCK), NEW, False),
        (READY_OLD, updating(last_failure=InstanceFailure(reason="ImagePullBackOff", time=NOW)), NEW, False),
        (READY_OLD, updating(draining=True), NEW, False),
        (READY_OLD, updating(incarnation=2), NEW, False),
        (READY_OLD, updating(running_revision=NEW), NEW, False),
    ],
)
def test_counted_by_request(
    delivered: InstanceStatus | None, now: InstanceStatus, counted: str | None, expected: bool
) -> None:
    assert counted_by_request(delivered, now, counted) is expected


def operation(waiting: str | None) -> InstanceOperation:
    return InstanceOperation(id="update-2", type="Update", step="surge", started_at=NOW, waiting=waiting)


@pytest.mark.parametrize(
    ("now", "expected"),
    [
        (updating(), False),
        (updating(operation=operation(None)), False),
        # A surge pod refused by the namespace's quota, or that fits no node: the parent's row
        # says so (the Instance sends it, `COUNTED_WAITS_REPORTED`), though the pods are the same.
        (updating(operation=operation("QuotaExceeded")), True),
        (updating(operation=operation("Unschedulable")), True),
    ],
)
def test_a_wait_is_news_the_request_does_not_carry(now: InstanceStatus, expected: bool) -> None:
    assert counted_by_request(READY_OLD, now, NEW)
    assert shows_a_wait(now) is expected
