"""The InferenceReplica workflow's hands on its Instances: plan and carry out starts, updates,
deletes and handovers; resend lifecycle settings; drain them all on deletion.

`act` is one pass's plan (`planning.replica.reconcile.reconcile`) and its execution, as
`Instance` child starts and signals in the order the plan lists them (`workflows.replica.children`).
Every request sent is folded into the state at once, so a second pass before the Instance
answers neither repeats it nor spends the budget twice.

Imported by the workflow module inside `workflow.unsafe.imports_passed_through()`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError

from models.instance import SIGNAL_UPDATE as INSTANCE_UPDATE
from models.instance import RetryBlock, RetryBlockState, UpdateRequest
from models.kube_ops import ListComponentPodsInput
from planning.replica import events
from planning.replica.batching import within_room
from planning.replica.handover import GangSurge, cleaning_up
from planning.replica.lifecycle import lifecycle_digest
from planning.replica.overlay import earliest
from planning.replica.reconcile import NewInstance, ReplicaActions, reconcile
from planning.replica.retry import start_retry_attempt
from planning.replica.revisions import complete_rollout, history_limit, trim_history
from planning.replica.rollback import protected
from workflows import kube_calls
from workflows.replica import view
from workflows.replica.batches import requeue_at, scale_down_wave, scale_up_wave
from workflows.replica.children import (
    RUN_LIMITS,
    RunChildren,
    StartListing,
    send_all,
    signal_instance,
    spec_for,
    start_instance,
)
from workflows.replica.deletions import tell_to_delete
from workflows.replica.handovers import finish_handovers, settle_handovers, surging_for
from workflows.replica.messages import ReplicaConfig, ReplicaState
from workflows.replica.migrations import moving_sources
from workflows.replica.object import record
from workflows.replica.pause import tell_pause

START_AGAIN = timedelta(seconds=1)
"""How soon a start that found the index's ended Instance still closing is tried again."""
LIST_BEFORE_STARTS = "replica-list-before-starts"
"""`workflow.patched` id: a pass that starts Instances lists the component's pods first (one
request), and a new Instance whose index had none skips its own list for leftovers. Runs
from before started every Instance without it, and each listed its own pods."""
LIST_BEFORE_STARTS_GIVE_UP = timedelta(seconds=10)
"""How long the starts wait for that list; past it they go out and each Instance lists."""
NAMED_IN_THE_LIST = 200
"""At most this many starting Instances are named in that list's selector, so it returns
only their pods (a pass of the default 100-pod batch names all of its starts): the list of
a batched bring-up then costs the batch, not the component's pods so far. More starts than
this (an unbatched pass) list the whole component, keeping the request line short."""


async def act(state: ReplicaState, run: RunChildren, desired: int, now: datetime) -> datetime | None:
    """Tell the pause, plan, carry the plan out; returns when the plan can change (None: no need)."""
    # The pass acts for the config it began acting on, even if a new one arrives meanwhile.
    config = state.config
    # The Instances hear of a pause change before this pass starts or updates anything.
    await tell_pause(state)
    actions, blocks = plan(state, config, desired, now)
    actions = await carry_out(state, config, run, actions, now)
    wake = earliest(actions.wake_at, now + START_AGAIN if run.start_again else None)
    names = view.names(state)
    keep_revisions(state, config, actions, names)
    await announce_held(state, config, blocks, names)
    return wake


def plan(
    state: ReplicaState, config: ReplicaConfig, desired: int, now: datetime
) -> tuple[ReplicaActions, list[RetryBlock]]:
    """What to start, update, delete and hand over now; and the retry blocks it planned with."""
    policy = view.policy(state.config)
    current = state.revisions.record(state.revisions.current)
    settle_handovers(state)
    blocks = view.retry_blocks(state)
    actions = reconcile(
        desired=desired,
        instances=view.facts(state),
        update_revision=config.revision_hash,
        current_revision=current.hash if current is not None else None,
        revision_names=view.names(state),
        policy=policy,
        retry_blocks=blocks,
        previous_hold=state.hold,
        paused=config.paused,
        now=now,
        reserved_indexes=[*state.removing, *cleaning_up(state.gang_surges)],
        update_multi_pod=view.target_spec(state, config).is_multi_pod,
        coordination=config.coordination,
        retained=state.specs,
        holds_the_rest=state.shows_requested,
        rest_held_by_run=state.shows_run_cap,
    )
    return actions, blocks


async def carry_out(
    state: ReplicaState, config: ReplicaConfig, run: RunChildren, actions: ReplicaActions, now: datetime
) -> ReplicaActions:
    """Send the plan's starts and signals in one workflow task, then keep its hold; the plan,
    waking in time for what the pod batches deferred."""
    run.start_again = False
    listing = StartListing()
    sends, wake = requests(state, config, run, actions, now, listing)
    if listing.starting and lists_before_starts():
        listing.with_pods = await pods_at(config, listing.starting)
    await send_all(sends)
    if wake is not None:
        actions = replace(actions, wake_at=earliest(actions.wake_at, wake))
    if actions.retry_attempt and any(new.index in state.gang_surges for new in actions.surge_create):
        # This pass started the attempt the kept block waited for (unless the start must
        # be tried again: then the block is still due).
        state.gang_blocks = [
            start_retry_attempt(b) if b.target_revision == actions.revision else b for b in state.gang_blocks
        ]
    state.hold = actions.hold
    return actions


def lists_before_starts() -> bool:
    """Whether this run lists the component before a pass's starts (`LIST_BEFORE_STARTS`)."""
    return workflow.patched(LIST_BEFORE_STARTS)


async def pods_at(config: ReplicaConfig, starting: list[int]) -> frozenset[int] | None:
    """Which of the `starting` indexes have pods now, from one list (of their pods, or of the
    component's when they are too many to name); None when the list failed (the new
    Instances then look for leftovers themselves)."""
    name = f"{config.isvc}-{config.component}"
    named = tuple(starting) if len(starting) <= NAMED_IN_THE_LIST else None  # the activity sorts them
    try:
        listed = await kube_calls.list_component_pods(
            ListComponentPodsInput(namespace=config.namespace, isvc=config.isvc, component=config.component, indexes=named),
            summary=f"list the pods of {name} before starting Instance(s) {', '.join(map(str, starting[:5]))}"
            + (f" and {len(starting) - 5} more" if len(starting) > 5 else ""),
            schedule_to_close=LIST_BEFORE_STARTS_GIVE_UP,
            local=True,
        )
    except ActivityError as error:
        workflow.logger.warning("list of the pods of %s before starts failed: %s", name, error.cause or error)
        return None
    return frozenset(index for index, _ in listed.digests)


def requests(
    state: ReplicaState,
    config: ReplicaConfig,
    run: RunChildren,
    actions: ReplicaActions,
    now: datetime,
    listing: StartListing,
) -> tuple[list[Awaitable[None]], datetime | None]:
    """The plan's starts and signals in its order, each folded into the state as it is listed,
    and when to look again for starts and removals the pod batches deferred (§14). The
    starts' indexes go on `listing.starting`; each start reads `listing` as it goes out.

    Updates move to the plan's revision: the update revision, or the stable one a rollback
    returns to (with that revision's kept spec)."""
    starts = scale_up_wave(state, [(new.index, new.revision) for new in actions.create])
    removals = scale_down_wave(state, actions.delete)
    creates, surges = within_the_run(run, [new for new in actions.create if new.index in starts.admitted], actions.surge_create)
    listing.starting = [new.index for new in creates]
    listing.starting += [new.index for new in surges]
    sends: list[Awaitable[None]] = [start_instance(state, run, new.index, new.revision, listing=listing) for new in creates]
    for index in actions.update:
        state.requested_updates[index] = actions.revision
        spec = spec_for(state, index, actions.revision)
        request = UpdateRequest(spec=spec, counted_by_parent=state.shows_requested)
        sends.append(signal_instance(state.config, index, INSTANCE_UPDATE, request))
    for new in surges:
        source = new.replaces if new.replaces is not None else new.index
        state.gang_surges[new.index] = GangSurge(source=source, revision=new.revision, started_at=now)
        sends.append(start_instance(state, run, new.index, new.revision, gang_surge_of=source, listing=listing))
    sends += tell_to_delete(state, removals.admitted, "ScaleDown")
    # A migration drains its own source (`workflows.replica.migrations`).
    migrating = moving_sources(state)
    handovers = tuple(index for index in actions.handover_delete if index not in migrating)
    return sends + finish_handovers(state, handovers), requeue_at(state, now, [starts, removals])


def within_the_run(
    run: RunChildren, creates: Sequence[NewInstance], surges: Sequence[NewInstance]
) -> tuple[Sequence[NewInstance], Sequence[NewInstance]]:
    """The pass's starts (new Instances, then gang surges), cut to what this run may still
    start (`CHILDREN_PER_RUN`, from `RUN_LIMITS` on): the run then continues as new, and its
    next run plans the rest again (a surge cut here was never recorded in `gang_surges`)."""
    if len(creates) + len(surges) <= run.room() or not workflow.patched(RUN_LIMITS):
        return creates, surges
    return within_room(run.room(), creates, surges)


def keep_revisions(state: ReplicaState, config: ReplicaConfig, actions: ReplicaActions, names: dict[str, str]) -> None:
    """Complete a finished rollout (or rollback), trim the revision history, and forget specs
    no longer kept; a revision the rollout run names to return to is kept."""
    if actions.rollout_complete and not state.launched and not state.requested_updates:
        state.revisions = complete_rollout(state.revisions, names.get(actions.revision))
    limit, _ = history_limit(config.history_limit_annotation, config.cluster.revision_history_limit)
    running = {
        names.get(s.running_revision, s.running_revision) for s in state.instances.values() if s.running_revision
    }
    keep = protected(config.coordination, names)
    state.revisions = trim_history(state.revisions, running, limit, keep)
    kept = {record.hash for record in state.revisions.history}
    state.specs = {digest: spec for digest, spec in state.specs.items() if digest in kept}


async def announce_held(
    state: ReplicaState, config: ReplicaConfig, blocks: list[RetryBlock], names: dict[str, str]
) -> None:
    """Record `RetryHeld` once for a revision whose retries ran out."""
    block = blocks[0] if blocks else None
    if block is None or block.state != RetryBlockState.HELD or block.target_revision in state.announced_held:
        return
    state.announced_held.append(block.target_revision)
    named = view.named(block, names)
    await record(state, events.retry_held(config.namespace, config.ir_name, config.component, named))


async def resend_lifecycle(state: ReplicaState) -> None:
    """Send running Instances a lifecycle-only change (no new revision, no pod moves)."""
    config = state.config
    current = lifecycle_digest(spec_for(state, 0, config.revision_hash))
    if current == state.lifecycle_digest:
        return
    # The first pass only remembers it: every Instance started with these settings.
    told = state.lifecycle_digest != ""
    state.lifecycle_digest = current
    if not told:
        return
    targets = {index: status.target_revision for index, status in state.instances.items()}
    targets.update(state.launched)
    targets.update(state.requested_updates)
    sends = [
        signal_instance(
            config,
            index,
            INSTANCE_UPDATE,
            UpdateRequest(spec=spec_for(state, index, revision, gang_surge_of=surging_for(state, index))),
        )
        for index, revision in sorted(targets.items())
        if index not in state.removing
    ]
    await send_all(sends)


async def drain_all(state: ReplicaState, now: datetime) -> datetime | None:
    """Tell the Instances not yet told to drain and delete themselves, the InferenceService
    being gone: as many as `scaleDownPodBatchSize` admits beside those already going (§14),
    lowest index first; returns when to look again for the deferred ones (None: news will)."""
    leaving = [i for i in sorted(set(state.instances) | set(state.launched)) if i not in state.removing]
    wave = scale_down_wave(state, leaving)
    await send_all(tell_to_delete(state, wave.admitted, "InferenceServiceDeleted"))
    return requeue_at(state, now, [wave])
