"""The local activity an Instance reports through (`activities.workflow_signals`), against the
time-skipping server: it delivers to a running workflow, answers `delivered=False` without
retrying for a workflow that is not running and for a signal the server refuses (raising for
a retry on anything else), and the
workflow side (`workflows.parent.deliver_local`) turns those answers into True/False."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import cast

import pytest
from temporalio import workflow
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import ActivityEnvironment, WorkflowEnvironment
from temporalio.worker import Worker

from activities.workflow_signals import SignalActivities
from models.signal_ops import SignalWorkflowInput
from workflows.parent import deliver_local

pytestmark = pytest.mark.workflows


with workflow.unsafe.imports_passed_through():
    from pydantic import BaseModel


class _Payload(BaseModel):
    text: str


@workflow.defn(name="SignalTarget")
class SignalTarget:
    def __init__(self) -> None:
        self.heard: list[dict[str, object]] = []

    @workflow.run
    async def run(self) -> list[dict[str, object]]:
        await workflow.wait_condition(lambda: len(self.heard) >= 1)
        return self.heard

    @workflow.signal(name="hello")
    def hello(self, payload: dict[str, object]) -> None:
        self.heard.append(payload)


@workflow.defn(name="SignalSender")
class SignalSender:
    @workflow.run
    async def run(self, target: str) -> bool:
        return await deliver_local(target, "hello", _Payload(text="from the sender"))


async def run_activity(client: Client, request: SignalWorkflowInput) -> tuple[bool, str]:
    result = await ActivityEnvironment(client=client).run(SignalActivities().signal_workflow, request)
    return result.delivered, result.reason


async def test_the_signal_activity_delivers_and_says_why_not(workflow_env: WorkflowEnvironment, task_queue: str) -> None:
    client = workflow_env.client
    async with Worker(client, task_queue=task_queue, workflows=[SignalTarget, SignalSender],
                      activities=SignalActivities().activities()):  # fmt: skip
        target = await client.start_workflow(SignalTarget.run, id=f"target-{task_queue}", task_queue=task_queue)

        missing = await run_activity(client, SignalWorkflowInput(workflow_id="no-such-workflow", signal="hello", payload={}))
        assert missing == (False, "no running workflow no-such-workflow")

        sent = await client.execute_workflow(
            SignalSender.run, target.id, id=f"sender-{task_queue}", task_queue=task_queue,
            execution_timeout=timedelta(minutes=1),
        )  # fmt: skip
        assert sent is True
        assert await asyncio.wait_for(target.result(), 30) == [{"text": "from the sender"}]

        # The target has ended: the next report is answered False, and the sender goes on.
        again = await client.execute_workflow(
            SignalSender.run, target.id, id=f"sender-2-{task_queue}", task_queue=task_queue,
            execution_timeout=timedelta(minutes=1),
        )  # fmt: skip
        assert again is False


class _Refusing:
    """A client whose every signal the server refuses with `status` (the time-skipping server
    refuses none of the signals a test can send; the real one refuses, say, an oversized one)."""

    def __init__(self, status: RPCStatusCode) -> None:
        self.status = status
        self.calls = 0

    def get_workflow_handle(self, workflow_id: str) -> _Refusing:
        return self

    async def signal(self, signal: str, payload: object) -> None:
        self.calls += 1
        raise RPCError("payload too large", self.status, b"")


@pytest.mark.parametrize("status", [RPCStatusCode.INVALID_ARGUMENT, RPCStatusCode.PERMISSION_DENIED])
async def test_a_refused_signal_is_answered_not_delivered(status: RPCStatusCode) -> None:
    refusing = _Refusing(status)
    request = SignalWorkflowInput(workflow_id="w", signal="hello", payload={})
    delivered, reason = await run_activity(cast(Client, refusing), request)
    assert (delivered, refusing.calls) == (False, 1)
    assert reason == f"refused ({status.name}): payload too large"


async def test_an_unavailable_server_raises_for_a_retry() -> None:
    request = SignalWorkflowInput(workflow_id="w", signal="hello", payload={})
    with pytest.raises(RPCError):
        await run_activity(cast(Client, _Refusing(RPCStatusCode.UNAVAILABLE)), request)
