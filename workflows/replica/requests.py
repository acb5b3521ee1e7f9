"""The user's requests the InferenceService forwards: release a Held revision
(`release_held`), reset Instances (`reset_instances`).

The handlers only queue them (`state.pending_releases`, `state.pending_resets`); each pass
answers the queue here, before it plans, and records an Event for each answer.

Imported by the workflow modules inside `workflow.unsafe.imports_passed_through()`.
"""

from __future__ import annotations

from models.instance import SIGNAL_RELEASE_HELD as INSTANCE_RELEASE_HELD
from models.instance import SIGNAL_RESTART as INSTANCE_RESTART
from models.instance import ReleaseHeldRequest as InstanceReleaseRequest
from models.instance import RestartRequest, RetryBlock
from planning.replica import events
from planning.replica.reset import ResetRequestError, parse_reset_request, plan_reset
from planning.replica.retry import ReleaseResult, release_held
from workflows.replica import view
from workflows.replica.children import send_all, signal_instance
from workflows.replica.messages import ReplicaState
from workflows.replica.object import record


async def answer_releases(state: ReplicaState) -> None:
    """Answer every queued `release_held`, in the order they arrived."""
    requests, state.pending_releases = state.pending_releases, []
    for requested in requests:
        await answer_release(state, requested)


async def answer_release(state: ReplicaState, requested: str) -> None:
    """Release the Held block `requested` names, or say why nothing was released."""
    config = state.config
    names = view.names(state)
    # A release names the revision by its full name or its hash (or the hash's 8 hex).
    digest = next((h for h, n in names.items() if n == requested), requested)
    outcome = release_held(view.retry_blocks(state), digest)
    block = outcome.block
    shown = names.get(block.target_revision, block.target_revision) if block is not None else requested
    if outcome.result == ReleaseResult.RELEASED and block is not None:
        event = events.retry_block_released(config.namespace, config.ir_name, config.component, shown)
        await release(state, block)
    elif outcome.result == ReleaseResult.NOT_HELD and block is not None:
        named = block.model_copy(update={"target_revision": shown})
        event = events.retry_block_release_skipped_not_held(config.namespace, config.ir_name, config.component, named)
    else:
        event = events.retry_block_release_skipped_no_block(
            config.namespace, config.ir_name, config.component, requested
        )
    await record(state, event)


async def release(state: ReplicaState, block: RetryBlock) -> None:
    """Drop the kept block and tell each Instance holding the revision to release it."""
    revision = block.target_revision
    state.gang_blocks = [b for b in state.gang_blocks if b.target_revision != revision]
    await send_all(
        [
            signal_instance(
                state.config,
                status.index,
                INSTANCE_RELEASE_HELD,
                InstanceReleaseRequest(revision=status.retry_block.target_revision),
            )
            for status in state.instances.values()
            if status.retry_block is not None and status.retry_block.target_revision == revision
        ]
    )
    if revision in state.announced_held:
        state.announced_held.remove(revision)


async def answer_resets(state: ReplicaState) -> None:
    """Answer every queued `reset_instances`: restart the Instances it names, or say why not."""
    config = state.config
    requests, state.pending_resets = state.pending_resets, []
    for value in requests:
        try:
            request = parse_reset_request(value)
        except ResetRequestError as error:
            await record(state, events.reset_rejected(config.namespace, config.ir_name, config.component, error))
            continue
        outcome = plan_reset(request, view.facts(state))
        # A restart of a Failed Instance deletes its pods and clears its operation.
        restart = RestartRequest(reason="InstancesReset")
        await send_all([signal_instance(config, index, INSTANCE_RESTART, restart) for index in outcome.reset])
        for event in events.reset_events(config.namespace, config.ir_name, config.component, outcome):
            await record(state, event)
