"""One pass of the InferenceReplica: from what its Instances report to what to do next.

The workflow calls `reconcile` after every signal, timer or spec change and carries out
the actions it returns: start new `Instance` children, send updates, delete Instances,
set the hold and sleep until `wake_at` at the latest. It reads, in this order:

1. the count (`planning.replica.scale`): scale-up takes the lowest free indexes, scale-down drains
   in the keep order, a pause holds new Instances but not removals;
2. the rollout (`planning.replica.update`): which Instances move to the update revision now, within
   the budget, the partition and the update revision's retry block;
3. the hold (`planning.replica.hold`): set on a fresh denial, `since` kept, cleared on admission;
   a component in a rollout group moves no further than its run allows
   (`planning.replica.coordination`), and its hold then shows the run's gate; when the cap
   leaves Instances behind, the highest indexes move, as a partition would choose them.

A rollout run rolling the component back (`Coordination.rollback_to`) makes the stable
revision the one this pass moves Instances to, free of the run's cap; a stable revision no
longer retained moves nothing and holds (`planning.replica.rollback`).

Revisions here are template hashes (the `ome.io/revision` label), which is what Instances
report; the hold names the revision by its full name for status.

A new Instance starts on the update revision, except when the partition keeps its index on
the prior revision, or when the update revision has a retry block (a new Instance must not
become one more failed attempt at it; it moves with the rest once the block clears).

A multi-pod component under SurgeThenDrain moves a Ready Instance by a replacement at a new
index (`planning.replica.handover`): the update becomes a `surge_create` with `replaces`,
and once the replacement serves settled, the source drains (`handover_delete`). Such a
replacement deletes itself when it fails, so this pass (not the Instance) starts each retry
attempt of the update revision's block.
"""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from models.instance import InstancePhase, RetryBlock, RetryBlockState
from planning.replica.budget import UpdatePolicy
from planning.replica.coordination import Coordination, coordinated, room_for_one
from planning.replica.facts import InstanceFacts
from planning.replica.handover import gang_surge_applies, plan_handovers, replacement_indexes
from planning.replica.hold import HoldDenial, RolloutHold, next_hold
from planning.replica.rollback import hold_back, missing_denial, steer
from planning.replica.scale import ScalePlan, plan_scale
from planning.replica.update import UpdatePlan, counted, plan_update

_SEVERITY = {RetryBlockState.BACKOFF: 0, RetryBlockState.RETRY_IN_PROGRESS: 1, RetryBlockState.HELD: 2}


def aggregate_blocks(blocks: Sequence[RetryBlock | None]) -> list[RetryBlock]:
    """One block per revision from the Instances' own: the most advanced one wins.

    Blocks are revision-scoped and shared: a revision Held on one Instance is held for all.
    """
    chosen: dict[str, RetryBlock] = {}
    for block in blocks:
        if block is None:
            continue
        current = chosen.get(block.target_revision)
        key = (_SEVERITY[block.state], block.attempts_started, block.last_failure_at)
        if current is None or key > (
            _SEVERITY[current.state],
            current.attempts_started,
            current.last_failure_at,
        ):
            chosen[block.target_revision] = block
    return [chosen[revision] for revision in sorted(chosen)]


@dataclass(frozen=True)
class NewInstance:
    index: int
    revision: str
    """Template hash to start it on."""
    replaces: int | None = None
    """Set on a multi-pod surge replacement: the index of the Instance it replaces."""


@dataclass(frozen=True)
class ReplicaActions:
    create: tuple[NewInstance, ...] = ()
    update: tuple[int, ...] = ()
    delete: tuple[int, ...] = ()
    surge_create: tuple[NewInstance, ...] = ()
    """Multi-pod SurgeThenDrain: replacements at new indexes, each with the index it replaces."""
    handover_delete: tuple[int, ...] = ()
    """Sources whose replacement serves settled on its revision: drain and delete them."""
    hold: RolloutHold | None = None
    wake_at: datetime | None = None
    retry_attempt: bool = False
    rollout_complete: bool = False
    held_by_pause: int = 0
    scale: ScalePlan = field(default_factory=ScalePlan)
    update_plan: UpdatePlan = field(default_factory=UpdatePlan)
    revision: str = ""
    """The revision hash `update` and `surge_create` move to: the update revision, or the
    stable one a rollback returns to."""


def _start_revision(
    index: int,
    resulting_indexes: Sequence[int],
    update_revision: str,
    current_revision: str | None,
    policy: UpdatePolicy,
    update_held: bool,
) -> str:
    if current_revision is None or current_revision == update_revision:
        return update_revision
    if update_held:
        return current_revision
    if policy.partition > 0:
        # The partition holds the lowest indexes of the set as it will be after this pass.
        lower = sum(1 for other in resulting_indexes if other < index)
        if lower < policy.partition:
            return current_revision
    return update_revision


def reconcile(
    *,
    desired: int,
    instances: Sequence[InstanceFacts],
    update_revision: str,
    current_revision: str | None,
    revision_names: Mapping[str, str],
    policy: UpdatePolicy,
    retry_blocks: Sequence[RetryBlock],
    previous_hold: RolloutHold | None,
    paused: bool,
    now: datetime,
    reserved_indexes: Sequence[int] = (),
    instance_retries: bool = True,
    update_multi_pod: bool = False,
    coordination: Coordination | None = None,
    retained: Container[str] | None = None,
    holds_the_rest: bool = False,
    rest_held_by_run: bool = False,
) -> ReplicaActions:
    """The actions of one pass; pure, so the workflow only carries them out.

    `update_multi_pod`: the update revision's Instances have workers (with the Instances'
    own pod counts, this says whether an update is a multi-pod surge handover); while
    rolling back, the stable revision's. `retained`: the revision hashes whose spec is
    kept, which a rollback can return to (None: every one). `holds_the_rest`: a pass that
    starts some Instances and leaves others waiting on the budget shows that hold at once;
    otherwise it shows from the next pass that starts none (an Instance's report of its
    update's start used to bring that pass at once). `rest_held_by_run`: that hold is the
    rollout run's where its cap, not the budget, holds the rest back (`UpdatePlan.cap_denial`);
    without it, the budget's (or none), as runs recorded before showed.
    """
    steering = steer(update_revision, coordination, retained)
    update_revision, cap = steering.revision, steering.cap
    if steering.rolling_back:
        policy = replace(policy, partition=0)
    scale = plan_scale(desired, instances, paused=paused, reserved_indexes=reserved_indexes)
    block = next((b for b in retry_blocks if b.target_revision == update_revision), None)
    # While the update revision has a retry block (backing off, retrying or held), a new
    # Instance starts on the prior revision rather than become one more failed attempt; so
    # does one that its rollout run leaves no room for on the update revision, or any while
    # a rollback cannot find its revision.
    update_held = (
        block is not None or steering.missing is not None or not room_for_one(instances, update_revision, cap)
    )
    creates: list[NewInstance] = []
    resulting = [instance.index for instance in counted(instances)] + list(scale.create)
    for index in scale.create:
        revision = _start_revision(index, resulting, update_revision, current_revision, policy, update_held)
        creates.append(NewInstance(index=index, revision=revision))

    # Instances on their way out are not updated: the update would be wasted work.
    leaving = set(scale.remove)
    staying = [instance for instance in instances if instance.index not in leaving]
    # The Instances this pass creates take their place in the partition order already.
    staying += [
        InstanceFacts(
            index=new.index,
            phase=InstancePhase.CREATING,
            target_revision=new.revision,
            operation="Create",
            has_pods=False,
        )
        for new in creates
    ]
    # A surge replacement deletes itself when it fails, so no Instance makes the next
    # attempt on its own: the pass starts it.
    gang = policy.surges and (update_multi_pod or any(instance.desired_pods > 1 for instance in instances))
    plan = plan_update(
        staying,
        desired,
        update_revision,
        policy,
        now,
        retry_block=block,
        paused=paused,
        instance_retries=instance_retries and not gang,
        highest_first=cap is not None and cap.limit < len(counted(staying)),
    )
    plan = coordinated(plan, staying, update_revision, cap)
    if steering.missing is not None:
        plan = hold_back(plan, missing_denial(steering.missing))
    by_index = {instance.index: instance for instance in staying}
    surged = [i for i in plan.start if gang_surge_applies(policy, by_index[i], update_multi_pod)]
    updates = tuple(i for i in plan.start if i not in surged)
    used = {instance.index for instance in instances} | set(reserved_indexes) | set(scale.create)
    floor = max(plan.partition_held) + 1 if plan.partition_held else 0
    surge_creates = tuple(
        NewInstance(index=index, revision=update_revision, replaces=source)
        for source, index in zip(surged, replacement_indexes(used, len(surged), floor), strict=True)
    )
    drain_held = coordination is not None and coordination.drain_hold is not None
    handovers = plan_handovers(
        [instance for instance in instances if instance.index not in leaving],
        policy.min_ready_seconds,
        now,
        paused or drain_held,
    )
    denial = plan.denial
    if denial is None and holds_the_rest and not plan.retry_attempt:
        # A retry attempt admits one start whatever the budget: the rest wait on it, not on that.
        denial = (plan.cap_denial or plan.budget_denial) if rest_held_by_run else plan.budget_denial
    if denial is not None:
        denial = HoldDenial(denial.gate, denial.reason, revision_names.get(denial.target, denial.target))
    hold = previous_hold if plan.paused else next_hold(previous_hold, denial, now)
    if plan.complete:
        hold = None
    wake_at = plan.wake_at
    if handovers.wake_at is not None and (wake_at is None or handovers.wake_at < wake_at):
        wake_at = handovers.wake_at
    return ReplicaActions(
        create=tuple(creates),
        update=updates,
        delete=scale.remove,
        surge_create=surge_creates,
        handover_delete=handovers.drain,
        hold=hold,
        wake_at=wake_at,
        retry_attempt=plan.retry_attempt,
        rollout_complete=plan.complete and not creates and not scale.remove and not handovers.drain,
        held_by_pause=scale.held_by_pause,
        scale=scale,
        update_plan=plan,
        revision=update_revision,
    )


def with_target(instance: InstanceFacts, revision: str, policy: UpdatePolicy) -> InstanceFacts:
    """The row as it will look once the Instance has been told to move to `revision`.

    The workflow folds its own sends into its view at once, so a second pass before the
    Instance reports back does not send the same update twice or overspend the budget.
    """
    return replace(instance, target_revision=revision, operation="Update", operation_strategy=policy.strategy)
