"""The InferenceReplica counts an Instance it told to delete as `Deleting` from its own request
(`ReplicaState.requested_deletes`), since such an Instance reports only its end: its status row
shows it out of rotation, its counts leave it out, and its drain deadline (for `DrainOverdue`)
is the one the request set. Runs from before the change read the Instances' own reports."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from models.instance import InstanceOperation, InstancePhase
from planning.replica.overlay import as_deleting
from tests.unit.planning.replica.rows import OLD
from tests.unit.replica_rows import ready_report, replica_config
from workflows.replica import view
from workflows.replica.messages import DeleteCounted, ReplicaState
from workflows.replica.projection import build_status, failed_on_update

pytestmark = pytest.mark.unit

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
DEADLINE = NOW + timedelta(minutes=30)
P = InstancePhase


def state(requested: dict[int, DeleteCounted]) -> ReplicaState:
    """Two Instances Ready on OLD, scaled to one: 1 was told to delete and has not reported since."""
    return ReplicaState(
        config=replica_config(OLD),
        instances={index: ready_report(index, OLD, NOW) for index in (0, 1)},
        removing=[1],
        requested_deletes=requested,
        counts_deletes=bool(requested),
        last_desired=1,
    )


COUNTED = {1: DeleteCounted(since=NOW, deadline=DEADLINE)}


def test_an_instance_told_to_delete_is_a_deleting_row_out_of_rotation_with_its_pods() -> None:
    status, _ = build_status(state(COUNTED), NOW)
    rows = {row.index: row for row in status.instance_statuses}
    assert (rows[0].phase, rows[0].pods.serving) == ("Ready", 1)
    assert (rows[1].phase, rows[1].pods.total, rows[1].pods.ready) == ("Deleting", 1, 1)
    assert (rows[1].pods.serving, rows[1].pods.available) == (0, 0)
    # The operation as the request set it: what the controller's drains-overdue gauge reads.
    operation = rows[1].operation
    assert operation is not None
    assert (operation.type, operation.step, operation.started_at, operation.deadline) == ("Delete", "Drain", NOW, DEADLINE)
    assert (status.replicas, status.ready_replicas) == (1, 1)


def test_the_rules_see_it_out_of_rotation_from_the_request() -> None:
    """A migration completes a source's overdue drain once it serves nothing
    (`planning.replica.migrations`): it must not wait for a report that never comes."""
    facts = {fact.index: fact for fact in view.raw_facts(state(COUNTED))}
    assert (facts[1].deleting, facts[1].serving, facts[1].ready) == (True, False, True)
    assert (facts[0].deleting, facts[0].serving) == (False, True)
    before = {fact.index: fact for fact in view.raw_facts(state({}))}
    assert (before[1].deleting, before[1].serving) == (True, True), "a run from before reads the report"


def test_an_instance_told_to_delete_no_longer_counts_as_failed_on_the_update() -> None:
    failed = state(COUNTED)
    for index in (0, 1):
        failed.instances[index] = failed.instances[index].model_copy(update={"phase": P.FAILED, "serving": False})
    assert failed_on_update(failed) == 1
    assert failed_on_update(state({}).model_copy(update={"instances": failed.instances})) == 2


def test_a_run_from_before_the_change_shows_the_report_as_it_is() -> None:
    status, _ = build_status(state({}), NOW)
    assert [(row.index, row.phase, row.pods.serving) for row in status.instance_statuses] == [
        (0, "Ready", 1),
        (1, "Ready", 1),
    ]


def test_the_instances_own_report_of_its_deletion_is_shown_as_it_came() -> None:
    operation = InstanceOperation(id="delete-2", type="Delete", step="DeletePods", started_at=NOW, deadline=DEADLINE)
    reported = ready_report(1, OLD, NOW).model_copy(update={"phase": P.DELETING, "total_pods": 0, "operation": operation})
    assert as_deleting(reported, NOW, DEADLINE) is reported
    assert as_deleting(reported.model_copy(update={"deleted": True}), NOW, DEADLINE).deleted


def test_the_drain_deadline_is_the_requests_until_the_instance_reports_its_own() -> None:
    counted = state(COUNTED)
    assert view.drain_deadlines(counted) == {1: DEADLINE}
    later = DEADLINE + timedelta(seconds=7)
    own = InstanceOperation(id="delete-2", type="Delete", step="DeletePods", started_at=NOW, deadline=later)
    counted.instances[1] = counted.instances[1].model_copy(update={"phase": P.DELETING, "operation": own})
    assert view.drain_deadlines(counted) == {1: later}
    assert view.drain_deadlines(state({1: DeleteCounted(since=NOW)})) == {}, "no instanceReadyTimeout: no deadline"


def test_a_request_whose_instance_is_gone_holds_no_deadline() -> None:
    """An Instance that ended before its delete came (the signal found it closed) leaves a
    record behind; it must not hold `DrainOverdue` True for ever."""
    gone = state(COUNTED)
    del gone.instances[1]
    assert view.drain_deadlines(gone) == {}
    status, _ = build_status(gone, DEADLINE + timedelta(hours=1))
    overdue = status.condition("DrainOverdue")
    assert overdue is not None and overdue.status == "False"


@pytest.mark.parametrize(
    ("at", "expected"),
    [
        (DEADLINE, ("False", "DrainsWithinDeadline")),
        (DEADLINE + timedelta(seconds=1), ("True", "DrainsOverdue")),
    ],
)
def test_drain_overdue_comes_from_the_counted_deadline(at: datetime, expected: tuple[str, str]) -> None:
    status, _ = build_status(state(COUNTED), at)
    overdue = status.condition("DrainOverdue")
    assert overdue is not None and (overdue.status, overdue.reason) == expected
    if overdue.status == "True":
        assert overdue.message == (
            "drain of instance(s) 1 overdue (earliest deadline 2026-12-06T12:30:00Z); pods still Terminating"
        )
