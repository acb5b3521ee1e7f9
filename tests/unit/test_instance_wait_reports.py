"""An operation's wait is news to the parent (`versions.WAITS_REPORTED`, Instance version 10):
a report goes out when it starts or ends, so the InferenceReplica's row says what a create, an
update or a deletion waits on (`planning.instance.reports.wait_changed`, the fingerprint's
`waits`). Runs from before compare reports without it."""

from __future__ import annotations

import pytest

from models.instance import InstanceOperation, InstancePhase, InstanceStatus
from planning.instance.reports import wait_changed
from planning.instance.state import report_fingerprint
from tests.unit.planning.replica.rows import NOW
from tests.unit.planning.replica.test_status import status

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
