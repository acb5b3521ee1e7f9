"""A rollout run's cap on an InferenceReplica's update (spec reference §6, §7).

A component in a rollout group moves only as far as its run allows: the Rollout plans, at
each moment, how many of the component's Instances may be on the run's target revision
(`planning.rollout.gates`), and the InferenceService hands that `Coordination` to the
InferenceReplica. The InferenceReplica plans its own starts as always (pause, partition,
retry block, budgets) and then admits no more than the cap leaves room for, the highest
indexes first (the rest hold the previous revision, as a partition would); when the cap is
what holds it, its `rolloutHold` shows the run's gate and reason (`Plan`, `Sequential`,
`Ratio`, `Pairing`, or `Budget` for a blue-green wave).

A component whose update revision is not the run's target (a newer change, whose run is
still opening) fails closed: gate `Plan`.

A canary rollback (`rollback_to`) turns the InferenceReplica back to the stable revision
and lifts the cap; `planning.replica.rollback` says how.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from planning.replica.facts import InstanceFacts
from planning.replica.hold import HoldDenial, HoldGate
from planning.replica.update import UpdatePlan, counted, on_revision


@dataclass(frozen=True)
class Coordination:
    """What the component's rollout run allows now."""

    run: int
    target: str
    """The revision hash the run moves the component to."""
    limit: int
    """Instances that may be on (or moving to) `target` now."""
    gate: str | None = None
    reason: str | None = None
    max_surge: int | str | None = None
    max_unavailable: int | str | None = None
    """A rolling-update group's budgets, which replace the component's own."""
    drain_hold: str | None = None
    """Why old Instances may not drain yet (the pairing-protocol transition's `Pairing` gate):
    the InferenceReplica tells its Instances (`hold_drain`) and holds its own handover drains."""
    group: int | None = None
    """The index of the component's group in `spec.rollout.groups` (the InferenceReplica's
    `coordinationGroupRef`); None until the run has pinned its plan."""
    group_phase: str | None = None
    """The group's phase in the run: Pending, Progressing, Paused, Failed or Succeeded."""
    stable: str | None = None
    """The revision hash a rollback of this run would return to (a canary's stable revision):
    while the run names it, the InferenceReplica keeps its revision and spec, and reports
    `stable_revision_missing` when it has neither. None: the run would not roll back."""
    rollback_to: str | None = None
    """Set while the run rolls the component back: the stable revision hash. The
    InferenceReplica moves every Instance to it in place of the spec's revision, and
    `limit`, `gate` and `reason` do not apply (`planning.replica.rollback`)."""


def opening(run: int, target: str) -> Coordination:
    """Before the run has pinned its plan: nothing moves (fail closed)."""
    return Coordination(run, target, 0, HoldGate.PLAN.value, f"rollout run {run} has not pinned its plan yet")


def on_target(instances: Sequence[InstanceFacts], revision: str) -> int:
    """Instances on `revision`, or moving to it."""
    return sum(1 for i in counted(instances) if i.target_revision == revision or on_revision(i, revision))


def room_for_one(instances: Sequence[InstanceFacts], revision: str, coordination: Coordination | None) -> bool:
    """Whether one more Instance may be on `revision` now (always, outside a rollout run)."""
    if coordination is None:
        return True
    return coordination.target == revision and on_target(instances, revision) < coordination.limit


def coordinated(
    plan: UpdatePlan, instances: Sequence[InstanceFacts], revision: str, coordination: Coordination | None
) -> UpdatePlan:
    """`plan` with no more starts than the run allows; the run's hold when it holds them all."""
    if coordination is None or plan.paused or plan.complete:
        return plan
    if not plan.start:
        if coordination.drain_hold is not None and plan.denial is None and coordination.target == revision:
            # Nothing else waits: the rollout shows why the old Instances keep serving.
            return replace(plan, denial=HoldDenial(HoldGate.PAIRING, coordination.drain_hold, revision))
        return plan
    if coordination.target != revision:
        room = 0
        denial = HoldDenial(HoldGate.PLAN, f"revision {revision} waits for its rollout run to pin a plan", revision)
    else:
        room = max(0, coordination.limit - on_target(instances, revision))
        gate = HoldGate(coordination.gate) if coordination.gate else HoldGate.BUDGET
        reason = coordination.reason or (
            f"rollout run {coordination.run} allows {coordination.limit} Instances on {revision} now"
        )
        denial = HoldDenial(gate, reason, revision)
    # The new revision goes to the highest indexes, as a partition would place it: only the
    # `room` highest of the Instances tried may start, even where the budget admitted a
    # lower one (a broken Instance, which costs none) and held a higher one back.
    eligible = set(sorted((*plan.start, *plan.waiting), reverse=True)[:room])
    started = tuple(index for index in plan.start if index in eligible)
    if started == plan.start:
        return plan
    own = plan.denial or plan.budget_denial
    if own is not None and eligible - set(plan.start):
        # An Instance the cap has room for waits on the plan's own gate (its budget).
        denial = own
    return replace(
        plan,
        start=started,
        denial=None if started else denial,
        cap_denial=denial,
        wake_at=None if started else plan.wake_at,
        waiting=plan.waiting + tuple(index for index in plan.start if index not in eligible),
        retry_attempt=plan.retry_attempt and bool(started),
    )
