"""Which Instances start moving to the update revision in this pass (spec reference §7).

The InferenceReplica re-plans whenever an Instance reports, a timer it asked for fires, or
the spec changes. Each pass:

1. A pause admits nothing and leaves the current hold as it is (§5).
2. `partition` keeps the lowest-index Instances on the prior revision; they are not
   candidates at all.
3. The update revision's retry block gates every start: `Held` admits nothing until a new
   revision or a release; `Backoff` admits nothing before `nextRetryAt`, and after it
   either exactly one start (the retry attempt) or, when the failed Instance retries on
   its own, nothing; `RetryInProgress` waits for that attempt's outcome.
4. The budget admits the rest: `SurgeThenDrain` while the surge slots in use stay within
   `maxSurge`; other strategies while the Instances that don't serve stay within
   `maxUnavailable`. An Instance that moved and serves for less than `minReadySeconds`
   still counts against either budget, which is how `minReadySeconds` paces a rollout.
   An Instance that doesn't serve anyway costs no unavailability, so broken Instances move
   first and are never blocked by the budget they already use.
   A multi-pod handover (`planning.replica.handover`) holds one slot for the pair: its
   replacement's, and once the source drains, the source's pods' until they are gone.

Candidates are tried Instances that don't serve first, then from the highest index down, so
with a partition the Instances that stay behind are the ones never reached. Under a rollout
run's cap that leaves some Instances behind (a canary step), `highest_first` tries them by
index alone: the Instances on the new revision are the highest indexes, the rest hold the
previous revision as a partition would hold them, a broken one included.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from models.instance import InstancePhase, RetryBlock, RetryBlockState
from planning.replica.budget import UpdatePolicy, surge_budget, unavailable_budget
from planning.replica.facts import InstanceFacts
from planning.replica.hold import (
    HoldDenial,
    HoldGate,
    held_reason,
    retry_backoff_reason,
    retry_in_progress_reason,
    surge_budget_reason,
    unavailability_budget_reason,
)

# Operations after which an Instance serves again on its own; while one runs, the Instance
# is busy and is neither a candidate nor counted as available.
_UNAVAILABLE_OPERATIONS = frozenset({"Create", "Update", "Restart", "Delete"})
_RESTING = frozenset({InstancePhase.READY, InstancePhase.FAILED, InstancePhase.PENDING})


@dataclass(frozen=True)
class UpdatePlan:
    start: tuple[int, ...] = ()
    """Instances to move to the update revision now, in this order."""
    denial: HoldDenial | None = None
    """Why candidates remain unmoved, for `rolloutHold`; None when nothing was denied."""
    budget_denial: HoldDenial | None = None
    """The budget's denial of the candidates left waiting, kept even when others started (a
    rollout run's cap may drop those, and then this is why the rest wait)."""
    cap_denial: HoldDenial | None = None
    """Why the candidates left waiting wait when a rollout run's cap cut this pass's starts (the
    run's hold, or the budget's where the cap had room for some it held); set by
    `coordination.coordinated` only, None when the cap cut nothing."""
    wake_at: datetime | None = None
    """When the decision can change without any Instance reporting (a timer to set)."""
    partition_held: tuple[int, ...] = ()
    waiting: tuple[int, ...] = ()
    """Candidates not started in this pass."""
    retry_attempt: bool = False
    """The start is the retry attempt of a Backoff block: mark it RetryInProgress."""
    paused: bool = False
    complete: bool = False
    """Every Instance beyond the partition runs the update revision at rest."""


def counted(instances: Sequence[InstanceFacts]) -> list[InstanceFacts]:
    """Instances that count toward desired: not Deleting and not a live handover replacement."""
    live = [instance for instance in instances if not instance.deleting]
    indexes = {instance.index for instance in live}
    return [instance for instance in live if instance.replaces is None or instance.replaces not in indexes]


def partition_split(
    instances: Sequence[InstanceFacts], partition: int
) -> tuple[list[InstanceFacts], list[InstanceFacts]]:
    """(held on the prior revision, free to move): the `partition` lowest indexes are held."""
    ordered = sorted(counted(instances), key=lambda instance: instance.index)
    held = ordered[: max(0, partition)]
    return held, ordered[len(held) :]


def on_revision(instance: InstanceFacts, revision: str) -> bool:
    """Runs `revision` and has nothing in flight."""
    return (
        instance.running_revision == revision
        and instance.target_revision in (None, revision)
        and instance.at_rest
    )


def _earliest(*moments: datetime | None) -> datetime | None:
    present = [moment for moment in moments if moment is not None]
    return min(present) if present else None


def _retry_gate(
    block: RetryBlock, revision: str, now: datetime, instance_retries: bool
) -> tuple[HoldDenial | None, bool]:
    """(denial, whether one retry attempt may start now) for the update revision's block."""
    last = block.reason or "unknown"
    if block.state == RetryBlockState.HELD:
        return HoldDenial(HoldGate.HELD, held_reason(revision, block.attempts_started, last), revision), False
    if block.state == RetryBlockState.RETRY_IN_PROGRESS:
        reason = retry_in_progress_reason(revision, block.attempts_started)
        return HoldDenial(HoldGate.RETRY_BLOCK, reason, revision), False
    if block.next_retry_at is not None and now < block.next_retry_at:
        reason = retry_backoff_reason(revision, block.attempts_started, block.next_retry_at, last)
        return HoldDenial(HoldGate.RETRY_BLOCK, reason, revision), False
    if instance_retries:
        # The Instance whose attempt failed makes the next one itself; another start now
        # would be a second concurrent attempt at the same revision.
        reason = retry_backoff_reason(revision, block.attempts_started, block.next_retry_at, last)
        return HoldDenial(HoldGate.RETRY_BLOCK, reason, revision), False
    return None, True


def plan_update(
    instances: Sequence[InstanceFacts],
    desired: int,
    update_revision: str,
    policy: UpdatePolicy,
    now: datetime,
    retry_block: RetryBlock | None = None,
    paused: bool = False,
    instance_retries: bool = True,
    highest_first: bool = False,
) -> UpdatePlan:
    """The starts this pass admits toward `update_revision`, and the hold for the rest.

    `instance_retries`: the Instance that failed an attempt retries on its own when its
    backoff ends (as the `Instance` workflow does), so a due Backoff admits no other start;
    False makes this pass start the retry attempt itself (`retry_attempt` in the plan).
    `highest_first`: try candidates by index alone, highest first (a binding rollout cap).
    """
    held, free = partition_split(instances, policy.partition)
    held_indexes = tuple(instance.index for instance in held)
    candidates = [instance for instance in free if instance.target_revision != update_revision]
    moving = [instance for instance in free if not on_revision(instance, update_revision)]
    if not moving:
        return UpdatePlan(partition_held=held_indexes, complete=True)
    # Instances busy with another operation wait for it to end before they can move.
    ready_to_move = [
        instance for instance in candidates if instance.operation is None and instance.phase in _RESTING
    ]
    if highest_first:
        ready_to_move.sort(key=lambda instance: -instance.index)
    else:
        ready_to_move.sort(key=lambda instance: (instance.serving, -instance.index))
    if not ready_to_move:
        return UpdatePlan(partition_held=held_indexes)
    if paused:
        return UpdatePlan(
            partition_held=held_indexes,
            waiting=tuple(instance.index for instance in ready_to_move),
            paused=True,
        )

    retry_attempt = False
    limit = len(ready_to_move)
    if retry_block is not None and retry_block.target_revision == update_revision:
        denial, may_retry = _retry_gate(retry_block, update_revision, now, instance_retries)
        if denial is not None:
            wake = retry_block.next_retry_at if retry_block.state == RetryBlockState.BACKOFF else None
            return UpdatePlan(
                denial=denial,
                wake_at=wake,
                partition_held=held_indexes,
                waiting=tuple(instance.index for instance in ready_to_move),
            )
        retry_attempt = may_retry
        limit = 1

    budget = surge_budget(policy, desired) if policy.surges else unavailable_budget(policy, desired)
    plan: _Admission
    if budget is None:
        # No budget configured: nothing but the retry limit holds Instances back.
        plan = tuple(instance.index for instance in ready_to_move[:limit]), None, None
    else:
        pass_ = _Pass(instances, ready_to_move, desired, budget, update_revision, policy, now, limit)
        plan = _admit_by_surge(pass_) if policy.surges else _admit_by_unavailability(pass_)
    started, denial, wake = plan
    return UpdatePlan(
        start=started,
        denial=None if started else denial,
        budget_denial=denial,
        wake_at=wake if denial is not None else None,
        partition_held=held_indexes,
        waiting=tuple(instance.index for instance in ready_to_move if instance.index not in started),
        retry_attempt=retry_attempt and bool(started),
    )


def _settling(instance: InstanceFacts, revision: str, now: datetime, min_ready: float) -> bool:
    """Moved to `revision` and serving, but not yet for `minReadySeconds`."""
    return instance.running_revision == revision and instance.serving and not instance.settled(now, min_ready)


# What an admission returns: the indexes started, the hold on the rest, when to look again.
_Admission = tuple[tuple[int, ...], HoldDenial | None, datetime | None]


@dataclass(frozen=True)
class _Pass:
    """What one pass admits from: the Instances, the candidates in order, the budget."""

    instances: Sequence[InstanceFacts]
    candidates: Sequence[InstanceFacts]
    desired: int
    budget: int
    revision: str
    policy: UpdatePolicy
    now: datetime
    limit: int


def _admit_by_surge(p: _Pass) -> _Admission:
    instances, candidates, budget, revision, policy, now, limit = (
        p.instances, p.candidates, p.budget, p.revision, p.policy, p.now, p.limit,
    )
    live_indexes = {instance.index for instance in instances if not instance.deleting}
    sources = {instance.replaces for instance in instances if instance.replaces is not None}
    in_use = 0
    explanation = ""
    wake: datetime | None = None
    for instance in instances:
        slots = instance.surge_slots_held()
        if instance.replaces is not None and instance.replaces in live_indexes and not instance.deleting:
            # A replacement Instance is itself the extra capacity of its handover.
            slots = max(slots, 1)
        elif instance.index in sources:
            # A handover source: while its replacement comes up, the replacement holds the
            # pair's one slot; once it drains, its own pods hold it until they are gone (§7:
            # 8 draining pods of an 8-pod gang = 1 slot).
            slots = instance.surge.slots
            if instance.deleting and instance.has_pods:
                slots = max(slots, 1)
        if slots == 0 and _settling(instance, revision, now, policy.min_ready_seconds):
            slots = 1
            wake = _earliest(wake, instance.settles_at(policy.min_ready_seconds))
        if slots and instance.surge.explanation and not explanation:
            explanation = instance.surge.explanation
        wake = _earliest(wake, instance.surge.releases_at)
        in_use += slots
    room = max(0, budget - in_use)
    admitted = min(room, limit, len(candidates))
    started = tuple(instance.index for instance in candidates[:admitted])
    if admitted == len(candidates):
        return started, None, None
    reason = surge_budget_reason(budget, in_use + admitted + 1, explanation)
    return started, HoldDenial(HoldGate.BUDGET, reason, revision), wake


def _admit_by_unavailability(p: _Pass) -> _Admission:
    instances, candidates, desired, budget, revision, policy, now, limit = (
        p.instances, p.candidates, p.desired, p.budget, p.revision, p.policy, p.now, p.limit,
    )
    wake: datetime | None = None
    available = 0
    for instance in counted(instances):
        if instance.operation in _UNAVAILABLE_OPERATIONS:
            continue
        if instance.settled(now, policy.min_ready_seconds):
            available += 1
        elif instance.serving:
            wake = _earliest(wake, instance.settles_at(policy.min_ready_seconds))
    unavailable = max(0, desired - available)
    started: list[int] = []
    first_denied: int | None = None
    for instance in candidates:
        if len(started) >= limit:
            break
        cost = 1 if instance.settled(now, policy.min_ready_seconds) else 0
        # Moving an Instance that doesn't serve anyway costs nothing: always admit it.
        if cost == 0 or unavailable + cost <= budget:
            started.append(instance.index)
            unavailable += cost
        elif first_denied is None:
            first_denied = unavailable + cost
    if first_denied is None and len(started) == len(candidates):
        return tuple(started), None, None
    would_become = first_denied if first_denied is not None else unavailable + 1
    reason = unavailability_budget_reason(budget, would_become)
    return tuple(started), HoldDenial(HoldGate.BUDGET, reason, revision), wake
