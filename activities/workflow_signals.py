"""Signals to other workflows, sent with the client of the worker that runs the activity."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio import activity
from temporalio.service import RPCError, RPCStatusCode

from models.signal_ops import SIGNAL_WORKFLOW, SignalWorkflowInput, SignalWorkflowResult


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
            raise
        return SignalWorkflowResult(delivered=True)
