"""The InferenceReplica tells its Instances the component's pause (spec reference §5).

The InferenceReplica itself holds new Instances and updates while paused
(`planning.replica.reconcile`); what only the Instance can hold (an in-flight SurgeThenDrain
before its old pod drains, repairs under `Freeze`, the readiness clock) it learns from a
`set_pause` signal, sent to every Instance in one workflow task whenever the pause changes.
An Instance started later learns it from its `InstanceSpec` (`pause_mode`).

`ReplicaPause` sits between `workflows.replica.projection.ReplicaProjection` and
`workflows.replica.instances.ReplicaInstances`. Imported by the workflow module inside
`workflow.unsafe.imports_passed_through()`.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow

from models.instance import SIGNAL_SET_PAUSE, PauseRequest
from planning.instance.pause import instances_to_tell
from workflows.names import instance_workflow_id
from workflows.replica.projection import ReplicaProjection


class ReplicaPause(ReplicaProjection):
    async def tell_pause(self) -> None:
        """Signal `set_pause` to every Instance when the pause changed since they were told."""
        state, config = self.state, self.state.config
        mode = config.effective_pause_mode
        indexes = instances_to_tell(
            state.instances_told_pause, mode, [*state.instances, *state.launched], state.removing
        )
        state.instances_told_pause = mode
        request = PauseRequest(mode=mode)
        await self.send_all([self.signal_instance(index, SIGNAL_SET_PAUSE, request) for index in indexes])

    async def signal_instance(self, index: int, name: str, payload: Any) -> None:
        """Signal Instance `index`; one that already ended needs nothing, so a failure is logged."""
        config = self.state.config
        workflow_id = instance_workflow_id(config.namespace, config.isvc, config.component, index)
        try:
            await workflow.get_external_workflow_handle(workflow_id).signal(name, payload)
        except Exception as error:  # noqa: BLE001 - an Instance that already ended needs nothing
            workflow.logger.warning("signal %s to %s failed: %s", name, workflow_id, error)
