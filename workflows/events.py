"""Events on the objects users read with `kubectl describe`, written best-effort.

An Event is a projection: losing one (the API down, RBAC missing) must not stop the
workflow that records it, so a failed write is logged and the workflow goes on. Every
workflow records its Events through `record_event`. A repeat (same object, reason and
message) bumps the Event's count; an attempt repeated (a retried activity, a workflow task run
again after its worker died) carries the same `occurrence` and is counted once.
"""

from __future__ import annotations

from typing import Literal

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from models.kube_ops import ObjectRef, RecordEventInput
    from planning.objects import OME_API_VERSION
    from workflows import kube_calls

EventType = Literal["Normal", "Warning"]
RECORDED = "_events_recorded"
"""The attribute on the workflow object that counts its run's recordings (`occurrence`)."""
MESSAGE_LIMIT = 1000
"""Longer messages are cut here; the activity caps them again at the API's own limit."""


def isvc_ref(name: str, namespace: str, uid: str | None) -> ObjectRef:
    """The InferenceService object as an Event's involved object."""
    return ObjectRef(
        api_version=OME_API_VERSION,
        kind="InferenceService",
        name=name,
        namespace=namespace,
        plural="inferenceservices",
        uid=uid,
    )


def occurrence() -> str:
    """This recording's id: the run, and how many recordings came before it in the run. The
    same when the workflow task that records it is attempted again (after a worker died, the
    new attempt replays the run to this point with a new workflow object), so the activity can
    tell a repeated attempt from a repeated Event."""
    instance = workflow.instance()
    recorded = getattr(instance, RECORDED, 0)
    setattr(instance, RECORDED, recorded + 1)
    return f"{workflow.info().run_id}/{recorded}"


async def record_event(
    involved: ObjectRef,
    reason: str,
    message: str,
    kind: EventType = "Warning",
    *,
    action: str = "",
    summary: str | None = None,
    local: bool = False,
) -> bool:
    """Record one Event on `involved`; False (and a warning in the log) when it could not be.

    `summary` is what the Temporal UI shows for the activity (default: reason and message);
    `local` records it through a local activity (`workflows.kube_calls`).
    """
    try:
        await kube_calls.record_event(
            RecordEventInput(
                involved=involved,
                reason=reason,
                message=message[:MESSAGE_LIMIT],
                type=kind,
                action=action,
                occurrence=occurrence(),
            ),
            summary=summary or f"event {reason}: {message[:160]}",
            local=local,
        )
    except ActivityError as error:
        workflow.logger.warning("event %s not recorded on %s %s: %s", reason, involved.kind, involved.name, error)
        return False
    return True
