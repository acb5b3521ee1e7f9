"""Automatic relocation as the InferenceReplica workflow carries it out
(`planning.replica.relocation`, spec reference §13).

Each pass decides from the Instances' reports; a relocation keeps the Instance's index and
sends it, in one workflow task, its spec kept off every node it left (`children.spec_for`
reads `ReplicaState.relocations`) and, when it rests Failed, a restart so it is rebuilt now.
The `Relocated` rows join `status.migrations` (kept for the retention window like ended
migrations) and the Events are recorded on the InferenceService.

Imported by the workflow modules inside `workflow.unsafe.imports_passed_through()`.
"""

from __future__ import annotations

from collections.abc import Awaitable
from datetime import datetime

from temporalio import workflow

from models.instance import SIGNAL_RESTART as INSTANCE_RESTART
from models.instance import SIGNAL_UPDATE as INSTANCE_UPDATE
from models.instance import RestartRequest, UpdateRequest
from planning.replica.handover import cleaning_up
from planning.replica.relocation import RELOCATE_REASON, RelocationContext, plan_relocations
from workflows.replica import view
from workflows.replica.children import send_all, signal_instance, spec_for
from workflows.replica.messages import ReplicaState
from workflows.replica.object import record

AUTO_RELOCATION_PATCH = "auto-relocation"
"""`workflow.patched` id: histories from before relocation existed never relocated."""
RELOCATION_UPDATE_FIRST = "relocation-update-first"
"""`workflow.patched` id: a relocation's restarts are sent once its updates (the spec kept off
the node) have reached the Instances; histories from before sent both in one task, and the
server may deliver the restart first (found by the relocation tests)."""


def context(state: ReplicaState, now: datetime) -> RelocationContext:
    config = state.config
    lifecycle = config.effective.lifecycle
    mode = lifecycle.migration_policy.mode if lifecycle and lifecycle.migration_policy else None
    surges = {ticket.surge_instance for ticket in state.migrations if ticket.moving}
    return RelocationContext(
        component=config.component,
        now=now,
        max_attempts=config.cluster.auto_migrate_max_attempts,
        mode=mode or "Auto",
        frozen=config.effective_pause_mode == "Freeze",
        excluded={
            *state.removing,
            *state.gang_surges,
            *cleaning_up(state.gang_surges),
            *(index for index in surges if index is not None),
        },
    )


async def relocate(state: ReplicaState, now: datetime) -> None:
    """One pass: relocate the Instances that may be, warn of the ones out of attempts."""
    plan = plan_relocations(view.reports(state), state.relocations, context(state, now))
    if plan.acts and not workflow.patched(AUTO_RELOCATION_PATCH):
        return
    state.relocations = plan.relocations
    state.migrations = [*state.migrations, *plan.tickets]
    updates: list[tuple[int, UpdateRequest]] = []
    restarts: list[tuple[int, RestartRequest]] = []
    for move in plan.moves:
        updates.append((move.index, UpdateRequest(spec=spec_for(state, move.index, move.revision))))
        if move.restart:
            restarts.append((move.index, RestartRequest(reason=RELOCATE_REASON)))

    def update(index: int, request: UpdateRequest) -> Awaitable[None]:
        return signal_instance(state.config, index, INSTANCE_UPDATE, request)

    def restart(index: int, request: RestartRequest) -> Awaitable[None]:
        return signal_instance(state.config, index, INSTANCE_RESTART, request)

    if restarts and workflow.patched(RELOCATION_UPDATE_FIRST):
        # Two signals sent in one task can reach the Instance in either order; a restart that
        # overtakes its update rebuilds on the node the relocation leaves.
        await send_all([update(*sent) for sent in updates])
        await send_all([restart(*sent) for sent in restarts])
    else:
        # As histories from before the patch sent them: each update, then its restart.
        restarting = dict(restarts)
        sends: list[Awaitable[None]] = []
        for index, request in updates:
            sends.append(update(index, request))
            if index in restarting:
                sends.append(restart(index, restarting[index]))
        await send_all(sends)
    for event in plan.events:
        await record(state, event)
