"""The controller's Temporal side: the InferenceService workflow's `applied` query, the `apply`
Update with start, and the steering signals and Updates.

Failures come back as types the controller branches on:
- `Refused`: the workflow answered no (an `ApplicationError` failing the Update: `AdmissionDenied`,
  `ActionRefused`, `OutcomeUnknown`, a migration refusal); the message is the refusal text;
- `NoWorkflow`: no running workflow to take a signal or an Update;
- anything else (Temporal unreachable, an RPC timeout) is transient: the controller retries it.
"""

from __future__ import annotations

import logging
from typing import Any

from temporalio.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowExecutionStatus,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
)
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from planning.controller.annotations import Request
from planning.controller.spec import AppliedFacts, SpecRelay
from workflows.names import INFERENCE_SERVICE, isvc_workflow_id
from workflows.service import messages

logger = logging.getLogger("workers.controller")

UPDATE_APPLY: str = messages.UPDATE_APPLY
SIGNAL_DELETE: str = messages.SIGNAL_DELETE
# Added by issue 15 to workflows/service/messages.py; the contract's names until they land.
QUERY_APPLIED: str = getattr(messages, "QUERY_APPLIED", "applied")
SIGNAL_RUNTIME_CHANGED: str = getattr(messages, "SIGNAL_RUNTIME_CHANGED", "runtime_changed")


class Refused(Exception):
    """The workflow refused the request; `str()` is its refusal text."""

    def __init__(self, message: str, error_type: str | None) -> None:
        super().__init__(message)
        self.message = message
        self.error_type = error_type


class NoWorkflow(Exception):
    """No running workflow of that ID."""


def _refusal(error: WorkflowUpdateFailedError) -> Refused:
    cause = error.cause
    if isinstance(cause, ApplicationError):
        return Refused(cause.message, cause.type)
    return Refused(str(getattr(cause, "message", None) or cause or error), None)


class TemporalSender:
    """Messages to InferenceService workflows through one client."""

    def __init__(self, client: Client, task_queue: str) -> None:
        self.client = client
        self.task_queue = task_queue

    async def running(self, namespace: str, name: str) -> bool:
        try:
            described = await self.client.get_workflow_handle(isvc_workflow_id(namespace, name)).describe()
        except RPCError as error:
            if error.status == RPCStatusCode.NOT_FOUND:
                return False
            raise
        return described.status == WorkflowExecutionStatus.RUNNING

    async def applied(self, namespace: str, name: str) -> AppliedFacts | None:
        """What the running workflow holds; None when none runs or it cannot say (a workflow
        without the `applied` query: the workflow then dedups the apply by its digest)."""
        if not await self.running(namespace, name):
            return None
        handle = self.client.get_workflow_handle(isvc_workflow_id(namespace, name))
        try:
            view = await handle.query(QUERY_APPLIED, result_type=dict)
        except WorkflowQueryFailedError as error:
            logger.warning("query %s of %s failed: %s", QUERY_APPLIED, handle.id, str(error)[:300])
            return None
        except RPCError as error:
            if error.status == RPCStatusCode.NOT_FOUND:
                return None
            raise
        return AppliedFacts.from_view(view)

    async def apply(self, relay: SpecRelay) -> dict[str, Any]:
        """The `apply` Update with start; the workflow's `ApplyResult` as a dict."""
        workflow_id = isvc_workflow_id(relay.namespace, relay.name)
        start: WithStartWorkflowOperation[Any, Any] = WithStartWorkflowOperation(
            INFERENCE_SERVICE,
            {"manifest": relay.manifest},
            id=workflow_id,
            task_queue=self.task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        )
        try:
            result = await self.client.execute_update_with_start_workflow(
                UPDATE_APPLY,
                args=[relay.manifest, relay.origin()],
                start_workflow_operation=start,
                id=relay.update_id,
                result_type=dict,
            )
        except WorkflowUpdateFailedError as error:
            raise _refusal(error) from error
        return result if isinstance(result, dict) else {}

    async def signal(self, namespace: str, name: str, signal: str, payload: Any = None) -> None:
        handle = self.client.get_workflow_handle(isvc_workflow_id(namespace, name))
        try:
            if payload is None:
                await handle.signal(signal)
            else:
                await handle.signal(signal, payload)
        except RPCError as error:
            if error.status == RPCStatusCode.NOT_FOUND:
                raise NoWorkflow(handle.id) from error
            raise

    async def update(self, namespace: str, name: str, update: str, payload: Any, update_id: str) -> Any:
        handle = self.client.get_workflow_handle(isvc_workflow_id(namespace, name))
        try:
            return await handle.execute_update(update, payload, id=update_id or None)
        except WorkflowUpdateFailedError as error:
            raise _refusal(error) from error
        except RPCError as error:
            if error.status == RPCStatusCode.NOT_FOUND:
                raise NoWorkflow(handle.id) from error
            raise

    async def send(self, request: Request) -> Any:
        """A steering request from an annotation (not `kind="refuse"`)."""
        namespace, name = request.target
        if request.kind == "signal":
            await self.signal(namespace, name, request.message, request.payload)
            return None
        return await self.update(namespace, name, request.message, request.payload or {}, request.update_id)
