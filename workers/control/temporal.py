"""The controller's Temporal side: the InferenceService workflow's `applied` query, the `apply`
Update with start, and the steering signals and Updates.

Failures come back as types the controller branches on:
- `Refused`: the workflow answered no (an `ApplicationError` failing the Update: `AdmissionDenied`,
  `ActionRefused`, `OutcomeUnknown`, a migration refusal); the message is the refusal text;
- `NoWorkflow`: no running workflow to take a signal or an Update;
- anything else is transient: the controller retries it with a back-off. That includes Temporal
  unreachable and `TemporalTimeout`: every call (describe, query, signal, Update, Update with
  start) is bounded by `rpc_timeout`, so a workflow that does not answer (an Update waiting on a
  stuck canary) holds one of the controller's slots for that long at most. A resent Update
  carries the same ID, so it attaches to the one still in flight instead of running twice.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from datetime import timedelta
from typing import Any, TypeVar

from temporalio.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowExecutionStatus,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from planning.controller.annotations import Request
from planning.controller.objects import identity
from planning.controller.spec import AppliedFacts, SpecRelay
from workflows.names import INFERENCE_SERVICE, isvc_workflow_id
from workflows.service.messages import QUERY_APPLIED, SIGNAL_DELETE, SIGNAL_RUNTIME_CHANGED, UPDATE_APPLY

logger = logging.getLogger("workers.controller")

__all__ = [
    "QUERY_APPLIED",
    "RPC_TIMEOUT",
    "SIGNAL_DELETE",
    "SIGNAL_RUNTIME_CHANGED",
    "UPDATE_APPLY",
    "NoWorkflow",
    "Refused",
    "TemporalSender",
    "TemporalTimeout",
    "apply_with_start",
]

RPC_TIMEOUT = timedelta(seconds=30)
"""How long one message to a workflow may take, its answer included (`TemporalSender`)."""

T = TypeVar("T")


class Refused(Exception):
    """The workflow refused the request; `str()` is its refusal text, `reasons` admission's
    reason codes when it gave them."""

    def __init__(self, message: str, error_type: str | None, reasons: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.error_type = error_type
        self.reasons = reasons


class NoWorkflow(Exception):
    """No running workflow of that ID."""


class TemporalTimeout(Exception):
    """A call to a workflow took longer than the sender's `rpc_timeout`: transient."""


def _refusal(error: WorkflowUpdateFailedError) -> Refused:
    cause = error.cause
    if isinstance(cause, ApplicationError):
        details = cause.details[0] if cause.details and isinstance(cause.details[0], list) else []
        return Refused(cause.message, cause.type, tuple(str(reason) for reason in details))
    return Refused(str(getattr(cause, "message", None) or cause or error), None)


async def apply_with_start(
    client: Client,
    task_queue: str,
    manifest: dict[str, Any],
    *,
    origin: dict[str, Any] | None = None,
    update_id: str | None = None,
    rpc_timeout: timedelta | None = None,
) -> dict[str, Any]:
    """The `apply` Update with start of `isvc/{ns}/{name}`, as the README's `temporal workflow
    execute-update-with-start` sends it (the controller adds the `origin` of the object it read);
    the workflow's `ApplyResult` as a dict, or `Refused` with admission's text and reason codes."""
    namespace, name = identity(manifest)
    start: WithStartWorkflowOperation[Any, Any] = WithStartWorkflowOperation(
        INFERENCE_SERVICE,
        {"manifest": manifest},
        id=isvc_workflow_id(namespace, name),
        task_queue=task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
    )
    args: list[Any] = [manifest] if origin is None else [manifest, origin]
    try:
        result = await client.execute_update_with_start_workflow(
            UPDATE_APPLY,
            args=args,
            start_workflow_operation=start,
            id=update_id,
            result_type=dict,
            rpc_timeout=rpc_timeout,
        )
    except WorkflowUpdateFailedError as error:
        raise _refusal(error) from error
    return result if isinstance(result, dict) else {}


class TemporalSender:
    """Messages to InferenceService workflows through one client."""

    def __init__(self, client: Client, task_queue: str, rpc_timeout: timedelta = RPC_TIMEOUT) -> None:
        self.client = client
        self.task_queue = task_queue
        self.rpc_timeout = rpc_timeout

    async def _bounded(self, call: Awaitable[T], what: str) -> T:
        """`call` within `rpc_timeout`, the answer of an Update included (the SDK's own
        `rpc_timeout` bounds each RPC, and an Update's wait for its outcome is several)."""
        try:
            async with asyncio.timeout(self.rpc_timeout.total_seconds()):
                return await call
        except (TimeoutError, WorkflowUpdateRPCTimeoutOrCancelledError) as error:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise asyncio.CancelledError() from error  # the controller is stopping: not a timeout
            raise TemporalTimeout(f"{what}: no answer within {self.rpc_timeout.total_seconds():g}s") from error

    async def running(self, namespace: str, name: str) -> bool:
        handle = self.client.get_workflow_handle(isvc_workflow_id(namespace, name))
        try:
            described = await self._bounded(handle.describe(rpc_timeout=self.rpc_timeout), f"describe {handle.id}")
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
            view = await self._bounded(
                handle.query(QUERY_APPLIED, result_type=dict, rpc_timeout=self.rpc_timeout),
                f"query {QUERY_APPLIED} of {handle.id}",
            )
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
        return await self._bounded(
            apply_with_start(
                self.client,
                self.task_queue,
                relay.manifest,
                origin=relay.origin(),
                update_id=relay.update_id,
                rpc_timeout=self.rpc_timeout,
            ),
            f"{UPDATE_APPLY} of {workflow_id}",
        )

    async def signal(self, namespace: str, name: str, signal: str, payload: Any = None) -> None:
        handle = self.client.get_workflow_handle(isvc_workflow_id(namespace, name))
        try:
            if payload is None:
                await self._bounded(handle.signal(signal, rpc_timeout=self.rpc_timeout), f"{signal} to {handle.id}")
            else:
                await self._bounded(
                    handle.signal(signal, payload, rpc_timeout=self.rpc_timeout), f"{signal} to {handle.id}"
                )
        except RPCError as error:
            if error.status == RPCStatusCode.NOT_FOUND:
                raise NoWorkflow(handle.id) from error
            raise

    async def update(self, namespace: str, name: str, update: str, payload: Any, update_id: str) -> Any:
        handle = self.client.get_workflow_handle(isvc_workflow_id(namespace, name))
        try:
            return await self._bounded(
                handle.execute_update(update, payload, id=update_id or None, rpc_timeout=self.rpc_timeout),
                f"{update} of {handle.id}",
            )
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
