"""The InferenceReplica tells its Instances the component's pause (spec reference §5).

The InferenceReplica itself holds new Instances and updates while paused
(`planning.replica.reconcile`); what only the Instance can hold (an in-flight SurgeThenDrain
before its old pod drains, repairs under `Freeze`, the readiness clock) it learns from a
`set_pause` signal, sent to every Instance in one workflow task whenever the pause changes.
An Instance started later learns it from its `InstanceSpec` (`pause_mode`).

Imported by the workflow module inside `workflow.unsafe.imports_passed_through()`.
"""

from __future__ import annotations

from models.instance import SIGNAL_SET_PAUSE, PauseRequest
from planning.instance.pause import instances_to_tell
from workflows.replica.children import send_all, signal_instance
from workflows.replica.messages import ReplicaState


async def tell_pause(state: ReplicaState) -> None:
    """Signal `set_pause` to every Instance when the pause changed since they were told."""
    config = state.config
    mode = config.effective_pause_mode
    indexes = instances_to_tell(state.instances_told_pause, mode, [*state.instances, *state.launched], state.removing)
    state.instances_told_pause = mode
    request = PauseRequest(mode=mode)
    await send_all([signal_instance(config, index, SIGNAL_SET_PAUSE, request) for index in indexes])
