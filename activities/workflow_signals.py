"""Signals to other workflows, sent with the client of the worker that runs the activity."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from typing import Any

from temporalio import activity
from temporalio.api.enums.v1 import ResourceExhaustedCause
from temporalio.api.errordetails.v1 import ResourceExhaustedFailure
from temporalio.client import Client
from temporalio.service import RetryConfig, RPCError, RPCStatusCode, ServiceClient

from models.signal_ops import SIGNAL_WORKFLOW, SignalWorkflowInput, SignalWorkflowResult

REFUSED = frozenset(
    {RPCStatusCode.INVALID_ARGUMENT, RPCStatusCode.PERMISSION_DENIED, RPCStatusCode.FAILED_PRECONDITION}
)
"""Answers a retry cannot change."""

BUSY_RETRY_SECONDS = (0.1, 0.2, 0.3, 0.5)
"""The pauses between sends to a workflow the server calls busy, the last one repeated until the
activity's own timeout. The server refuses signals to a workflow that is closing (a
continue-as-new tried again after news came in during its task: `RESOURCE_EXHAUSTED`, cause
`BUSY_WORKFLOW`) until that task ends. The client's own retries of that answer wait 1, then 2,
then 4 s (sdk-core's throttle backoff), and an Instance's report to its parent, a local
activity, holds the Instance's workflow task open meanwhile: its next step (a pod's recreation,
say) waited up to 4 s past the parent's new run. So these sends go on a connection whose calls
the client does not retry (`SignalActivities.no_retry_client`), one at a time, and this
activity tries again itself."""


class SignalActivities:
    def __init__(self) -> None:
        self._no_retry: tuple[Client, Client] | None = None
        """The worker's client, and the same client on a connection that retries nothing."""
        self._connecting = asyncio.Lock()

    def activities(self) -> list[Callable[..., Any]]:
        return [self.signal_workflow]

    async def no_retry_client(self, client: Client) -> Client:
        """`client` (its namespace, converter and interceptors, tracing included) on a connection
        of its own whose calls the client does not retry: every failure comes back at once."""
        async with self._connecting:
            if self._no_retry is None or self._no_retry[0] is not client:
                config = dataclasses.replace(client.service_client.config, retry_config=RetryConfig(max_retries=1))
                same = client.config()
                same["service_client"] = await ServiceClient.connect(config)
                self._no_retry = (client, Client(**same))
            return self._no_retry[1]

    @activity.defn(name=SIGNAL_WORKFLOW)
    async def signal_workflow(self, request: SignalWorkflowInput) -> SignalWorkflowResult:
        """Idempotent for a level-triggered payload (a report of the whole current state): a
        retried attempt sends the same state again. A workflow the server calls busy is tried
        again after `BUSY_RETRY_SECONDS`, for `busy_within_seconds` at most when the request
        says (then answered `busy`); other RPC failures raise and are retried."""
        client = activity.client()
        if isinstance(client, Client):
            client = await self.no_retry_client(client)
        handle = client.get_workflow_handle(request.workflow_id)
        pauses = iter(BUSY_RETRY_SECONDS)
        started = time.monotonic()
        while True:
            try:
                await handle.signal(request.signal, request.payload)
                return SignalWorkflowResult(delivered=True)
            except RPCError as error:
                if error.status == RPCStatusCode.NOT_FOUND:
                    return SignalWorkflowResult(delivered=False, reason=f"no running workflow {request.workflow_id}")
                if error.status in REFUSED:
                    # The same signal would be refused again (too large, not allowed): no retries.
                    return SignalWorkflowResult(
                        delivered=False, reason=f"refused ({error.status.name}): {error.message}"
                    )
                if not busy_workflow(error):
                    raise
                pause = next(pauses, BUSY_RETRY_SECONDS[-1])
                within = request.busy_within_seconds
                if within is not None and time.monotonic() - started + pause > within:
                    return SignalWorkflowResult(delivered=False, busy=True, reason=f"busy: {error.message}")
            await asyncio.sleep(pause)


def busy_workflow(error: RPCError) -> bool:
    """Whether the server refused the call because the workflow is busy (closing, say)."""
    if error.status != RPCStatusCode.RESOURCE_EXHAUSTED:
        return False
    for detail in error.grpc_status.details:
        failure = ResourceExhaustedFailure()
        if detail.Unpack(failure):
            return failure.cause == ResourceExhaustedCause.RESOURCE_EXHAUSTED_CAUSE_BUSY_WORKFLOW
    return False
