"""Update pacing: surge and unavailability budgets, partition, retry gates (reference §7)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from models.instance import RetryBlock, RetryBlockState, UpdateStrategyType
from planning.replica.budget import UpdatePolicy
from planning.replica.hold import HoldGate
from planning.replica.update import plan_update
from tests.unit.planning.replica.rows import NEW, NOW, OLD, creating, failed, ready, updating, with_slots

pytestmark = pytest.mark.unit

SURGE = UpdateStrategyType.SURGE_THEN_DRAIN
RECREATE = UpdateStrategyType.RECREATE_POD


def surge(max_surge: int | str | None, **extra: object) -> UpdatePolicy:
    return UpdatePolicy(strategy=SURGE, max_surge=max_surge, **extra)  # type: ignore[arg-type]


def recreate(max_unavailable: int | str | None, **extra: object) -> UpdatePolicy:
    return UpdatePolicy(strategy=RECREATE, max_unavailable=max_unavailable, **extra)  # type: ignore[arg-type]


def block(state: RetryBlockState, attempts: int = 1, next_in: float | None = None) -> RetryBlock:
    return RetryBlock(
        target_revision=NEW,
        state=state,
        attempts_started=attempts,
        next_retry_at=NOW + timedelta(seconds=next_in) if next_in is not None else None,
        first_failure_at=NOW - timedelta(minutes=5),
        last_failure_at=NOW - timedelta(minutes=1),
        reason="ErrImagePull",
    )


THREE = [ready(0), ready(1), ready(2)]


@pytest.mark.parametrize(
    ("name", "instances", "desired", "policy", "start", "reason"),
    [
        ("surge 1 starts the highest index", THREE, 3, surge(1), (2,), None),
        (
            "surge 1 with one in flight is exhausted",
            [ready(0), ready(1), updating(2)],
            3,
            surge(1),
            (),
            "per-Component surge budget 1 exhausted (would become 2)",
        ),
        ("surge 2 starts two", THREE, 3, surge(2), (2, 1), None),
        ("no surge budget moves everything", THREE, 3, surge(None), (2, 1, 0), None),
        (
            "surge 0 never starts",
            THREE,
            3,
            surge(0),
            (),
            "per-Component surge budget 0 exhausted (would become 1)",
        ),
        ("surge 25% of 4 is 1", [*THREE, ready(3)], 4, surge("25%"), (3,), None),
        ("surge 25% of 5 rounds up to 2", [*THREE, ready(3), ready(4)], 5, surge("25%"), (4, 3), None),
        ("surge 100% of 3", THREE, 3, surge("100%"), (2, 1, 0), None),
        (
            "extra pods of a leftover hold a slot",
            [ready(0), ready(1), with_slots(ready(2), 1, "extra pod p holds a surge slot")],
            3,
            surge(1),
            (),
            "per-Component surge budget 1 exhausted (would become 2); extra pod p holds a surge slot",
        ),
        (
            "a gang's extra pods hold one slot",
            [ready(0), with_slots(ready(1), 1)],
            2,
            surge(2),
            (1,),
            None,
        ),
        (
            "a live replacement Instance holds a slot",
            [ready(0), ready(1), creating(4, revision=NEW, replaces=1)],
            2,
            surge(1),
            (),
            "per-Component surge budget 1 exhausted (would become 2)",
        ),
        ("failed Instances move first", [ready(0), failed(1), ready(2)], 3, surge(1), (1,), None),
        ("a creating Instance waits for its create", [creating(0), ready(1)], 2, surge(None), (1,), None),
        ("recreate 1 starts one", THREE, 3, recreate(1), (2,), None),
        (
            "recreate 1 with one updating is exhausted",
            [ready(0), ready(1), updating(2, strategy=RECREATE, serving=False)],
            3,
            recreate(1),
            (),
            "per-Component unavailability budget 1 exhausted (would become 2)",
        ),
        (
            "recreate 0 never starts a serving Instance",
            THREE,
            3,
            recreate(0),
            (),
            "per-Component unavailability budget 0 exhausted (would become 1)",
        ),
        ("recreate 0 still moves a Failed Instance", [ready(0), failed(1)], 2, recreate(0), (1,), None),
        (
            "a missing Instance uses the unavailability budget",
            [ready(0), ready(1)],
            3,
            recreate(1),
            (),
            "per-Component unavailability budget 1 exhausted (would become 2)",
        ),
        ("recreate 25% of 3 rounds up to 1", THREE, 3, recreate("25%"), (2,), None),
        ("no unavailability budget moves everything", THREE, 3, recreate(None), (2, 1, 0), None),
        (
            "in-place strategies read maxUnavailable too",
            THREE,
            3,
            UpdatePolicy(strategy=UpdateStrategyType.IN_PLACE_IF_POSSIBLE, max_unavailable=2),
            (2, 1),
            None,
        ),
    ],
)
def test_budget_table(
    name: str,
    instances: list,  # type: ignore[type-arg]
    desired: int,
    policy: UpdatePolicy,
    start: tuple[int, ...],
    reason: str | None,
) -> None:
    plan = plan_update(instances, desired, NEW, policy, NOW)
    assert plan.start == start, name
    if reason is None:
        assert plan.denial is None, name
    else:
        assert plan.denial is not None, name
        assert plan.denial.gate == HoldGate.BUDGET
        assert plan.denial.reason == reason, name
        assert plan.denial.target == NEW


def test_terminating_pod_reason_matches_the_reference_example() -> None:
    terminating = with_slots(
        ready(2, revision=NEW),
        1,
        "Terminating pod chat-engine-2-default-0 still counts against the surge budget until its deletion grace elapses",
    )
    plan = plan_update([ready(0), ready(1), terminating], 3, NEW, surge(1), NOW)
    assert plan.denial is not None
    assert plan.denial.reason == (
        "per-Component surge budget 1 exhausted (would become 2); Terminating pod chat-engine-2-default-0 "
        "still counts against the surge budget until its deletion grace elapses"
    )


def test_partition_holds_the_lowest_indexes() -> None:
    instances = [ready(0), ready(1), ready(2), ready(3)]
    plan = plan_update(instances, 4, NEW, surge(None, partition=2), NOW)
    assert plan.partition_held == (0, 1)
    assert plan.start == (3, 2)


def test_partition_counts_instances_not_index_values() -> None:
    plan = plan_update([ready(0), ready(4), ready(7)], 3, NEW, surge(None, partition=1), NOW)
    assert plan.partition_held == (0,)
    assert plan.start == (7, 4)


def test_partition_covering_everything_is_complete() -> None:
    plan = plan_update(THREE, 3, NEW, surge(None, partition=3), NOW)
    assert plan.complete
    assert plan.start == ()


def test_every_instance_on_target_is_complete() -> None:
    plan = plan_update([ready(0, NEW), ready(1, NEW)], 2, NEW, surge(1), NOW)
    assert plan.complete
    assert plan.denial is None


def test_in_flight_updates_are_not_complete_and_not_denied() -> None:
    plan = plan_update([ready(0, NEW), updating(1)], 2, NEW, surge(1), NOW)
    assert not plan.complete
    assert plan.start == ()
    assert plan.denial is None


def test_pause_admits_nothing() -> None:
    plan = plan_update(THREE, 3, NEW, surge(None), NOW, paused=True)
    assert plan.paused
    assert plan.start == ()
    assert plan.waiting == (2, 1, 0)


def test_min_ready_seconds_paces_surge() -> None:
    settling = ready(2, NEW, serving_for=10)
    plan = plan_update([ready(0), ready(1), settling], 3, NEW, surge(1, min_ready_seconds=60), NOW)
    assert plan.start == ()
    assert (
        plan.denial is not None
        and plan.denial.reason == "per-Component surge budget 1 exhausted (would become 2)"
    )
    assert plan.wake_at == NOW + timedelta(seconds=50)


def test_min_ready_seconds_elapsed_frees_the_slot() -> None:
    settled = ready(2, NEW, serving_for=61)
    plan = plan_update([ready(0), ready(1), settled], 3, NEW, surge(1, min_ready_seconds=60), NOW)
    assert plan.start == (1,)


def test_min_ready_seconds_paces_unavailability() -> None:
    settling = ready(2, NEW, serving_for=5)
    plan = plan_update([ready(0), ready(1), settling], 3, NEW, recreate(1, min_ready_seconds=30), NOW)
    assert plan.start == ()
    assert plan.denial is not None
    assert plan.denial.reason == "per-Component unavailability budget 1 exhausted (would become 2)"
    assert plan.wake_at == NOW + timedelta(seconds=25)


def test_held_revision_admits_nothing() -> None:
    plan = plan_update(THREE, 3, NEW, surge(None), NOW, retry_block=block(RetryBlockState.HELD, attempts=3))
    assert plan.start == ()
    assert plan.denial is not None and plan.denial.gate == HoldGate.HELD
    assert "held after 3 failed attempt(s) (last failure: ErrImagePull)" in plan.denial.reason


def test_backoff_waits_until_next_retry() -> None:
    plan = plan_update(
        THREE, 3, NEW, surge(None), NOW, retry_block=block(RetryBlockState.BACKOFF, next_in=60)
    )
    assert plan.start == ()
    assert plan.denial is not None and plan.denial.gate == HoldGate.RETRY_BLOCK
    assert plan.wake_at == NOW + timedelta(seconds=60)


def test_backoff_due_admits_exactly_one_retry_attempt() -> None:
    plan = plan_update(
        THREE,
        3,
        NEW,
        surge(None),
        NOW,
        retry_block=block(RetryBlockState.BACKOFF, next_in=-1),
        instance_retries=False,
    )
    assert plan.start == (2,)
    assert plan.retry_attempt
    assert plan.denial is None


def test_backoff_due_leaves_the_attempt_to_the_failed_instance() -> None:
    plan = plan_update(
        THREE, 3, NEW, surge(None), NOW, retry_block=block(RetryBlockState.BACKOFF, next_in=-1)
    )
    assert plan.start == ()
    assert plan.denial is not None and plan.denial.gate == HoldGate.RETRY_BLOCK


def test_retry_in_progress_waits_for_the_attempt() -> None:
    plan = plan_update(
        THREE, 3, NEW, surge(None), NOW, retry_block=block(RetryBlockState.RETRY_IN_PROGRESS, 2)
    )
    assert plan.start == ()
    assert plan.denial is not None and plan.denial.gate == HoldGate.RETRY_BLOCK
    assert "attempt 2 in progress" in plan.denial.reason


def test_block_of_another_revision_does_not_gate() -> None:
    other = block(RetryBlockState.HELD).model_copy(update={"target_revision": "chat-engine-rev-cccccccc"})
    plan = plan_update(THREE, 3, NEW, surge(None), NOW, retry_block=other)
    assert plan.start == (2, 1, 0)


def test_retry_attempt_still_needs_budget() -> None:
    instances = [ready(0), ready(1), updating(2)]
    plan = plan_update(
        instances,
        3,
        NEW,
        surge(1),
        NOW,
        retry_block=block(RetryBlockState.BACKOFF, next_in=-1),
        instance_retries=False,
    )
    assert plan.start == ()
    assert not plan.retry_attempt


# --- properties --------------------------------------------------------------------------

kinds = st.sampled_from(["ready", "ready_new", "failed", "updating", "settling"])


def _row(index: int, kind: str, strategy: UpdateStrategyType):
    if kind == "ready":
        return ready(index)
    if kind == "ready_new":
        return ready(index, NEW)
    if kind == "failed":
        return failed(index)
    if kind == "settling":
        return ready(index, NEW, serving_for=5)
    return updating(index, strategy=strategy, serving=strategy == SURGE)


fleet = st.lists(st.tuples(st.integers(0, 20), kinds), unique_by=lambda row: row[0], min_size=1, max_size=10)
budgets = st.one_of(st.integers(0, 5), st.sampled_from(["0%", "10%", "25%", "50%", "100%"]))


@given(fleet, budgets)
def test_surge_never_exceeds_max_surge_extra_instances(spec, budget) -> None:  # type: ignore[no-untyped-def]
    instances = [_row(index, kind, SURGE) for index, kind in spec]
    desired = len(instances)
    policy = surge(budget, min_ready_seconds=30)
    plan = plan_update(instances, desired, NEW, policy, NOW)
    from planning.replica.budget import surge_budget

    limit = surge_budget(policy, desired)
    assert limit is not None
    in_use = sum(
        max(
            i.surge_slots_held(),
            1 if (i.running_revision == NEW and i.serving and not i.settled(NOW, 30)) else 0,
        )
        for i in instances
    )
    assert len(plan.start) <= max(0, limit - in_use)
    assert len(set(plan.start)) == len(plan.start)


@given(fleet, budgets)
def test_unavailability_never_drops_serving_below_minimum(spec, budget) -> None:  # type: ignore[no-untyped-def]
    instances = [_row(index, kind, RECREATE) for index, kind in spec]
    desired = len(instances)
    policy = recreate(budget, min_ready_seconds=30)
    plan = plan_update(instances, desired, NEW, policy, NOW)
    from planning.replica.budget import unavailable_budget

    limit = unavailable_budget(policy, desired)
    assert limit is not None
    available_before = [i for i in instances if i.operation is None and i.settled(NOW, 30)]
    available_after = [i for i in available_before if i.index not in plan.start]
    if len(available_before) >= desired - limit:
        assert len(available_after) >= desired - limit
    else:
        # Already below the minimum: only Instances that don't serve may move.
        assert len(available_after) == len(available_before)


def test_in_place_only_reads_max_unavailable() -> None:
    policy = UpdatePolicy(strategy=UpdateStrategyType.IN_PLACE_ONLY, max_unavailable=1, max_surge=5)
    plan = plan_update(
        [ready(0), ready(1), updating(2, strategy=UpdateStrategyType.IN_PLACE_ONLY)], 3, NEW, policy, NOW
    )
    assert plan.start == ()
    assert plan.denial is not None
    assert plan.denial.reason == "per-Component unavailability budget 1 exhausted (would become 2)"


def test_surge_then_drain_ignores_max_unavailable() -> None:
    policy = UpdatePolicy(strategy=SURGE, max_unavailable=0, max_surge=3)
    assert plan_update(THREE, 3, NEW, policy, NOW).start == (2, 1, 0)


def test_gang_instances_cost_one_slot_each() -> None:
    gangs = [ready(index, desired_pods=8) for index in range(4)]
    plan = plan_update(gangs, 4, NEW, surge(2), NOW)
    assert plan.start == (3, 2)


def test_a_deleting_instance_is_not_updated() -> None:
    from tests.unit.planning.replica.rows import deleting

    plan = plan_update([ready(0), deleting(1)], 1, NEW, surge(None), NOW)
    assert plan.start == (0,)


def test_rollback_moves_instances_back() -> None:
    plan = plan_update([ready(0, NEW), ready(1, NEW)], 2, OLD, surge(1), NOW)
    assert plan.start == (1,)
    assert plan.denial is None
