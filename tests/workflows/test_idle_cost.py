"""Issue 17's idle cost on the time-skipping server, with the real activities against kubesim:

- a lost pod change of a resting Ready Instance (the watcher was down when its pod died) is
  caught by the InferenceReplica's component re-list (`workflows.replica.recheck`) and the
  Instance is recreated, although the Instance itself waits with no timer;
- an idle 20-Instance service spends at most one Temporal action per Instance per hour
  (`bench.idle_cost` counts them as the bench does).
"""

from __future__ import annotations

import contextlib
from datetime import timedelta

import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from bench.idle_cost import measure_idle_actions
from bench.lifecycle_stack import instant_kubesim, topology_for
from kubesim.handle import KubeSim
from models.instance import InstancePhase, InstanceStatus
from planning.replica.recheck import RECHECK_INTERVAL
from tests.workflows import service_harness
from tests.workflows.service_harness import (
    NAME,
    NAMESPACE,
    PodRelay,
    Story,
    engine_ready,
    eventually,
    isvc_manifest,
    story,
)

pytestmark = pytest.mark.workflows

POD = f"{NAME}-engine-0-default-0"


async def instance(s: Story, index: int = 0) -> InstanceStatus:
    handle = s.client.get_workflow_handle(f"instance/{NAMESPACE}/{NAME}-engine-{index}")
    status: InstanceStatus = await handle.query("status", result_type=InstanceStatus)
    return status


def live_uid(s: Story, name: str) -> str | None:
    for pod in s.pods():
        if pod.metadata.name == name and pod.metadata.deletion_timestamp is None:
            return str(pod.metadata.uid)
    return None


async def end_the_service(client: Client, task_queue: str) -> None:
    """`story`'s clean-up, for the time-skipping server, which cannot list workflows: end the
    service's workflows by id (each test has a server of its own, so nothing else runs)."""
    from bench.idle_cost import workflow_ids

    for workflow_id in workflow_ids(2, NAMESPACE, NAME):
        with contextlib.suppress(Exception):  # ended already
            await client.get_workflow_handle(workflow_id).terminate("test finished")


async def test_a_pod_lost_while_the_watcher_was_down_is_caught_by_the_replica_relist(
    workflow_env: WorkflowEnvironment, task_queue: str, kubesim: KubeSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(service_harness, "terminate_leftovers", end_the_service)
    async with story(workflow_env.client, task_queue, kubesim) as s:
        await s.apply(isvc_manifest())
        await eventually(lambda: engine_ready(s), "two Ready engine Instances")
        ready = await instance(s)
        assert ready.phase == InstancePhase.READY and ready.operation is None
        old_uid = live_uid(s, POD)

        # The watcher goes down; the pod dies meanwhile: no signal will ever tell the Instance.
        assert s.relay is not None
        await s.relay.stop()
        s.core.delete_namespaced_pod(POD, NAMESPACE, grace_period_seconds=0)
        await eventually(lambda: live_uid(s, POD) is None, "the pod gone from kubesim")
        # Nobody told it, and a resting Ready Instance under the net has no re-list of its own.
        assert (await instance(s)).incarnation == ready.incarnation

        # Past the InferenceReplica's re-list: its report disagrees with the listing, it hears
        # a fresh summary, confirms the loss and recreates its pod.
        await workflow_env.sleep(RECHECK_INTERVAL + timedelta(seconds=30))

        async def recreating() -> bool:
            status = await instance(s)
            return status.incarnation > ready.incarnation or live_uid(s, POD) not in (None, old_uid)

        await eventually(recreating, "the Instance to recreate the pod the re-list found gone")
        # The watcher is back: the new pod's readiness reaches the Instance as usual.
        s.relay = PodRelay(workflow_env.client, kubesim)
        s.relay.start()

        async def serving_again() -> bool:
            status = await instance(s)
            return status.phase == InstancePhase.READY and status.serving and live_uid(s, POD) not in (None, old_uid)

        await eventually(serving_again, "the Instance serving again on a new pod")
        await s.relay.stop()


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
