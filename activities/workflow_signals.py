"""Signals to other workflows, sent with the client of the worker that runs the activity."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from temporalio import activity
from temporalio.service import RPCError, RPCStatusCode

from models.signal_ops import SIGNAL_WORKFLOW, SignalWorkflowInput, SignalWorkflowResult

REFUSED = frozenset(
    {RPCStatusCode.INVALID_ARGUMENT, RPCStatusCode.PERMISSION_DENIED, RPCStatusCode.FAILED_PRECONDITION}
)
"""Answers a retry cannot change."""

UNANSWERED_SEND_AGAIN_SECONDS = 1.0
"""A signal the server has not taken within this is sent again. The server refuses signals to a
workflow that is closing (a continue-as-new tried again after news came in during its task:
`RESOURCE_EXHAUSTED`, busy workflow) until its task ends, and the client's own retries of that
answer wait 1, then 2, then 4 s (sdk-core's throttle backoff). An Instance's report to its
parent, a local activity, holds the Instance's workflow task open meanwhile, so its next step
(a pod's recreation, say) waited up to 4 s past the parent's new run. A send cut off after the
server took it is delivered twice: the same report, which is level-triggered."""


class SignalActivities:
    def activities(self) -> list[Callable[..., Any]]:
        return [self.signal_workflow]

    @activity.defn(name=SIGNAL_WORKFLOW)
    async def signal_workflow(self, request: SignalWorkflowInput) -> SignalWorkflowResult:
        """Idempotent for a level-triggered payload (a report of the whole current state): a
        retried attempt, or a send not answered in time (`UNANSWERED_SEND_AGAIN_SECONDS`), sends
        the same state again. Other RPC failures raise and are retried."""
        handle = activity.client().get_workflow_handle(request.workflow_id)
        try:
            while True:
                try:
                    await asyncio.wait_for(handle.signal(request.signal, request.payload), UNANSWERED_SEND_AGAIN_SECONDS)
                    break
                except TimeoutError:
                    continue  # the activity's own timeout bounds the whole
        except RPCError as error:
            if error.status == RPCStatusCode.NOT_FOUND:
                return SignalWorkflowResult(delivered=False, reason=f"no running workflow {request.workflow_id}")
            if error.status in REFUSED:
                # The same signal would be refused again (too large, not allowed): no retries.
                return SignalWorkflowResult(delivered=False, reason=f"refused ({error.status.name}): {error.message}")
            raise
        return SignalWorkflowResult(delivered=True)
