"""A canary rollback: the InferenceReplica moves its Instances back to the stable revision."""

from __future__ import annotations

from dataclasses import replace

import pytest

from models.instance import RetryBlock, RetryBlockState, UpdateStrategyType
from planning.replica.budget import UpdatePolicy
from planning.replica.coordination import Coordination
from planning.replica.hold import HoldGate
from planning.replica.reconcile import NewInstance, ReplicaActions, reconcile
from planning.replica.rollback import (
    Steering,
    missing_reason,
    protected,
    revision_counts,
    stable_missing,
    steer,
)
from tests.unit.planning.replica.rows import NEW, NOW, OLD, ready, updating

pytestmark = pytest.mark.unit

NAMES = {OLD: "chat-engine-rev-old", NEW: "chat-engine-rev-new"}
SURGE1 = UpdatePolicy(strategy=UpdateStrategyType.SURGE_THEN_DRAIN, max_surge=1)
CANARY = Coordination(2, NEW, 1)
"""The run moves the canary: one Instance may be on NEW."""
BACK = replace(CANARY, limit=0, stable=OLD, rollback_to=OLD)
"""The run rolls it back (it sends its canary capacity, 0: the cap does not apply)."""
GONE = "chat-engine-rev-gone0000"


def run(  # type: ignore[no-untyped-def]
    instances,
    coordination=BACK,
    desired=2,
    policy=SURGE1,
    retained=(OLD, NEW),
    current=OLD,
    paused=False,
    blocks=(),
) -> ReplicaActions:
    return reconcile(
        desired=desired,
        instances=instances,
        update_revision=NEW,
        current_revision=current,
        revision_names=NAMES,
        policy=policy,
        retry_blocks=list(blocks),
        previous_hold=None,
        paused=paused,
        now=NOW,
        coordination=coordination,
        retained=retained,
    )


@pytest.mark.parametrize(
    "coordination, retained, steering",
    [
        (None, {OLD, NEW}, Steering(NEW, None)),
        (CANARY, {OLD, NEW}, Steering(NEW, CANARY)),
        (BACK, {OLD, NEW}, Steering(OLD, None, rolling_back=True)),
        (BACK, None, Steering(OLD, None, rolling_back=True)),
        # Back to the spec's own revision is no rollback at all.
        (replace(CANARY, rollback_to=NEW), {NEW}, Steering(NEW, replace(CANARY, rollback_to=NEW))),
        (BACK, {NEW}, Steering(NEW, BACK, missing=OLD)),
    ],
    ids=["no run", "canary", "rollback", "rollback, all retained", "to the spec's own", "stable gone"],
)
def test_steering(coordination: Coordination | None, retained: set[str] | None, steering: Steering) -> None:
    assert steer(NEW, coordination, retained) == steering


@pytest.mark.parametrize(
    "instances, coordination, policy, desired, update, create, hold",
    [
        # SurgeThenDrain: the canary Instance moves back (a new stable pod, then the drain).
        ([ready(0), ready(1, NEW)], BACK, SURGE1, 2, (1,), (), None),
        # The run's gate and limit do not hold a rollback.
        ([ready(0), ready(1, NEW)], replace(BACK, gate="Sequential", reason="waits"), SURGE1, 2, (1,), (), None),
        # The component's budget still paces it: one surge slot in use by a move back.
        (
            [ready(0, NEW), updating(1, OLD, running_revision=NEW)],
            BACK, SURGE1, 2, (), (),
            ("Budget", "per-Component surge budget 1 exhausted (would become 2)"),
        ),
        # RecreatePod with no unavailability to spend holds every move.
        (
            [ready(0), ready(1, NEW)],
            BACK, UpdatePolicy(strategy=UpdateStrategyType.RECREATE_POD, max_unavailable=0), 2, (), (),
            ("Budget", "per-Component unavailability budget 0 exhausted (would become 1)"),
        ),
        # An Instance still moving to the canary finishes first, then comes back.
        ([ready(0), updating(1, NEW)], BACK, SURGE1, 2, (), (), None),
        # A partition holds nothing on the canary revision while rolling back.
        ([ready(0, NEW), ready(1, NEW)], BACK, replace(SURGE1, partition=2, max_surge=2), 2, (1, 0), (), None),
        # Scale-up starts new Instances on the stable revision.
        ([ready(0), ready(1, NEW)], BACK, SURGE1, 3, (1,), (NewInstance(2, OLD),), None),
    ],
    ids=["surge back", "gate ignored", "budget", "no unavailability", "in flight", "partition", "scale up"],
)
def test_a_rollback_moves_the_canary_instances_back_to_the_stable_revision(
    instances: list,
    coordination: Coordination,
    policy: UpdatePolicy,
    desired: int,
    update: tuple[int, ...],
    create: tuple[NewInstance, ...],
    hold: tuple[str, str] | None,
) -> None:
    actions = run(instances, coordination, desired=desired, policy=policy)
    assert actions.revision == OLD
    assert actions.update == update
    assert actions.create == create
    assert (None if actions.hold is None else (actions.hold.gate.value, actions.hold.reason)) == hold
    if actions.hold is not None:
        assert actions.hold.target == NAMES[OLD]


def test_a_canary_retry_block_does_not_gate_the_rollback() -> None:
    held = RetryBlock(
        target_revision=NEW,
        state=RetryBlockState.HELD,
        attempts_started=3,
        first_failure_at=NOW,
        last_failure_at=NOW,
        reason="ErrImagePull",
    )
    actions = run([ready(0), ready(1, NEW)], blocks=[held])
    assert actions.update == (1,) and actions.hold is None


def test_a_pause_holds_the_rollback() -> None:
    actions = run([ready(0), ready(1, NEW)], paused=True)
    assert actions.update == () and actions.update_plan.paused


def test_every_instance_back_on_stable_completes_the_rollback() -> None:
    actions = run([ready(0), ready(1)])
    assert actions.rollout_complete and actions.hold is None and actions.revision == OLD


def test_a_rollback_after_the_canary_completed_returns_from_the_current_revision() -> None:
    # The last step had moved everything: the InferenceReplica's current revision is the canary.
    actions = run([ready(0, NEW), ready(1, NEW)], current=NEW, desired=3)
    assert actions.update == (1,)
    assert actions.create == (NewInstance(2, OLD),)


@pytest.mark.parametrize(
    "instances, current, desired, create",
    [
        ([ready(0), ready(1, NEW)], OLD, 2, ()),
        # Everything on the canary (its last step): nothing is complete, nothing moves.
        ([ready(0, NEW), ready(1, NEW)], NEW, 2, ()),
        # A new Instance starts on the current revision, never on a guess.
        ([ready(0, NEW), ready(1, NEW)], NEW, 3, (NewInstance(2, NEW),)),
    ],
    ids=["mixed", "all on canary", "scale up"],
)
def test_a_stable_revision_no_longer_retained_holds_everything(
    instances: list, current: str, desired: int, create: tuple[NewInstance, ...]
) -> None:
    actions = run(instances, replace(BACK, rollback_to=GONE, stable=GONE), current=current, desired=desired)
    assert actions.revision == NEW
    assert actions.update == () and actions.surge_create == ()
    assert actions.create == create
    assert not actions.rollout_complete
    assert actions.hold is not None
    assert (actions.hold.gate, actions.hold.target) == (HoldGate.HELD, GONE)
    assert actions.hold.reason == (
        f"rollback to {GONE} impossible: the stable revision is no longer retained (StableRevisionMissing)"
    )
    assert actions.hold.reason == missing_reason(GONE)


@pytest.mark.parametrize(
    "coordination, retained, missing",
    [
        (None, {NEW}, None),
        (CANARY, {NEW}, None),
        (replace(CANARY, stable=OLD), {OLD, NEW}, None),
        # Known before any rollback is asked for: the run fails instead of rolling back.
        (replace(CANARY, stable=OLD), {NEW}, OLD),
        (BACK, {NEW}, OLD),
        (BACK, {OLD, NEW}, None),
    ],
    ids=["no run", "no stable named", "stable kept", "stable gone", "rollback gone", "rollback kept"],
)
def test_a_stable_revision_missing_is_reported(
    coordination: Coordination | None, retained: set[str], missing: str | None
) -> None:
    assert stable_missing(NEW, coordination, retained) == missing


@pytest.mark.parametrize(
    "coordination, kept",
    [
        (None, set()),
        (CANARY, set()),
        (replace(CANARY, stable=OLD), {NAMES[OLD]}),
        (BACK, {NAMES[OLD]}),
        (replace(BACK, rollback_to=GONE, stable=GONE), set()),
    ],
    ids=["no run", "no stable", "stable", "rollback", "unknown"],
)
def test_trimming_keeps_what_the_run_names_to_return_to(coordination: Coordination | None, kept: set[str]) -> None:
    assert protected(coordination, NAMES) == kept


def test_revision_counts_count_a_moving_instance_under_both_revisions() -> None:
    rows = [ready(0), updating(1, OLD, running_revision=NEW), ready(2, NEW)]
    assert revision_counts(rows) == {OLD: 2, NEW: 2}
    assert revision_counts([ready(0), ready(1)]) == {OLD: 2}
