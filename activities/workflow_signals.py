"""Signals to other workflows, sent with the client of the worker that runs the activity."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio import activity
from temporalio.service import RPCError, RPCStatusCode

from models.signal_ops import SIGNAL_WORKFLOW, SignalWorkflowInput, SignalWorkflowResult

REFUSED = frozenset(
    {RPCStatusCode.INVALID_ARGUMENT, RPCStatusCode.PERMISSION_DENIED, RPCStatusCode.FAILED_PRECONDITION}
)
"""Answers a retry cannot change."""


class SignalActivities:
    def activities(self) -> list[Callable[..., Any]]:
        return [self.signal_workflow]

    @activity.defn(name=SIGNAL_WORKFLOW)
    async def signal_workflow(self, request: SignalWorkflowInput) -> SignalWorkflowResult:
        """Idempotent for a level-triggered payload (a report of the whole current state): a
        retried attempt sends the same state again. Other RPC failures raise and are retried."""
        handle = activity.client().get_workflow_handle(request.workflow_id)
        try:
            await handle.signal(request.signal, request.payload)
        except RPCError as error:
            if error.status == RPCStatusCode.NOT_FOUND:
                return SignalWorkflowResult(delivered=False, reason=f"no running workflow {request.workflow_id}")
            if error.status in REFUSED:
                # The same signal would be refused again (too large, not allowed): no retries.
                return SignalWorkflowResult(delivered=False, reason=f"refused ({error.status.name}): {error.message}")
            raise
        return SignalWorkflowResult(delivered=True)
