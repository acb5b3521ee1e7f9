"""One InferenceReplica pass: count, rollout and hold together."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from models.instance import RetryBlock, RetryBlockState, UpdateStrategyType
from planning.replica.budget import UpdatePolicy, surge_budget
from planning.replica.hold import HoldGate, RolloutHold
from planning.replica.reconcile import NewInstance, aggregate_blocks, reconcile, with_target
from tests.unit.planning.replica.rows import NEW, NOW, OLD, creating, failed, ready, updating

pytestmark = pytest.mark.unit

NAMES = {OLD: "chat-engine-rev-old", NEW: "chat-engine-rev-new"}
SURGE1 = UpdatePolicy(strategy=UpdateStrategyType.SURGE_THEN_DRAIN, max_surge=1)


def run(instances, desired=3, policy=SURGE1, blocks=(), hold=None, paused=False, current=OLD, **extra):  # type: ignore[no-untyped-def]
    return reconcile(
        **extra,
        desired=desired,
        instances=instances,
        update_revision=NEW,
        current_revision=current,
        revision_names=NAMES,
        policy=policy,
        retry_blocks=list(blocks),
        previous_hold=hold,
        paused=paused,
        now=NOW,
    )


def block(state: RetryBlockState, revision: str = NEW, attempts: int = 1) -> RetryBlock:
    return RetryBlock(
        target_revision=revision,
        state=state,
        attempts_started=attempts,
        first_failure_at=NOW,
        last_failure_at=NOW,
        reason="ErrImagePull",
    )


def test_first_pass_creates_everything_on_the_update_revision() -> None:
    actions = run([], current=NEW)
    assert actions.create == (NewInstance(0, NEW), NewInstance(1, NEW), NewInstance(2, NEW))
    assert actions.hold is None


def test_scale_up_during_rollout_starts_new_instances_on_the_update_revision() -> None:
    actions = run([ready(0), ready(1)])
    assert actions.create == (NewInstance(2, NEW),)


def test_new_instances_avoid_a_held_revision() -> None:
    actions = run([ready(0), ready(1)], blocks=[block(RetryBlockState.HELD, attempts=3)])
    assert actions.create == (NewInstance(2, OLD),)
    assert actions.hold is not None and actions.hold.gate == HoldGate.HELD
    assert actions.hold.target == "chat-engine-rev-new"


def test_new_instances_avoid_a_revision_in_backoff() -> None:
    actions = run([ready(0), ready(1)], blocks=[block(RetryBlockState.BACKOFF)])
    assert actions.create == (NewInstance(2, OLD),)


def test_first_instances_have_no_prior_revision_to_fall_back_to() -> None:
    actions = run([], desired=1, blocks=[block(RetryBlockState.HELD)], current=NEW)
    assert actions.create == (NewInstance(0, NEW),)


def test_partition_starts_low_new_indexes_on_the_prior_revision() -> None:
    policy = UpdatePolicy(max_surge=None, partition=2)
    actions = run([ready(2)], policy=policy)
    assert actions.create == (NewInstance(0, OLD), NewInstance(1, OLD))
    assert actions.update == (2,)


def test_scale_down_and_update_do_not_overlap() -> None:
    actions = run([ready(0), ready(1), ready(2), ready(3)], desired=2, policy=UpdatePolicy())
    assert actions.delete == (3, 2)
    assert set(actions.update) == {0, 1}


def test_budget_hold_keeps_since_across_passes() -> None:
    earlier = NOW - timedelta(minutes=4)
    previous = RolloutHold(HoldGate.BUDGET, "old reason", "chat-engine-rev-new", earlier)
    actions = run([ready(0), ready(1), updating(2)], hold=previous)
    assert actions.hold is not None
    assert actions.hold.since == earlier
    assert actions.hold.reason == "per-Component surge budget 1 exhausted (would become 2)"


def test_admission_clears_the_hold() -> None:
    previous = RolloutHold(HoldGate.BUDGET, "r", "chat-engine-rev-new", NOW)
    actions = run([ready(0), ready(1), ready(2, NEW)], hold=previous)
    assert actions.update == (1,)
    assert actions.hold is None


def test_pause_keeps_the_hold_and_moves_nothing() -> None:
    previous = RolloutHold(HoldGate.BUDGET, "r", "chat-engine-rev-new", NOW)
    actions = run([ready(0)], desired=3, hold=previous, paused=True)
    assert actions.update == () and actions.create == ()
    assert actions.held_by_pause == 2
    assert actions.hold == previous


def test_completion() -> None:
    actions = run([ready(0, NEW), ready(1, NEW), ready(2, NEW)])
    assert actions.rollout_complete
    assert actions.hold is None


def test_aggregate_blocks_most_advanced_wins() -> None:
    blocks = aggregate_blocks(
        [
            block(RetryBlockState.BACKOFF),
            None,
            block(RetryBlockState.HELD, attempts=3),
            block(RetryBlockState.BACKOFF, OLD),
        ]
    )
    assert [(b.target_revision, b.state) for b in blocks] == [
        (OLD, RetryBlockState.BACKOFF),
        (NEW, RetryBlockState.HELD),
    ]


def test_with_target_holds_a_surge_slot() -> None:
    row = with_target(ready(0), NEW, SURGE1)
    assert row.target_revision == NEW and row.surge_slots_held() == 1


@settings(max_examples=60)
@given(st.integers(1, 8), st.integers(0, 3), st.integers(0, 8))
def test_repeated_passes_converge_within_budget(desired: int, max_surge: int, start: int) -> None:
    """Simulate: each pass's updates land before the next; never more than maxSurge in flight."""
    policy = UpdatePolicy(max_surge=max_surge if max_surge else 1)
    rows = {index: ready(index) for index in range(start)}
    budget = surge_budget(policy, desired)
    assert budget is not None
    for _ in range(40):
        actions = run(list(rows.values()), desired=desired, policy=policy)
        for new in actions.create:
            rows[new.index] = ready(new.index, new.revision)
        for index in actions.delete:
            rows.pop(index)
        in_flight = [index for index in actions.update]
        assert len(in_flight) <= budget
        for index in in_flight:
            rows[index] = ready(index, NEW)
        if actions.rollout_complete:
            break
    assert len(rows) == desired
    assert all(row.running_revision == NEW for row in rows.values())


def test_failed_and_creating_rows_are_left_to_their_instance() -> None:
    actions = run([failed(0, NEW), creating(1, NEW), ready(2)], policy=UpdatePolicy())
    assert actions.update == (2,)
    assert actions.create == ()


@settings(max_examples=60)
@given(st.integers(1, 8), st.sampled_from([0, 1, 2, "25%", "50%"]), st.sampled_from([0, 1, 2, "25%"]))
def test_recreate_rollout_never_drops_below_the_minimum(
    desired: int, max_unavailable: int | str, max_surge: int | str
) -> None:
    """Updates take a pass to finish (the Instance doesn't serve meanwhile); scale stays put."""
    from planning.replica.budget import minimum_serving

    policy = UpdatePolicy(
        strategy=UpdateStrategyType.RECREATE_POD, max_unavailable=max_unavailable, max_surge=max_surge
    )
    if max_unavailable in (0, "0%"):
        policy = UpdatePolicy(strategy=UpdateStrategyType.RECREATE_POD, max_unavailable=1)
    minimum = minimum_serving(policy, desired)
    rows = {index: ready(index) for index in range(desired)}
    for _ in range(60):
        serving = sum(1 for row in rows.values() if row.serving)
        assert serving >= minimum
        actions = run(list(rows.values()), desired=desired, policy=policy)
        # Last pass's updates finish now; this pass's start (and stop serving).
        for index, row in list(rows.items()):
            if row.operation == "Update":
                rows[index] = ready(index, NEW)
        for index in actions.update:
            rows[index] = updating(index, strategy=UpdateStrategyType.RECREATE_POD, serving=False)
        if actions.rollout_complete:
            break
    assert all(row.running_revision == NEW for row in rows.values())
