"""The InferenceReplica tells its Instances the component's pause (spec reference §5).

The InferenceReplica itself holds new Instances and updates while paused
(`planning.replica.reconcile`); what only the Instance can hold (an in-flight SurgeThenDrain
before its old pod drains, repairs under `Freeze`, the readiness clock) it learns from a
`set_pause` signal, sent to every Instance in one workflow task whenever the pause changes.
An Instance started later learns it from its `InstanceSpec` (`pause_mode`). A rollout run's
drain hold (the pairing-protocol transition's `Pairing` gate) reaches them the same way, as
`hold_drain`: updates go on, but an in-flight SurgeThenDrain keeps its old pod serving.

Imported by the workflow module inside `workflow.unsafe.imports_passed_through()`.
"""

from __future__ import annotations

from models.instance import SIGNAL_HOLD_DRAIN, SIGNAL_SET_PAUSE, HoldDrainRequest, PauseRequest
from planning.instance.pause import instances_to_tell
from workflows.replica.children import send_all, signal_instance
from workflows.replica.messages import ReplicaState


async def tell_pause(state: ReplicaState) -> None:
    """Signal `set_pause` to every Instance when the pause changed since they were told, and
    `hold_drain` when the rollout run's drain hold changed (both in one workflow task)."""
    config = state.config
    everyone = [*state.instances, *state.launched]
    mode = config.effective_pause_mode
    paused = instances_to_tell(state.instances_told_pause, mode, everyone, state.removing)
    state.instances_told_pause = mode
    hold = config.coordination.drain_hold if config.coordination is not None else None
    held = instances_to_tell(state.instances_told_drain_hold, hold, everyone, state.removing)
    if hold is not None and not held:
        # The hold is unchanged: tell those started since it began.
        leaving = set(state.removing)
        held = sorted(i for i in set(everyone) - set(state.drain_hold_told) if i not in leaving)
    state.instances_told_drain_hold = hold
    state.drain_hold_told = sorted(set(state.drain_hold_told) | set(held)) if hold is not None else []
    await send_all(
        [signal_instance(config, index, SIGNAL_SET_PAUSE, PauseRequest(mode=mode)) for index in paused]
        + [signal_instance(config, index, SIGNAL_HOLD_DRAIN, HoldDrainRequest(reason=hold)) for index in held]
    )
