"""Issue 17's idle cost on the time-skipping server, with the real activities against kubesim:

- a lost pod change of a resting Ready Instance (the watcher was down when its pod died) is
  caught by the InferenceReplica's component re-list (`workflows.replica.recheck`) and the
  Instance is recreated, although the Instance itself waits only on its six-hour backstop;
- the re-list runs on time in a component whose Instances report every few minutes;
- an Instance whose report did not reach its parent keeps its short timer (and retries);
- an idle 20-Instance service spends at most one Temporal action per Instance per hour
  (`bench.idle_cost` counts them as the bench does).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from temporalio import activity
from temporalio.client import WorkflowExecutionStatus
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from activities.kube import KubeActivities
from bench.idle_cost import measure_idle_actions, workflow_ids
from bench.lifecycle_stack import instant_kubesim, topology_for
from kubesim.handle import KubeSim
from models.instance import PARENT_SIGNAL_INSTANCE_CHANGED, InstancePhase
from models.kube_ops import KUBE_LIST_COMPONENT_PODS, ComponentPods, ListComponentPodsInput
from planning.instance.resting import PARENT_NET_BACKSTOP
from planning.replica.recheck import RECHECK_INTERVAL
from tests.workflows import service_harness
from tests.workflows.service_harness import (
    NAME,
    NAMESPACE,
    PodRelay,
    Story,
    end_the_service,
    engine_ready,
    eventually,
    isvc_manifest,
    story,
)

pytestmark = pytest.mark.workflows

POD = f"{NAME}-engine-0-default-0"


def workflow_id(kind: str) -> str:
    return next(wid for wid, owner in workflow_ids(1, NAMESPACE, NAME).items() if owner == kind)


async def scheduled_activities(s: Story, kind: str) -> list[str]:
    """The activity types the workflow of `kind` (its current run) scheduled, in order."""
    names = []
    async for event in s.client.get_workflow_handle(workflow_id(kind)).fetch_history_events():
        if event.HasField("activity_task_scheduled_event_attributes"):
            names.append(event.activity_task_scheduled_event_attributes.activity_type.name)
    return names


async def last_timer(s: Story) -> timedelta | None:
    """How long the Instance's latest timer was set for (None: it never set one)."""
    found = None
    async for event in s.client.get_workflow_handle(workflow_id("Instance")).fetch_history_events():
        if event.HasField("timer_started_event_attributes"):
            found = event.timer_started_event_attributes.start_to_fire_timeout.ToTimedelta()
    return found


@contextlib.asynccontextmanager
async def ready_service(
    workflow_env: WorkflowEnvironment, task_queue: str, kubesim: KubeSim, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Story]:
    """The example service with its two engine Instances Ready, on the time-skipping server."""
    monkeypatch.setattr(service_harness, "terminate_leftovers", end_the_service)
    async with story(workflow_env.client, task_queue, kubesim) as s:
        await s.apply(isvc_manifest())
        await eventually(lambda: engine_ready(s), "two Ready engine Instances")
        yield s


async def test_a_pod_lost_while_the_watcher_was_down_is_caught_by_the_replica_relist(
    workflow_env: WorkflowEnvironment, task_queue: str, kubesim: KubeSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with ready_service(workflow_env, task_queue, kubesim, monkeypatch) as s:
        ready = await s.instance()
        assert ready.phase == InstancePhase.READY and ready.operation is None
        old_uid = s.live_uid(POD)

        # The watcher goes down; the pod dies meanwhile: no signal will ever tell the Instance.
        assert s.relay is not None
        await s.relay.stop()
        s.core.delete_namespaced_pod(POD, NAMESPACE, grace_period_seconds=0)
        await eventually(lambda: s.live_uid(POD) is None, "the pod gone from kubesim")
        # Nobody told it, and a resting Ready Instance under the net has no re-list of its own.
        assert (await s.instance()).incarnation == ready.incarnation

        # Past the InferenceReplica's re-list: its report disagrees with the listing, it hears
        # a fresh summary, confirms the loss and recreates its pod.
        await workflow_env.sleep(RECHECK_INTERVAL + timedelta(seconds=30))

        async def recreating() -> bool:
            status = await s.instance()
            return status.incarnation > ready.incarnation or s.live_uid(POD) not in (None, old_uid)

        await eventually(recreating, "the Instance to recreate the pod the re-list found gone")
        # The watcher is back: the new pod's readiness reaches the Instance as usual.
        s.relay = PodRelay(workflow_env.client, kubesim)
        s.relay.start()

        async def serving_again() -> bool:
            status = await s.instance()
            return status.phase == InstancePhase.READY and status.serving and s.live_uid(POD) not in (None, old_uid)

        try:
            await eventually(serving_again, "the Instance serving again on a new pod")
        finally:
            await s.relay.stop()  # the story stops only the relay it started
        # The InferenceReplica's net did it, not a timer of the Instance's own.
        assert "kube.list_component_pods" in await scheduled_activities(s, "InferenceReplica")


async def test_the_relist_runs_on_time_although_instances_report_every_few_minutes(
    workflow_env: WorkflowEnvironment, task_queue: str, kubesim: KubeSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with ready_service(workflow_env, task_queue, kubesim, monkeypatch) as s:
        replica = s.client.get_workflow_handle(workflow_id("InferenceReplica"))
        # A crash-looping Instance reports every five minutes: each report wakes the
        # InferenceReplica, which must not put its twenty-minute re-list off.
        for _ in range(5):
            await replica.signal(PARENT_SIGNAL_INSTANCE_CHANGED, await s.instance())
            await workflow_env.sleep(timedelta(minutes=5))

        async def relisted() -> bool:
            return "kube.list_component_pods" in await scheduled_activities(s, "InferenceReplica")

        await eventually(relisted, "the component re-list within 25 minutes of busy reports")


async def test_a_resting_instance_keeps_a_backstop_and_a_failed_report_keeps_the_short_timer(
    workflow_env: WorkflowEnvironment, task_queue: str, kubesim: KubeSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with ready_service(workflow_env, task_queue, kubesim, monkeypatch) as s:

        async def backstop() -> bool:
            return await last_timer(s) == PARENT_NET_BACKSTOP

        # Under the net, but not without a timer: a stuck or gone parent still leaves a re-list.
        await eventually(backstop, "the resting Instance's six-hour backstop")

        # The parent is gone; the pod dies and the watcher tells the Instance, which recreates
        # it and reports, in vain: resting again, it keeps its short timer so the report is retried.
        await s.client.get_workflow_handle(workflow_id("InferenceReplica")).terminate("parent gone")
        old_uid = s.live_uid(POD)
        s.core.delete_namespaced_pod(POD, NAMESPACE, grace_period_seconds=0)

        async def resting_again() -> bool:
            status = await s.instance()
            renewed = s.live_uid(POD) not in (None, old_uid)
            return renewed and status.phase == InstancePhase.READY and status.operation is None

        await eventually(resting_again, "the Instance Ready again on a new pod")

        async def short_timer() -> bool:
            return await last_timer(s) == timedelta(minutes=5)

        await eventually(short_timer, "the short safety timer while the parent lacks its report")


async def test_an_idle_20_instance_service_spends_at_most_one_action_per_instance_hour(
    workflow_env: WorkflowEnvironment,
) -> None:
    sim = instant_kubesim(topology_for(20))
    try:
        cost = await measure_idle_actions(workflow_env, sim, 20, within=120.0)
    finally:
        sim.stop()
    assert cost.per_instance_hour <= 1.0, cost.line()
    # The Instances themselves rest with no timer: the cost is the component's and the service's.
    assert cost.by_workflow.get("Instance", 0) == 0, cost.line()


async def test_a_failed_relist_is_skipped_and_the_replica_goes_on(
    workflow_env: WorkflowEnvironment, task_queue: str, kubesim: KubeSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    @activity.defn(name=KUBE_LIST_COMPONENT_PODS)
    def refused(self: KubeActivities, request: ListComponentPodsInput) -> ComponentPods:
        raise ApplicationError("pods is forbidden", type="Forbidden", non_retryable=True)

    monkeypatch.setattr(KubeActivities, "list_component_pods", refused)
    async with ready_service(workflow_env, task_queue, kubesim, monkeypatch) as s:
        await workflow_env.sleep(RECHECK_INTERVAL * 2 + timedelta(minutes=1))

        async def refused_twice() -> bool:
            names = await scheduled_activities(s, "InferenceReplica")
            return names.count("kube.list_component_pods") >= 2

        # Each failed re-list is logged and skipped; the loop lives on to try again.
        await eventually(refused_twice, "two refused re-lists")
        replica = await s.client.get_workflow_handle(workflow_id("InferenceReplica")).describe()
        assert replica.status == WorkflowExecutionStatus.RUNNING
