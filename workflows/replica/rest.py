"""Whether an InferenceReplica is at rest: nothing it started, asked for or was asked for is
under way. A run at rest hands over to a new one early (`history_budget.hands_over_at_rest`):
there, no stream of Instance reports fails the continue-as-new's task, and the next rollout
starts with the whole history budget instead of meeting it halfway."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from planning.replica.facts import IN_FLIGHT_PHASES
    from workflows.replica.messages import ReplicaState


def at_rest(state: ReplicaState) -> bool:
    """No Instance in an operation or in flight, none started, told to update or to go that has
    not answered, no rollout, handover, relocation or migration under way, no request waiting
    for a pass, and not deleting."""
    waiting = (
        state.launched,
        state.requested_updates,
        state.removing,
        state.gang_surges,
        state.relocations,
        state.pending_resets,
        state.pending_releases,
        state.migration_orders,
        state.migration_cancels,
    )
    if state.deleting or any(waiting) or state.revisions.rolling_out:
        return False
    if any(ticket.active for ticket in state.migrations):
        return False
    return all(s.operation is None and s.phase not in IN_FLIGHT_PHASES for s in state.instances.values())
