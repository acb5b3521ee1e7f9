"""The InferenceReplica counts an Instance it told to update as `Updating` from its own request
(`ReplicaState.shows_requested`), since such an Instance sends no report of the update's start:
in the rules' facts, the status rows, the safety re-list and the rollout hold. Runs from before
the change read the Instances' own reports."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from models.instance import InstancePhase, RetryBlockState, UpdateStrategyType
from models.kube_ops import ComponentPods
from planning.replica.budget import UpdatePolicy
from planning.replica.coordination import Coordination
from planning.replica.hold import HoldGate
from planning.replica.overlay import replica_facts
from planning.replica.recheck import stale_views
from tests.unit.planning.replica.rows import NEW, OLD, ready
from tests.unit.planning.replica.test_reconcile import block, run
from tests.unit.replica_rows import ready_report, replica_config
from workflows.replica import view
from workflows.replica.messages import ReplicaState
from workflows.replica.projection import build_status

pytestmark = pytest.mark.unit

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
P = InstancePhase


def state(shows_requested: bool) -> ReplicaState:
    """Two Instances Ready on OLD; 0 was told to move to NEW and has not reported since."""
    reports = {index: ready_report(index, OLD, NOW).model_copy(update={"pods_digest": "d"}) for index in (0, 1)}
    return ReplicaState(
        config=replica_config(NEW),
        instances=reports,
        requested_updates={0: NEW},
        shows_requested=shows_requested,
        last_desired=2,
    )


def rows(replica: ReplicaState) -> list[tuple[int, str, str]]:
    status, _ = build_status(replica, NOW)
    return [(row.index, row.phase, row.target_revision or "") for row in status.instance_statuses]


def test_an_instance_told_to_update_is_an_updating_row_until_it_reports_the_new_revision() -> None:
    assert rows(state(shows_requested=True)) == [(0, "Updating", NEW), (1, "Ready", OLD)]
    answered = state(shows_requested=True)
    answered.instances[0] = answered.instances[0].model_copy(update={"phase": P.UPDATING, "target_revision": NEW})
    assert rows(answered)[0] == (0, "Updating", NEW)
    done = state(shows_requested=True)
    done.instances[0] = ready_report(0, NEW, NOW)
    assert rows(done)[0] == (0, "Ready", NEW)


def test_a_run_from_before_the_change_shows_the_reports_as_they_are() -> None:
    assert rows(state(shows_requested=False)) == [(0, "Ready", OLD), (1, "Ready", OLD)]


def test_the_rules_see_it_updating_as_its_report_of_the_start_would_have_shown() -> None:
    reports = dict(state(shows_requested=True).instances)
    counted = {f.index: f for f in replica_facts(reports, {}, {0: NEW}, [], {}, UpdatePolicy(), counts_requested=True)}
    assert (counted[0].phase, counted[0].target_revision, counted[0].operation) == (P.UPDATING, NEW, "Update")
    assert counted[0].surge_slots_held() == 1 and counted[1].phase == P.READY
    before = {f.index: f for f in replica_facts(reports, {}, {0: NEW}, [], {}, UpdatePolicy())}
    assert (before[0].phase, before[0].operation) == (P.READY, "Update")


def test_the_safety_relist_leaves_an_instance_counted_as_updating_alone() -> None:
    listed = ComponentPods(digests=((0, "two pods now"), (1, "two pods too")))
    assert stale_views(view.reports(state(shows_requested=True)), listed) == [1]
    assert stale_views(view.reports(state(shows_requested=False)), listed) == [0, 1]


@pytest.mark.parametrize(("holds_the_rest", "shown"), [(True, "per-Component surge budget 1 exhausted (would become 2)"), (False, None)])
def test_a_pass_that_starts_one_shows_the_budget_hold_on_the_others_at_once(holds_the_rest: bool, shown: str | None) -> None:
    """With no report of the update's start, no later pass would find the budget spent before
    the update ends; the pass that spends it says so."""
    actions = run([ready(0), ready(1), ready(2)], holds_the_rest=holds_the_rest, rest_held_by_run=True)
    assert len(actions.update) == 1
    assert (actions.hold.reason if actions.hold is not None else None) == shown


RUN_CAP = f"rollout run 2 allows 1 Instances on {NEW} now"


@pytest.mark.parametrize(
    ("max_surge", "rest_held_by_run", "shown"),
    [
        (2, True, RUN_CAP),
        (3, True, RUN_CAP),
        # Runs from before the change: the budget's hold, or none when the budget had room.
        (2, False, "per-Component surge budget 2 exhausted (would become 3)"),
        (3, False, None),
    ],
)
def test_a_pass_held_by_its_rollout_runs_cap_shows_that_cap_at_once(
    max_surge: int, rest_held_by_run: bool, shown: str | None
) -> None:
    """A rollout run that allows one Instance on the update revision: the rest wait on the
    run, whether or not the surge budget would have held them too."""
    policy = UpdatePolicy(strategy=UpdateStrategyType.SURGE_THEN_DRAIN, max_surge=max_surge)
    actions = run(
        [ready(0), ready(1), ready(2)],
        policy=policy,
        coordination=Coordination(2, NEW, 1),
        holds_the_rest=True,
        rest_held_by_run=rest_held_by_run,
    )
    assert len(actions.update) == 1
    assert (actions.hold.reason if actions.hold is not None else None) == shown
    if actions.hold is not None:
        assert actions.hold.gate == HoldGate.BUDGET


def test_a_retry_attempt_shows_no_budget_hold() -> None:
    """A pass that starts the update revision's one retry attempt (the InferenceReplica retries,
    not the Instance) admits one whatever the budget: the rest wait on the attempt."""
    due = block(RetryBlockState.BACKOFF)
    room_for_three = UpdatePolicy(strategy=UpdateStrategyType.SURGE_THEN_DRAIN, max_surge=3)
    actions = run(
        [ready(0), ready(1), ready(2)], policy=room_for_three, blocks=[due], instance_retries=False, holds_the_rest=True
    )
    assert actions.retry_attempt and len(actions.update) == 1
    assert actions.hold is None
