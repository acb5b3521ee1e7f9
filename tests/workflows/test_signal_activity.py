"""The local activity an Instance reports through (`activities.workflow_signals`), against the
time-skipping server: it delivers to a running workflow, answers `delivered=False` without
retrying for a workflow that is not running and for a signal the server refuses (raising for
a retry on anything else), and the
workflow side (`workflows.parent.deliver_local`) turns those answers into True/False. Against
the real dev server: a signal to a workflow that is closing, which the server refuses until its
continue-as-new is through, arrives within a second of the new run."""

from __future__ import annotations

import asyncio
from datetime import UTC, timedelta
from typing import cast

import pytest
from google.protobuf.any_pb2 import Any as PackedDetail
from temporalio import activity, workflow
from temporalio.api.common.v1 import GrpcStatus
from temporalio.api.enums.v1 import EventType, ResourceExhaustedCause
from temporalio.api.errordetails.v1 import ResourceExhaustedFailure
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import ActivityEnvironment, WorkflowEnvironment
from temporalio.worker import Worker

from activities.workflow_signals import BUSY_RETRY_SECONDS, SignalActivities, busy_workflow
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
    """A client whose signals the server refuses with `status` (the time-skipping server refuses
    none of the signals a test can send; the real one refuses, say, an oversized one), or with
    `error`; the first `times` of them (None: every one)."""

    def __init__(self, status: RPCStatusCode, times: int | None = None, error: RPCError | None = None) -> None:
        self.error = error or RPCError("payload too large", status, b"")
        self.times = times
        self.calls = 0

    def get_workflow_handle(self, workflow_id: str) -> _Refusing:
        return self

    async def signal(self, signal: str, payload: object) -> None:
        self.calls += 1
        if self.times is None or self.calls <= self.times:
            raise self.error


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


SLOW_STEP_SECONDS = 4.2
"""How long the closing run's last workflow task takes (a local activity holds it open): the
server refuses signals for that long, past two of the client's throttled retries (1 s, then
2 s, each +-20%) and short of its third (4 s more)."""


@activity.defn(name="slow_step")
async def slow_step() -> None:
    await asyncio.sleep(SLOW_STEP_SECONDS)


@workflow.defn(name="ClosingTarget")
class ClosingTarget:
    """Its first run, told to go, takes one slow step and continues as new; the next run keeps
    every `hello` until `done`."""

    def __init__(self) -> None:
        self.go = self.done = False
        self.heard: list[dict[str, object]] = []

    @workflow.run
    async def run(self, first: bool) -> list[dict[str, object]]:
        if first:
            await workflow.wait_condition(lambda: self.go)
            await workflow.execute_local_activity(slow_step, start_to_close_timeout=timedelta(seconds=30))
            workflow.continue_as_new(False)
        await workflow.wait_condition(lambda: self.done)
        return self.heard

    @workflow.signal(name="go")
    def go_on(self) -> None:
        self.go = True

    @workflow.signal(name="hello")
    def hello(self, payload: dict[str, object]) -> None:
        self.heard.append(payload)

    @workflow.signal(name="done")
    def finish(self) -> None:
        self.done = True


async def _failed_tasks(handle: WorkflowHandle[ClosingTarget, list[dict[str, object]]]) -> int:
    history = await handle.fetch_history()
    return sum(1 for event in history.events if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED)


async def test_a_report_to_a_closing_workflow_arrives_soon_after_its_new_run(dev_client: Client, task_queue: str) -> None:
    """The server refuses signals to a run whose continue-as-new it already refused once (news
    came in during the task) while the retried task runs; the client's own retries of that
    refusal wait 1, 2, 4 s. The activity sends on a connection that retries nothing and tries
    again itself after at most half a second (`BUSY_RETRY_SECONDS`), so the report reaches the
    new run soon after its start, not seconds later, and once."""
    assert max(BUSY_RETRY_SECONDS) <= 0.5
    async with Worker(dev_client, task_queue=task_queue, workflows=[ClosingTarget], activities=[slow_step]):
        handle = await dev_client.start_workflow(ClosingTarget.run, True, id=f"closing-{task_queue}", task_queue=task_queue)
        await handle.signal(ClosingTarget.go_on)
        await asyncio.sleep(1.0)
        # News during the slow task: the server refuses its continue-as-new, and the next task
        # (the slow step again) is one whose signals it refuses.
        await handle.signal(ClosingTarget.hello, {"text": "early"})
        deadline = asyncio.get_running_loop().time() + 30
        while not await _failed_tasks(handle):
            assert asyncio.get_running_loop().time() < deadline, "the continue-as-new was never refused"
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)
        request = SignalWorkflowInput(workflow_id=handle.id, signal="hello", payload={"text": "report"})
        delivered, _ = await run_activity(dev_client, request)
        assert delivered
        new_run = await dev_client.get_workflow_handle(handle.id).describe()
        assert new_run.run_id != handle.first_execution_run_id, "the report came before the new run"
        # Both times as the server recorded them: the new run's start and the report's arrival
        # in it (what the client does after the send is no part of it).
        events = (await dev_client.get_workflow_handle(handle.id, run_id=new_run.run_id).fetch_history()).events
        arrived = next(
            e.event_time.ToDatetime(UTC)
            for e in events
            if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
            and e.workflow_execution_signaled_event_attributes.signal_name == "hello"
        )
        late = (arrived - events[0].event_time.ToDatetime(UTC)).total_seconds()
        assert late < 1.2, f"the report came {late:.2f} s after the new run"
        # One send at a time: nothing else arrives later.
        await asyncio.sleep(2.0)
        current = dev_client.get_workflow_handle(handle.id)
        await current.signal(ClosingTarget.finish)
        assert await current.result() == [{"text": "report"}]


def _refusal(status: RPCStatusCode, cause: ResourceExhaustedCause.ValueType | None) -> RPCError:
    grpc_status = GrpcStatus(code=status.value, message="refused")
    if cause is not None:
        detail = PackedDetail()
        detail.Pack(ResourceExhaustedFailure(cause=cause))
        grpc_status.details.append(detail)
    return RPCError("refused", status, grpc_status.SerializeToString())


@pytest.mark.parametrize(
    ("status", "cause", "busy"),
    [
        (RPCStatusCode.RESOURCE_EXHAUSTED, ResourceExhaustedCause.RESOURCE_EXHAUSTED_CAUSE_BUSY_WORKFLOW, True),
        # A rate limit is not a closing workflow: the local activity's own retries wait longer.
        (RPCStatusCode.RESOURCE_EXHAUSTED, ResourceExhaustedCause.RESOURCE_EXHAUSTED_CAUSE_RPS_LIMIT, False),
        (RPCStatusCode.RESOURCE_EXHAUSTED, None, False),
        (RPCStatusCode.UNAVAILABLE, None, False),
    ],
)
def test_only_a_busy_workflow_is_tried_again_at_once(
    status: RPCStatusCode, cause: ResourceExhaustedCause.ValueType | None, busy: bool
) -> None:
    assert busy_workflow(_refusal(status, cause)) is busy


def _busy_for(times: int) -> _Refusing:
    """A client whose first `times` signals the server refuses as busy (a closing workflow)."""
    busy = _refusal(RPCStatusCode.RESOURCE_EXHAUSTED, ResourceExhaustedCause.RESOURCE_EXHAUSTED_CAUSE_BUSY_WORKFLOW)
    return _Refusing(RPCStatusCode.RESOURCE_EXHAUSTED, times, busy)


async def test_a_sender_that_must_not_wait_is_answered_busy_within_its_bound() -> None:
    """`busy_within_seconds`: a workflow still busy after it is answered busy, not delivered, so
    the sender's workflow task is not held open (an Instance sends again shortly,
    `REPORT_BUSY_LATER`); one busy for less is delivered as before."""
    busy = _busy_for(100)
    request = SignalWorkflowInput(workflow_id="w", signal="hello", payload={}, busy_within_seconds=0.25)
    started = asyncio.get_running_loop().time()
    result = await ActivityEnvironment(client=cast(Client, busy)).run(SignalActivities().signal_workflow, request)
    took = asyncio.get_running_loop().time() - started
    assert (result.delivered, result.busy) == (False, True)
    assert result.reason == "busy: refused"
    # Tried at 0 and 0.1 s: the next try, 0.2 s later, would pass the bound.
    assert busy.calls == 2 and took < 0.5
    briefly = _busy_for(1)
    result = await ActivityEnvironment(client=cast(Client, briefly)).run(SignalActivities().signal_workflow, request)
    assert (result.delivered, result.busy, briefly.calls) == (True, False, 2)
    # Without a bound the activity tries on, as every sender but an Instance's report does.
    longer = _busy_for(4)
    unbounded = SignalWorkflowInput(workflow_id="w", signal="hello", payload={})
    result = await ActivityEnvironment(client=cast(Client, longer)).run(SignalActivities().signal_workflow, unbounded)
    assert (result.delivered, longer.calls) == (True, 5)
