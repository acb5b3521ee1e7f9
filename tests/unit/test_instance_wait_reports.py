"""An operation's wait is news to the parent (`versions.WAITS_REPORTED`, Instance version 10):
a report goes out when it starts or ends, so the InferenceReplica's row says what a create, an
update or a deletion waits on (`planning.instance.reports.wait_changed`, the fingerprint's
`waits`). Runs from before compare reports without it."""

from __future__ import annotations

import pytest

from models.instance import InstanceOperation, InstancePhase, InstanceStatus
from planning.instance.reports import wait_changed
from planning.instance.state import InstanceState, report_fingerprint
from tests.unit.planning.replica.rows import NEW, NOW
from tests.unit.planning.replica.test_status import status
from workflows.instance.reports import InstanceReports

pytestmark = pytest.mark.unit

CREATE = InstanceOperation(id="create-1", type="Create", step="CreatePods", started_at=NOW)


def creating(waiting: str | None = None) -> InstanceStatus:
    """A new Instance with no pod yet, its create waiting on `waiting`."""
    return status(1, InstancePhase.CREATING).model_copy(
        update={"operation": CREATE.model_copy(update={"waiting": waiting}), "total_pods": 0, "ready": False}
    )


@pytest.mark.parametrize(
    ("delivered", "now", "changed"),
    [
        (creating(), creating("QuotaExceeded"), True),
        (creating("QuotaExceeded"), creating(), True),
        (creating("QuotaExceeded"), creating("Unschedulable"), True),
        (creating("QuotaExceeded"), creating("QuotaExceeded"), False),
        # Nothing taken yet: the launch record waits on nothing.
        (None, creating("QuotaExceeded"), True),
        (None, creating(), False),
        # An operation's end is a change only if it waited.
        (creating(), status(1), False),
        (creating("Unschedulable"), status(1), True),
    ],
)
def test_wait_changed(delivered: InstanceStatus | None, now: InstanceStatus, changed: bool) -> None:
    assert wait_changed(delivered, now) is changed


def test_the_fingerprint_takes_the_wait_only_when_asked() -> None:
    plain, waiting = creating(), creating("QuotaExceeded")
    assert report_fingerprint(plain) == report_fingerprint(waiting), "runs from before: the same report"
    assert report_fingerprint(plain, waits=True) != report_fingerprint(waiting, waits=True)
    assert report_fingerprint(waiting, waits=True)[:-1] == report_fingerprint(waiting)


DELETE = InstanceOperation(id="delete-2", type="Delete", step="Drain", started_at=NOW)
UPDATE = InstanceOperation(id="update-2", type="Update", step="Surge", started_at=NOW)


def op(status_: InstanceStatus, operation: InstanceOperation, waiting: str | None = None, **changes: object) -> InstanceStatus:
    return status_.model_copy(update={"operation": operation.model_copy(update={"waiting": waiting}), **changes})


def deleting(waiting: str | None = None) -> InstanceStatus:
    """Being deleted, out of rotation, its pod still there (the parent counts it from its request)."""
    return op(status(1), DELETE, waiting, phase=InstancePhase.DELETING, serving=False, serving_pods=0, draining=True)


def updating(waiting: str | None = None) -> InstanceStatus:
    """A counted surge update to NEW, its surge pod not placed yet when `waiting`."""
    return op(status(1), UPDATE, waiting, phase=InstancePhase.UPDATING, target_revision=NEW)


class Reports(InstanceReports):
    """The report rule of an Instance run, without the workflow around it."""

    def __init__(self, delivered: InstanceStatus | None, *, deletion: bool, waits: bool) -> None:
        self.state = InstanceState.model_construct(update_counted_by_parent=None if deletion else NEW)
        self.delivered, self.counted_deletion, self.reports_waits = delivered, deletion, waits
        self.takes = lambda _: True


@pytest.mark.parametrize(
    ("delivered", "now", "deletion", "waits", "counted"),
    [
        # A create held by the quota, then told to delete: the request says it all.
        (creating("QuotaExceeded"), deleting(), True, True, True),
        (status(1), deleting(), True, True, True),
        # The deletion's own wait starts and ends: news both times (from version 10 on).
        (status(1), deleting("NodeUnknown"), True, True, False),
        (deleting("NodeUnknown"), deleting(), True, True, False),
        (status(1), deleting("NodeUnknown"), True, False, True),
        # A counted update's wait: its start (version 8 on), and its end with the same pods.
        (status(1), updating("Unschedulable"), False, True, False),
        (status(1), updating(), False, True, True),
        (updating("Unschedulable"), updating(), False, True, False),
    ],
)
def test_which_reports_the_parent_counts_from_its_request(
    delivered: InstanceStatus, now: InstanceStatus, deletion: bool, waits: bool, counted: bool
) -> None:
    assert Reports(delivered, deletion=deletion, waits=waits).counted_by_parent(now) is counted
