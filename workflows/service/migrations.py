"""The InferenceService's `migrate` signal and Update (spec reference §13; OME's
`ome.io/migration-request-v1-<uuid>` annotation).

The request is checked here (its shape, and that its component runs OMENative Instances),
then started as its own `Migration` workflow, `migration/{ns}/{isvc}-{component}-{index}/{uuid}`
(parent close policy ABANDON: it outlives this run's continue-as-new). The Update answers
with the uuid and the workflow ID, or fails with the refusal, whose message starts
`migration request`, of type `MIGRATION_REJECTED` for an invalid request (a bad field, a
component the service does not have) and `MIGRATION_CONFLICT` when the service's state
forbids it (deleting; the component not OMENative, or not planned yet); a refused signal
becomes a Warning Event `MigrationRequestRejected`.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError

from models.base import MessageModel
from models.migration import MigrationRequest, parse_request
from workflows.migration.messages import MigrationInput
from workflows.names import MIGRATION, migration_workflow_id
from workflows.service.messages import MIGRATION_CONFLICT, MIGRATION_REJECTED, ServiceState

REJECTED = MIGRATION_REJECTED


class MigrationStarted(MessageModel):
    """The `migrate` Update's answer."""

    uuid: str
    workflow_id: str
    """Follow it: `temporal workflow describe --workflow-id <this>`, or its `status` query."""


def checked(state: ServiceState, raw: Any) -> MigrationRequest:
    """The request, or the refusal as an `ApplicationError` starting `migration request`:
    `MIGRATION_REJECTED` for invalid input, `MIGRATION_CONFLICT` for the service's state."""
    try:
        request = parse_request(raw)
    except ValueError as error:
        raise ApplicationError(str(error), type=REJECTED, non_retryable=True) from None
    if state.deleting:
        raise ApplicationError(
            "migration request: the InferenceService is being deleted; its Instances are drained, not moved",
            type=MIGRATION_CONFLICT,
            non_retryable=True,
        )
    mode = state.modes.get(request.component)
    if mode != "OMENative":
        shown = mode or "not in this InferenceService"
        raise ApplicationError(
            f"migration request: component {request.component!r} is {shown}; only OMENative "
            f"components have Instances to migrate (components: "
            f"{', '.join(f'{c}={m}' for c, m in sorted(state.modes.items())) or 'none yet'})",
            # A component the service has (or before any is planned) is a state to wait out or
            # change; one it does not have is a bad field.
            type=MIGRATION_CONFLICT if mode is not None or not state.modes else REJECTED,
            non_retryable=True,
        )
    return request


async def start(state: ServiceState, namespace: str, isvc: str, request: MigrationRequest) -> MigrationStarted:
    """Start the request's `Migration` workflow (a second start of one uuid is the same one)."""
    uuid = request.uuid or str(workflow.uuid4())
    request = request.model_copy(update={"uuid": uuid})
    workflow_id = migration_workflow_id(namespace, isvc, request.component, request.instance, uuid, state.home)
    try:
        await workflow.start_child_workflow(
            MIGRATION,
            MigrationInput(namespace=namespace, isvc=isvc, isvc_uid=state.isvc_uid, request=request, home=state.home),
            id=workflow_id,
            parent_close_policy=workflow.ParentClosePolicy.ABANDON,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            static_summary=f"migrate {isvc} {request.component} instance {request.instance} off node "
            f"{request.from_node}" + (f" ({request.reason})" if request.reason else ""),
        )
    except WorkflowAlreadyStartedError:
        pass
    return MigrationStarted(uuid=uuid, workflow_id=workflow_id)
