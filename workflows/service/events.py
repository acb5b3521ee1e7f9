"""Records the outcomes of the InferenceService's `pause` / `resume` signals as Events.

A signal has no answer, so a refused pause (a value that is not a pause, or one that would
downgrade a freeze) and a refused resume are told the way OME tells them: an Event on the
InferenceService, with the spec's refusal text (`planning.service.pause_signal`). The handlers only
queue the outcome in `ServiceState.pause_events` (they never await); the workflow's next pass
records them here, in the order the signals arrived.

Imported by the workflow module inside `workflow.unsafe.imports_passed_through()`.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError

from models.kube_ops import ObjectRef, RecordEventInput
from workflows import kube_calls
from workflows.service.messages import ServiceState


async def record_pause_events(state: ServiceState, involved: ObjectRef) -> None:
    events, state.pause_events = state.pause_events, []
    for reason, message, kind in events:
        try:
            await kube_calls.record_event(
                RecordEventInput(
                    involved=involved,
                    reason=reason,
                    message=message[:1000],
                    type=kind,
                ),
                summary=f"event {reason}: {message[:160]}",
            )
        except ActivityError as error:  # an Event is a projection: losing one must not stop the service
            workflow.logger.warning("event %s not recorded: %s", reason, error)
