"""Signals between workflows that outlive each other: a child's report to its parent, and
a parent's word to a child that may have closed meanwhile (a Rollout run that completed).

Reports can go through a local activity (`deliver_local`), which costs the sender one history
event instead of three and a workflow task. Neither side may fail because the other is gone, terminated or not yet started again: a
failed delivery is logged and answered False, and the caller does not mark it sent (a
report is tried again with the then-current state; a closed run is taken as closed).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pydantic import BaseModel
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from models.signal_ops import SIGNAL_WORKFLOW, SignalWorkflowInput, SignalWorkflowResult


async def deliver(workflow_id: str, signal: str, payload: Any) -> bool:
    """Signal `payload` to `workflow_id`; False (logged) when it could not be delivered."""
    try:
        await workflow.get_external_workflow_handle(workflow_id).signal(signal, payload)
    except Exception as error:  # noqa: BLE001 - whatever the other workflow's fate, this one goes on
        workflow.logger.warning("could not signal %s to %s: %s", signal, workflow_id, error)
        return False
    return True


LOCAL_SIGNAL_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=2), maximum_attempts=3)
"""A report that still fails after this (within about 18 s, the reporting workflow's task held
open meanwhile) is answered False and goes again with the next state or the retry timer."""
LOCAL_SIGNAL_TIMEOUT = timedelta(seconds=5)


async def deliver_local(workflow_id: str, signal: str, payload: BaseModel, summary: str | None = None) -> bool:
    """`deliver` through a local activity that signals with the worker's client: one marker in
    this workflow's history, no signal command and no workflow task for its answer. For
    level-triggered payloads only (a report of the whole current state): an attempt the worker
    died during is sent again when the task is retried."""
    return (await signal_local(workflow_id, signal, payload, summary)).delivered


async def signal_local(
    workflow_id: str,
    signal: str,
    payload: BaseModel,
    summary: str | None = None,
    busy_within: timedelta | None = None,
) -> SignalWorkflowResult:
    """`deliver_local`, answering how it went: with `busy_within`, a workflow still busy after it
    (closing: the server refuses its signals until a continue-as-new's retried task ends) is
    answered `busy` instead of tried on, so this workflow's task is not held open meanwhile
    and the caller sends again shortly; a failure is answered not delivered (logged)."""
    request = SignalWorkflowInput(workflow_id=workflow_id, signal=signal, payload=payload.model_dump(mode="json"))
    if busy_within is not None:
        request.busy_within_seconds = busy_within.total_seconds()
    try:
        result: SignalWorkflowResult = await workflow.execute_local_activity(
            SIGNAL_WORKFLOW,
            request,
            result_type=SignalWorkflowResult,
            start_to_close_timeout=LOCAL_SIGNAL_TIMEOUT,
            retry_policy=LOCAL_SIGNAL_RETRY,
            summary=summary or f"signal {signal} to {workflow_id}",
        )
    except ActivityError as error:
        workflow.logger.warning("could not signal %s to %s: %s", signal, workflow_id, error.cause or error)
        return SignalWorkflowResult(delivered=False, reason=str(error.cause or error))
    if not result.delivered:
        workflow.logger.warning("could not signal %s to %s: %s", signal, workflow_id, result.reason)
    return result
