"""A SurgeThenDrain update as the parent and a reader of `status` see it: the new pod serves
before the old one drains, so no report and no status of the update shows the Instance serving
nothing (the old path counted only the draining pod then, and the InferenceService's Ready
turned False for the length of the drain)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from bench.lifecycle_stack import poll_until
from kubesim.handle import KubeSim
from models.instance import DeleteRequest, InstancePhase, PauseRequest, UpdateRequest
from tests.workflows.instance_kube_harness import kube_harness, pod_spec
from tests.workflows.instance_parent import FakeParent

pytestmark = [pytest.mark.workflows, pytest.mark.kubesim]
P = InstancePhase


async def timers_after(handle: Any, signal: str) -> list[timedelta]:
    """What each timer the workflow started after its first `signal` was set for, in order."""
    found: list[timedelta] = []
    seen = False
    async for event in handle.fetch_history_events():
        if event.HasField("workflow_execution_signaled_event_attributes"):
            seen = seen or event.workflow_execution_signaled_event_attributes.signal_name == signal
        elif seen and event.HasField("timer_started_event_attributes"):
            found.append(event.timer_started_event_attributes.start_to_fire_timeout.ToTimedelta())
    return found


async def test_surge_counts_the_new_pod_serving_while_the_old_drains(
    workflow_env: WorkflowEnvironment, kubesim: KubeSim, task_queue: str
) -> None:
    async with kube_harness(workflow_env, kubesim, task_queue, extra_workflows=[FakeParent]) as harness:
        parent = await workflow_env.client.start_workflow(
            "FakeParent", id=f"irep/{harness.namespace}/chat-engine", task_queue=task_queue
        )
        handle = await harness.start(harness.spec(parent_workflow_id=parent.id))
        await harness.until_real(handle, lambda s: s.phase == P.READY and s.serving)
        samples: list[tuple[str, int]] = []
        done = asyncio.Event()

        async def sample() -> None:
            while not done.is_set():
                status = await harness.status(handle)
                samples.append((status.operation.step if status.operation else "", status.serving_pods))
                await asyncio.sleep(0.02)

        sampler = asyncio.create_task(sample())
        await handle.signal(
            "update", UpdateRequest(spec=harness.spec("engine:2", parent_workflow_id=parent.id))
        )
        status = await harness.until_skipping(
            handle, lambda s: s.running_revision == "rev-engine-2" and s.phase == P.READY, step=1, within=60
        )
        done.set()
        await sampler
        assert status.serving_pods == 1 and sorted(harness.live_pods()) == ["chat-engine-1-default-1"]
        assert any(step in ("SurgeDrain", "Drain", "DeletePods") for step, _ in samples), samples
        assert min(serving for _, serving in samples) >= 1, f"status served nothing: {samples}"

        await handle.signal("delete", DeleteRequest())
        await parent.result()
        reports = await parent.query("serving_reports", result_type=list[tuple[str, int, str]])
        first_ready = next(i for i, (phase, _, _) in enumerate(reports) if phase == "Ready")
        during_update = [r for r in reports[first_ready:] if r[0] != "Deleting"]
        assert [r for r in during_update if r[1] < 1] == [], f"reported serving nothing: {reports}"
        # Asked without `counted_by_parent`, the update's steps are reported as they happen.
        assert "Updating" in [phase for phase, _, _ in during_update], reports


async def test_an_update_the_parent_counts_from_its_request_is_reported_once_when_it_ends(
    workflow_env: WorkflowEnvironment, kubesim: KubeSim, task_queue: str
) -> None:
    """`UpdateRequest.counted_by_parent`: the parent counts the Instance as updating from its
    request, so the reports of the update's start and of its surge pod serving are not sent;
    the Instance's own status still shows every step."""
    async with kube_harness(workflow_env, kubesim, task_queue, extra_workflows=[FakeParent]) as harness:
        parent = await workflow_env.client.start_workflow(
            "FakeParent", id=f"irep/{harness.namespace}/chat-engine", task_queue=task_queue
        )
        handle = await harness.start(harness.spec(parent_workflow_id=parent.id))
        await harness.until_real(handle, lambda s: s.phase == P.READY and s.serving)
        update = UpdateRequest(spec=harness.spec("engine:2", parent_workflow_id=parent.id), counted_by_parent=True)
        await handle.signal("update", update)
        await harness.until_real(handle, lambda s: s.phase == P.UPDATING)
        await harness.until_skipping(
            handle, lambda s: s.running_revision == "rev-engine-2" and s.phase == P.READY, step=1, within=60
        )
        await handle.signal("delete", DeleteRequest())
        await parent.result()
        reports = await parent.query("serving_reports", result_type=list[tuple[str, int, str]])
        phases = [phase for phase, _, _ in reports if phase != "Deleting"]
        assert "Updating" not in phases, reports
        assert phases[-2:] == ["Ready", "Ready"], reports  # on the old revision, then on the new


async def test_a_counted_update_that_waits_on_a_node_reports_the_wait(
    workflow_env: WorkflowEnvironment, kubesim: KubeSim, task_queue: str
) -> None:
    """A surge pod that fits no node: the update waits (`Unschedulable`), and the parent hears
    it (`instance-counted-waits-reported`), though it counts the update from its request and
    the pods ready and serving are the same as before."""
    async with kube_harness(workflow_env, kubesim, task_queue, extra_workflows=[FakeParent]) as harness:
        parent = await workflow_env.client.start_workflow(
            "FakeParent", id=f"irep/{harness.namespace}/chat-engine", task_queue=task_queue
        )
        handle = await harness.start(harness.spec(parent_workflow_id=parent.id))
        await harness.until_real(handle, lambda s: s.phase == P.READY and s.serving)
        nowhere = {**pod_spec("engine:2"), "nodeSelector": {"example.com/no-such-pool": "true"}}
        spec = harness.spec("engine:2", parent_workflow_id=parent.id, leader_pod_spec=nowhere)
        await handle.signal("update", UpdateRequest(spec=spec, counted_by_parent=True))
        waiting = await harness.until_real(
            handle, lambda s: s.operation is not None and s.operation.waiting == "Unschedulable"
        )
        assert waiting.phase == P.UPDATING and waiting.serving, waiting
        async def heard_the_wait() -> bool:
            return ("Updating", "Unschedulable") in await parent.query("waits", result_type=list[tuple[str, str]])

        await poll_until("the parent's report of the wait", heard_the_wait, within=10, every=0.1)
        reports = await parent.query("waits", result_type=list[tuple[str, str]])
        assert ("Updating", "Unschedulable") in reports, reports
        # Only the wait is news: no report of the update's start before it.
        assert {r for r in reports if r[0] == "Updating"} == {("Updating", "Unschedulable")}, reports
        await handle.signal("delete", DeleteRequest())
        await parent.result()


async def test_a_counted_update_held_by_the_pause_takes_the_instance_off_the_parents_net(
    workflow_env: WorkflowEnvironment, kubesim: KubeSim, task_queue: str
) -> None:
    """The parent shows an Instance it told to update `Updating` from its request and leaves it
    out of its re-list. While a pause holds that update, the Instance re-lists its pods on its
    own safety timer, not on the 6-hour backstop of an Instance under the parent's net
    (`instance-held-update-off-net`)."""
    async with kube_harness(workflow_env, kubesim, task_queue, extra_workflows=[FakeParent]) as harness:
        parent = await workflow_env.client.start_workflow(
            "FakeParent", id=f"irep/{harness.namespace}/chat-engine", task_queue=task_queue
        )
        spec = harness.spec(parent_workflow_id=parent.id, relisted_by_parent=True)
        handle = await harness.start(spec)
        await harness.until_real(handle, lambda s: s.phase == P.READY and s.serving)
        await handle.signal("set_pause", PauseRequest(mode="Recover"))
        await harness.until_real(handle, lambda s: s.pause_mode == "Recover")
        new = harness.spec("engine:2", parent_workflow_id=parent.id, relisted_by_parent=True)
        await handle.signal("update", UpdateRequest(spec=new, counted_by_parent=True))
        # A deeper pause: still no update starts, and the loop looks at its net again.
        await handle.signal("set_pause", PauseRequest(mode="Freeze"))
        await harness.until_real(handle, lambda s: s.pause_mode == "Freeze")
        safety = timedelta(seconds=spec.safety_recheck_seconds)
        async def safety_timer_set() -> bool:
            return safety in await timers_after(handle, "update")

        await poll_until("the safety timer after the held update", safety_timer_set, within=10, every=0.1)
        assert safety in await timers_after(handle, "update")
        status = await harness.status(handle)
        assert (status.phase, status.operation, status.running_revision) == (P.READY, None, "rev-engine-1"), status
        await handle.signal("delete", DeleteRequest())
        await parent.result()
