"""The Instance workflow's input-borne versions (`workflows.instance.versions`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from models.instance import INSTANCE_WORKFLOW_VERSION
from workflows.instance import versions

INSTANCE_PACKAGE = Path(versions.__file__).parent


@pytest.mark.parametrize(
    ("version", "change", "included"),
    [
        (0, versions.LOCAL_KUBE_CALLS, False),
        (0, versions.REPORT_BY_LOCAL_ACTIVITY, False),
        (1, versions.LOCAL_KUBE_CALLS, True),
        (1, versions.RELEASE_EVENT_BY_PARENT, True),
        (1, versions.DRAIN_OVERDUE, True),
        (1, versions.FINALIZER_BLOCK, True),
        (1, versions.REPORT_BY_LOCAL_ACTIVITY, True),
        (1, "a-change-made-after-version-1", False),
        (2, versions.LOCAL_KUBE_CALLS, True),
        (5, versions.RETIRE_IN_ONE_CALL, False),
        (6, versions.RETIRE_IN_ONE_CALL, True),
        (6, versions.REPORT_BACK_TO_DELIVERED, True),
        (6, versions.UPDATE_REPORTS_COUNTED, False),
        (7, versions.UPDATE_REPORTS_COUNTED, True),
        (7, versions.COUNTED_WAITS_REPORTED, False),
        (8, versions.COUNTED_WAITS_REPORTED, True),
        (7, versions.HELD_UPDATE_OFF_NET, False),
        (8, versions.HELD_UPDATE_OFF_NET, True),
        (8, versions.UPDATE_REPORTS_COUNTED, True),
        (8, versions.DELETION_COUNTED, False),
        (9, versions.DELETION_COUNTED, True),
        (9, versions.HELD_UPDATE_OFF_NET, True),
        (12, versions.REPORT_BUSY_LATER, True),
        (12, versions.READY_BEFORE_UPDATE, False),
        (13, versions.READY_BEFORE_UPDATE, True),
        (12, versions.SERVICE_RETRIED, False),
        (13, versions.SERVICE_RETRIED, True),
        (13, versions.MOMENT_KEEPS_TIMER, False),
        (14, versions.MOMENT_KEEPS_TIMER, True),
        (13, versions.SERVICE_RETRIED_IN_BRING_UP, False),
        (14, versions.SERVICE_RETRIED_IN_BRING_UP, True),
    ],
)
def test_a_version_takes_its_changes_and_those_of_the_versions_before(version: int, change: str, included: bool) -> None:
    assert versions.included(version, change) is included


def test_the_replica_starts_instances_under_a_released_version() -> None:
    assert INSTANCE_WORKFLOW_VERSION in versions.CHANGES
    assert max(versions.CHANGES) == INSTANCE_WORKFLOW_VERSION, "a version listed but never started"


def test_every_instance_change_is_decided_through_versions() -> None:
    """A `workflow.patched` call of its own would write a marker into runs that have a version."""
    direct = [
        path.name
        for path in INSTANCE_PACKAGE.glob("*.py")
        if path.name != "versions.py" and "workflow.patched(" in path.read_text()
    ]
    assert direct == [], f"decide these through `self.takes(...)`: {direct}"
