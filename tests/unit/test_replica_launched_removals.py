"""An Instance the InferenceReplica told to delete before its first report came (it is only in
`ReplicaState.launched`) counts as deleting, not `Creating` (`counts_launched_removals`).

A single-pod Instance told so sends no report until its end: its parent counts both its start
(`launched_by_parent`) and its deletion (`counted_since`) from its own records. Runs from before
counted it as a live `Creating` Instance until then, so a pass meanwhile planned its removal
again (a scale-up and back down before the new Instances were heard from, a quota refusing
their pods): a second delete, a second entry on `removing`, and an index reserved for good."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from models.instance import InstancePhase
from tests.unit.planning.replica.rows import OLD
from tests.unit.replica_rows import ready_report, replica_config
from workflows.replica import deletions, view
from workflows.replica.instances import plan
from workflows.replica.messages import DeleteCounted, ReplicaState
from workflows.replica.projection import build_status

pytestmark = pytest.mark.unit

NOW = datetime(2026, 12, 7, 3, 0, tzinfo=UTC)
DEADLINE = NOW + timedelta(minutes=30)
COUNTED = {index: DeleteCounted(since=NOW, deadline=DEADLINE) for index in (1, 2)}


def state(counts_launched_removals: bool) -> ReplicaState:
    """Instance 0 Ready; 1 and 2 started and told to delete before either reported (scaled
    1 -> 3 -> 1)."""
    return ReplicaState(
        config=replica_config(OLD),
        instances={0: ready_report(0, OLD, NOW)},
        launched={1: OLD, 2: OLD},
        removing=[1, 2],
        requested_deletes=dict(COUNTED),
        counts_deletes=True,
        shows_launched=True,
        counts_launched_removals=counts_launched_removals,
        last_desired=1,
    )


def test_the_rules_see_it_deleting() -> None:
    facts = {fact.index: fact for fact in view.facts(state(True))}
    assert [(i, f.phase, f.operation, f.deleting) for i, f in facts.items()] == [
        (0, InstancePhase.READY, None, False),
        (1, InstancePhase.DELETING, "Delete", True),
        (2, InstancePhase.DELETING, "Delete", True),
    ]
    before = {fact.index: fact for fact in view.facts(state(False))}
    assert [(i, f.phase) for i, f in before.items() if i] == [(1, InstancePhase.CREATING), (2, InstancePhase.CREATING)]


@pytest.mark.parametrize(
    ("counts", "removed_again"),
    [
        (True, ()),
        # What runs from before planned at each pass until the Instances' ends came.
        (False, (2, 1)),
    ],
)
def test_a_pass_does_not_plan_its_removal_again(counts: bool, removed_again: tuple[int, ...]) -> None:
    s = state(counts)
    actions, _ = plan(s, s.config, 1, NOW)
    assert tuple(actions.delete) == removed_again
    assert not actions.create


def test_a_pass_still_removes_the_rest_beside_it() -> None:
    """Instances told to delete stay out of the count: a scale-down that goes on counts only
    what is left."""
    s = state(True)
    s.instances[3] = ready_report(3, OLD, NOW)
    actions, _ = plan(s, s.config, 1, NOW)
    assert tuple(actions.delete) == (3,)


def test_its_status_row_is_deleting_with_the_requests_drain() -> None:
    status, _ = build_status(state(True), NOW)
    rows = {row.index: row for row in status.instance_statuses}
    assert [(i, row.phase) for i, row in rows.items()] == [(0, "Ready"), (1, "Deleting"), (2, "Deleting")]
    operation = rows[1].operation
    assert operation is not None
    assert (operation.type, operation.step, operation.started_at, operation.deadline) == ("Delete", "Drain", NOW, DEADLINE)
    assert (status.replicas, status.ready_replicas) == (1, 1)
    before, _ = build_status(state(False), NOW)
    assert [row.phase for row in before.instance_statuses] == ["Ready", "Creating", "Creating"]


class FakeWorkflow:
    """What `workflows.replica.deletions` asks of `temporalio.workflow`: a run that takes
    every patch (or none), at `NOW`."""

    def __init__(self, patched: bool) -> None:
        self.taken = patched

    def patched(self, _: str) -> bool:
        return self.taken

    def now(self) -> datetime:
        return NOW


def test_a_new_run_keeps_each_index_once_and_drops_those_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run from before may have left an index twice (told twice, its end took one off) or
    one whose Instance has ended; a new run starts from the Instances still present."""
    monkeypatch.setattr(deletions, "workflow", FakeWorkflow(True))
    s = state(False)
    s.removing = [2, 1, 2, 7]
    deletions.count_launched_removals(s)
    assert (s.counts_launched_removals, s.removing) == (True, [2, 1])


def test_a_run_from_before_keeps_removing_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deletions, "workflow", FakeWorkflow(False))
    s = state(False)
    s.removing = [2, 1, 2, 7]
    deletions.count_launched_removals(s)
    assert (s.counts_launched_removals, s.removing) == (False, [2, 1, 2, 7])


@pytest.mark.parametrize(("counts", "removing"), [(True, [1, 2]), (False, [1, 2, 2])])
def test_telling_one_already_told_adds_no_second_entry(
    monkeypatch: pytest.MonkeyPatch, counts: bool, removing: list[int]
) -> None:
    monkeypatch.setattr(deletions, "workflow", FakeWorkflow(counts))
    monkeypatch.setattr(deletions, "signal_instance", lambda *_: None)
    s = state(counts)
    sends = deletions.tell_to_delete(s, [2], "ScaleDown")
    assert (len(sends), s.removing) == (1, removing)
    assert s.requested_deletes[2].since == NOW
