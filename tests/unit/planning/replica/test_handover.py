"""Multi-pod SurgeThenDrain handovers: a replacement at a new index, then the source drains."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from models.inferencereplica import InstanceRow, OperationRow
from models.instance import RetryBlock, RetryBlockState, UpdateRetryPolicy, UpdateStrategyType
from planning.replica.budget import UpdatePolicy, surge_budget
from planning.replica.facts import InstanceFacts
from planning.replica.handover import (
    GANG_SURGE_CLEANUP_STEP,
    GANG_SURGE_STEP,
    GangSurge,
    cleaning_up,
    handover_rows,
    plan_handovers,
    replacement_indexes,
    settle_surges,
    with_handovers,
)
from planning.replica.hold import HoldGate
from planning.replica.reconcile import NewInstance, reconcile
from planning.replica.retry import absorb_abandoned_surge
from planning.replica.scale import keep_order, plan_scale
from tests.unit.planning.replica.rows import NEW, NOW, OLD, creating, failed, ready

pytestmark = pytest.mark.unit

NAMES = {OLD: "chat-engine-rev-old", NEW: "chat-engine-rev-new"}
SURGE1 = UpdatePolicy(strategy=UpdateStrategyType.SURGE_THEN_DRAIN, max_surge=1)
GANG = 2  # a leader and one worker


def gang(index: int, revision: str = OLD, **extra: object) -> InstanceFacts:
    """A Ready multi-pod Instance."""
    return ready(index, revision, desired_pods=GANG, **extra)


def replacement(index: int, source: int, serving_for: float | None = None) -> InstanceFacts:
    """A surge replacement of `source`: coming up, or Ready on NEW for `serving_for` seconds."""
    if serving_for is None:
        return creating(index, NEW, desired_pods=GANG, replaces=source)
    return gang(index, NEW, serving_for=serving_for, replaces=source)


def busy(index: int) -> InstanceFacts:
    """A source while its replacement comes up (as `with_handovers` shows it)."""
    return gang(
        index,
        target_revision=NEW,
        operation="Update",
        operation_strategy=UpdateStrategyType.SURGE_THEN_DRAIN,
    )


def draining(index: int, has_pods: bool = True) -> InstanceFacts:
    return replace(gang(index), phase="Deleting", operation="Delete", has_pods=has_pods)  # type: ignore[arg-type]


def run(  # type: ignore[no-untyped-def]
    instances, desired=2, policy=SURGE1, blocks=(), paused=False, multi_pod=True, reserved=()
):
    return reconcile(
        desired=desired,
        instances=instances,
        update_revision=NEW,
        current_revision=OLD,
        revision_names=NAMES,
        policy=policy,
        retry_blocks=list(blocks),
        previous_hold=None,
        paused=paused,
        now=NOW,
        reserved_indexes=reserved,
        update_multi_pod=multi_pod,
    )


def block(state: RetryBlockState, attempts: int = 1, next_retry_in: float | None = None) -> RetryBlock:
    return RetryBlock(
        target_revision=NEW,
        state=state,
        attempts_started=attempts,
        next_retry_at=NOW + timedelta(seconds=next_retry_in) if next_retry_in is not None else None,
        first_failure_at=NOW - timedelta(minutes=5),
        last_failure_at=NOW - timedelta(minutes=1),
        reason="ErrImagePull",
    )


# --- starting replacements -----------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "instances", "policy", "reserved", "surged"),
    [
        (
            "one slot: the highest index goes first, to the lowest free index",
            [gang(0), gang(1)],
            SURGE1,
            (),
            ((1, 2),),
        ),
        (
            "two slots: both start at once, each at its own new index",
            [gang(0), gang(1)],
            UpdatePolicy(max_surge=2),
            (),
            ((1, 2), (0, 3)),
        ),
        ("a gap is filled first", [gang(1), gang(2)], SURGE1, (), ((2, 0),)),
        ("an index still being removed is not reused", [gang(1), gang(2)], SURGE1, (0,), ((2, 3),)),
        (
            "no budget: every Instance surges",
            [gang(0), gang(1)],
            UpdatePolicy(max_surge=None),
            (),
            ((1, 2), (0, 3)),
        ),
        (
            "the partition holds the lowest; the replacement stays above it",
            [gang(1), gang(2)],
            UpdatePolicy(max_surge=1, partition=1),
            (),
            ((2, 3),),
        ),
    ],
)
def test_an_update_of_a_ready_gang_is_a_replacement_at_a_new_index(  # type: ignore[no-untyped-def]
    name, instances, policy, reserved, surged
) -> None:
    actions = run(instances, policy=policy, reserved=reserved)
    assert actions.update == (), name
    assert actions.surge_create == tuple(NewInstance(new, NEW, replaces=src) for src, new in surged), name
    assert actions.create == () and actions.delete == (), name


def test_a_gang_that_does_not_serve_is_rebuilt_on_its_own_names() -> None:
    actions = run([gang(0), failed(1, desired_pods=GANG)])
    assert actions.update == (1,)
    assert actions.surge_create == ()


def test_single_pod_instances_still_update_in_place_of_a_replacement() -> None:
    actions = run([ready(0), ready(1)], multi_pod=False)
    assert actions.update == (1,)
    assert actions.surge_create == ()


def test_other_strategies_never_surge_a_gang() -> None:
    policy = UpdatePolicy(strategy=UpdateStrategyType.RECREATE_POD, max_unavailable=1)
    actions = run([gang(0), gang(1)], policy=policy)
    assert actions.update == (1,) and actions.surge_create == ()


def test_a_handover_in_flight_uses_the_only_slot() -> None:
    actions = run([gang(0), busy(1), replacement(2, source=1)])
    assert actions.surge_create == () and actions.update == ()
    assert actions.create == () and actions.delete == ()  # the pair counts once
    assert actions.hold is not None and actions.hold.gate == HoldGate.BUDGET
    assert actions.hold.reason == "per-Component surge budget 1 exhausted (would become 2)"


def test_a_draining_source_holds_its_slot_until_its_pods_are_gone() -> None:
    # §7: 2 draining pods of a 2-pod gang hold one slot.
    held = run([gang(0), draining(1), replacement(2, source=1, serving_for=600)])
    assert held.surge_create == ()
    assert held.hold is not None and held.hold.gate == HoldGate.BUDGET
    gone = run([gang(0), draining(1, has_pods=False), replacement(2, source=1, serving_for=600)])
    assert gone.surge_create == (NewInstance(3, NEW, replaces=0),)


def test_pause_starts_no_replacement() -> None:
    actions = run([gang(0), gang(1)], paused=True)
    assert actions.surge_create == () and actions.update == ()


# --- finishing handovers ---------------------------------------------------------------


def test_the_source_drains_once_its_replacement_serves() -> None:
    actions = run([gang(0), busy(1), replacement(2, source=1, serving_for=1)])
    assert actions.handover_delete == (1,)
    assert not actions.rollout_complete


def test_min_ready_seconds_paces_the_handover() -> None:
    policy = UpdatePolicy(max_surge=1, min_ready_seconds=30)
    early = run([gang(0), busy(1), replacement(2, source=1, serving_for=10)], policy=policy)
    assert early.handover_delete == ()
    assert early.wake_at == NOW + timedelta(seconds=20)
    settled = run([gang(0), busy(1), replacement(2, source=1, serving_for=30)], policy=policy)
    assert settled.handover_delete == (1,)


def test_pause_stops_a_handover_before_the_source_drains() -> None:
    actions = run([gang(0), busy(1), replacement(2, source=1, serving_for=60)], paused=True)
    assert actions.handover_delete == ()


def test_a_replacement_still_coming_up_drains_nothing() -> None:
    assert run([gang(0), busy(1), replacement(2, source=1)]).handover_delete == ()


def test_the_rollout_completes_when_every_replacement_took_over() -> None:
    actions = run([gang(2, NEW), gang(3, NEW)])
    assert actions.rollout_complete and actions.hold is None


def test_plan_handovers_skips_pairs_already_leaving() -> None:
    rows = [draining(1), replacement(2, source=1, serving_for=60)]
    assert plan_handovers(rows, 0.0, NOW, paused=False).drain == ()


# --- retries of a revision whose replacements fail -------------------------------------


def test_a_due_backoff_starts_exactly_one_replacement_as_the_retry_attempt() -> None:
    actions = run(
        [gang(0), gang(1)],
        policy=UpdatePolicy(max_surge=2),
        blocks=[block(RetryBlockState.BACKOFF, next_retry_in=-1)],
    )
    assert actions.surge_create == (NewInstance(2, NEW, replaces=1),)
    assert actions.retry_attempt


def test_a_backoff_not_yet_due_waits_with_the_retry_block_gate() -> None:
    actions = run([gang(0), gang(1)], blocks=[block(RetryBlockState.BACKOFF, next_retry_in=60)])
    assert actions.surge_create == ()
    assert actions.hold is not None and actions.hold.gate == HoldGate.RETRY_BLOCK
    assert actions.wake_at == NOW + timedelta(seconds=60)


def test_a_held_revision_starts_no_replacement() -> None:
    actions = run([gang(0), gang(1)], blocks=[block(RetryBlockState.HELD, attempts=3)])
    assert actions.surge_create == ()
    assert actions.hold is not None and actions.hold.gate == HoldGate.HELD


POLICY = UpdateRetryPolicy(max_attempts=3, attempt_delays_seconds=[60.0, 120.0])


@pytest.mark.parametrize(
    ("name", "kept", "reported", "reason", "policy", "state", "attempts", "next_in"),
    [
        (
            "first failure takes the replacement's block",
            None,
            block(RetryBlockState.BACKOFF, 1, 60),
            "ErrImagePull",
            POLICY,
            RetryBlockState.BACKOFF,
            1,
            60,
        ),
        (
            "first failure, no policy: held at once",
            None,
            block(RetryBlockState.HELD),
            "ErrImagePull",
            None,
            RetryBlockState.HELD,
            1,
            None,
        ),
        (
            "the attempt this IR started counts on",
            block(RetryBlockState.RETRY_IN_PROGRESS, 2),
            block(RetryBlockState.BACKOFF, 1, 60),
            "ImagePullBackOff",
            POLICY,
            RetryBlockState.BACKOFF,
            2,
            120,
        ),
        (
            "the last attempt holds",
            block(RetryBlockState.RETRY_IN_PROGRESS, 3),
            block(RetryBlockState.BACKOFF, 1, 60),
            "ErrImagePull",
            POLICY,
            RetryBlockState.HELD,
            3,
            None,
        ),
        (
            "a crash uses no attempt: due again now",
            block(RetryBlockState.RETRY_IN_PROGRESS, 2),
            None,
            "CrashLoopBackOff",
            POLICY,
            RetryBlockState.BACKOFF,
            1,
            0,
        ),
    ],
)
def test_an_abandoned_replacement_leaves_its_block_with_the_replica(  # type: ignore[no-untyped-def]
    name, kept, reported, reason, policy, state, attempts, next_in
) -> None:
    result = absorb_abandoned_surge(kept, reported, NEW, reason, NOW, policy)
    assert result is not None, name
    assert (result.state, result.attempts_started) == (state, attempts), name
    expected = NOW + timedelta(seconds=next_in) if next_in is not None else None
    assert result.next_retry_at == expected, name


def test_a_crash_with_no_block_records_nothing() -> None:
    assert absorb_abandoned_surge(None, None, NEW, "CrashLoopBackOff", NOW, POLICY) is None


def test_a_block_of_another_revision_is_not_carried_over() -> None:
    other = block(RetryBlockState.RETRY_IN_PROGRESS, 2).model_copy(update={"target_revision": OLD})
    result = absorb_abandoned_surge(other, None, NEW, "ErrImagePull", NOW, POLICY)
    assert result is not None and result.target_revision == NEW and result.attempts_started == 1


# --- the workflow's record, overlaid -----------------------------------------------------


def test_with_handovers_marks_the_pair() -> None:
    surges = {2: GangSurge(source=1, revision=NEW, started_at=NOW)}
    rows = with_handovers([gang(0), gang(1), creating(2, NEW, desired_pods=GANG)], surges)
    assert [row.replaces for row in rows] == [None, None, 1]
    assert rows[1].operation == "Update" and rows[1].target_revision == NEW
    assert rows[0].operation is None


def test_a_source_whose_replacement_is_gone_is_free_again() -> None:
    surges = {2: GangSurge(source=1, revision=NEW, started_at=NOW)}
    rows = with_handovers([gang(0), gang(1)], surges)
    assert rows[1].operation is None


def test_an_abandoned_replacement_keeps_its_source_busy_until_its_pods_are_gone() -> None:
    # The replacement's row is gone (its abandoned report), its record is not.
    surges = {2: GangSurge(source=1, revision=NEW, started_at=NOW, abandoned=True)}
    rows = with_handovers([gang(0), gang(1)], surges)
    assert rows[1].operation == "Update"
    assert settle_surges(surges, [0, 1]) == surges
    assert cleaning_up(surges) == [2]
    # Its leftover pods hold the slot of the update, and its index stays taken.
    actions = run(rows, policy=UpdatePolicy(max_surge=2), reserved=cleaning_up(surges))
    assert actions.surge_create == (NewInstance(3, NEW, replaces=0),)
    assert run(rows, reserved=cleaning_up(surges)).surge_create == ()


def test_the_pair_counts_once_and_is_kept_first() -> None:
    rows = [gang(0), gang(1), busy(3), replacement(4, source=3)]
    assert plan_scale(3, rows).idle
    assert keep_order(rows)[:2] == [3, 4]
    # Scale-down to one keeps the pair, both of it.
    assert sorted(plan_scale(1, rows).remove) == [0, 1]


def test_settle_surges_forgets_ended_handovers() -> None:
    surges = {
        2: GangSurge(source=1, revision=NEW, started_at=NOW),  # both present: kept
        3: GangSurge(source=0, revision=NEW, started_at=NOW),  # replacement gone
        5: GangSurge(source=4, revision=NEW, started_at=NOW),  # source gone: over
    }
    assert settle_surges(surges, [0, 1, 2, 5]) == {2: surges[2]}


def test_replacement_indexes_respect_the_floor() -> None:
    assert replacement_indexes([0, 2], 2) == [1, 3]
    assert replacement_indexes([0, 2], 2, floor=1) == [1, 3]
    assert replacement_indexes([1, 2], 1, floor=2) == [3]


def test_status_rows_show_the_source_updating_by_gang_surge() -> None:
    started = NOW - timedelta(seconds=30)
    deadline = NOW + timedelta(minutes=29)
    rows = [
        InstanceRow(index=1, phase="Ready", running_revision=OLD, target_revision=OLD),
        InstanceRow(
            index=2,
            phase="Creating",
            target_revision=NEW,
            operation=OperationRow(id="c", type="Create", step="CreatePods", deadline=deadline),
        ),
    ]
    shown = handover_rows(rows, {2: GangSurge(source=1, revision=NEW, started_at=started)})
    source = shown[0]
    assert source.phase == "Ready" and source.target_revision == NEW
    assert source.operation is not None
    assert (source.operation.type, source.operation.step) == ("Update", GANG_SURGE_STEP)
    assert source.operation.started_at == started and source.operation.deadline == deadline
    assert shown[1] == rows[1]


def test_status_rows_show_the_cleanup_of_an_abandoned_replacement() -> None:
    rows = [InstanceRow(index=1, phase="Ready", running_revision=OLD, target_revision=OLD)]
    surges = {2: GangSurge(source=1, revision=NEW, started_at=NOW, abandoned=True)}
    (source,) = handover_rows(rows, surges)
    assert source.operation is not None and source.operation.step == GANG_SURGE_CLEANUP_STEP
    # Without a record, or with the replacement's row gone before it was abandoned: nothing.
    assert handover_rows(rows, {}) == rows
    assert handover_rows(rows, {2: GangSurge(source=1, revision=NEW, started_at=NOW)}) == rows


# --- a whole rollout, tick by tick ------------------------------------------------------


def _tick(rows: dict[int, InstanceFacts]) -> dict[int, InstanceFacts]:
    """One moment later: replacements come up, draining pods go, then their Instance."""
    after: dict[int, InstanceFacts] = {}
    for index, row in rows.items():
        if row.deleting and not row.has_pods:
            continue  # its last report: deleted
        if row.deleting and row.serving:
            after[index] = replace(row, serving=False, ready=False)  # out of rotation, pods stay
        elif row.deleting:
            after[index] = replace(row, has_pods=False)
        elif row.operation == "Create":
            after[index] = gang(index, NEW)
        else:
            after[index] = row
    return after


@settings(max_examples=40, deadline=None)
@given(
    count=st.integers(min_value=1, max_value=6),
    max_surge=st.one_of(st.integers(min_value=1, max_value=3), st.just("50%")),
    partition=st.integers(min_value=0, max_value=2),
)
def test_a_rollout_of_gangs_never_serves_fewer_and_ends_on_the_new_revision(
    count: int, max_surge: int | str, partition: int
) -> None:
    policy = UpdatePolicy(max_surge=max_surge, partition=partition)
    budget = surge_budget(policy, count)
    assert budget is not None
    rows = {index: gang(index) for index in range(count)}
    surges: dict[int, GangSurge] = {}
    for _ in range(20 * count):
        facts = with_handovers([rows[i] for i in sorted(rows)], surges)
        actions = run(facts, desired=count, policy=policy)
        assert actions.create == () and actions.delete == () and actions.update == ()
        if actions.rollout_complete and not any(row.deleting for row in rows.values()):
            break
        for new in actions.surge_create:
            assert new.index not in rows
            rows[new.index] = creating(new.index, NEW, desired_pods=GANG)
            surges[new.index] = GangSurge(source=new.replaces or 0, revision=NEW, started_at=NOW)
        for source in actions.handover_delete:
            rows[source] = draining(source)
        # §7: a pair coming up, or a source's pods draining, each hold one slot.
        coming_up = sum(1 for j, s in surges.items() if j in rows and not rows[s.source].deleting)
        draining_pods = sum(1 for row in rows.values() if row.deleting and row.has_pods)
        assert coming_up + draining_pods <= budget
        serving = sum(1 for row in rows.values() if row.serving and not row.deleting)
        assert serving >= count
        assert sum(1 for row in rows.values() if not row.deleting and row.replaces is None) <= count + budget
        rows = _tick(rows)
        surges = settle_surges(surges, rows)
    else:
        raise AssertionError(f"rollout of {count} with maxSurge {max_surge} did not finish: {rows}")
    on_new = sorted(i for i, row in rows.items() if row.running_revision == NEW)
    held = sorted(i for i, row in rows.items() if row.running_revision == OLD)
    assert len(rows) == count and len(held) == min(partition, count)
    # The partition keeps the lowest indexes where they were, on the prior revision.
    assert held == list(range(min(partition, count)))
    assert not set(on_new) & set(held)
