"""Records the outcomes of the InferenceService's `pause` / `resume` signals as Events.

A signal has no answer, so a refused pause (a value that is not a pause, or one that would
downgrade a freeze) and a refused resume are told the way OME tells them: an Event on the
InferenceService, with the spec's refusal text (`planning.service.pause_signal`). The handlers only
queue the outcome in `ServiceState.pause_events` (they never await); the workflow's next pass
records them here, in the order the signals arrived.

Imported by the workflow module inside `workflow.unsafe.imports_passed_through()`.
"""

from __future__ import annotations

from models.kube_ops import ObjectRef
from workflows.events import record_event
from workflows.service.messages import ServiceState


async def record_pause_events(state: ServiceState, involved: ObjectRef) -> None:
    events, state.pause_events = state.pause_events, []
    for reason, message, kind in events:
        await record_event(involved, reason, message, kind)
