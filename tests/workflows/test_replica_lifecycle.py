"""A lifecycle-only change reaches running Instances without a new revision or a pod move.

`lifecycle.restartPolicy` is outside the pod template, so changing it makes no revision and
must not touch a pod; yet the running Instances must act on it: before the change a killed
container is the kubelet's to restart (single-pod default), after it the Instance is
recreated whole (`RecreateInstanceOnPodRestart`, incarnation 2).
"""

from __future__ import annotations

import pytest
from temporalio.client import Client

from kubesim.handle import KubeSim
from models.instance import QUERY_STATUS, InstanceStatus
from tests.workflows.service_harness import (
    NAME,
    NAMESPACE,
    Story,
    engine_ready,
    eventually,
    isvc_manifest,
    story,
)

pytestmark = pytest.mark.workflows


async def _instance(s: Story, index: int) -> InstanceStatus:
    handle = s.client.get_workflow_handle(f"instance/{NAMESPACE}/{NAME}-engine-{index}")
    return await handle.query(QUERY_STATUS, result_type=InstanceStatus)


async def test_restart_policy_change_reaches_running_instances_without_moving_pods(
    dev_client: Client, task_queue: str, kubesim: KubeSim
) -> None:
    async with story(dev_client, task_queue, kubesim) as s:
        await s.apply(isvc_manifest())
        before = await eventually(lambda: engine_ready(s), "two Ready engine Instances")
        pod = f"{NAME}-engine-0-default-0"

        # Default for a single-pod Instance: the kubelet restarts the container in place.
        s.sim.kill_pod(NAMESPACE, pod)
        await eventually(
            lambda: (
                s.core.read_namespaced_pod(pod, NAMESPACE).status.container_statuses[0].restart_count == 1
            ),
            "the kubelet to restart the killed container",
        )
        await eventually(lambda: engine_ready(s), "both Instances Ready again")
        assert (await _instance(s, 0)).incarnation == 1
        uids = {p.metadata.name: p.metadata.uid for p in s.pods()}

        result = await s.apply(isvc_manifest(lifecycle={"restartPolicy": "RecreateInstanceOnPodRestart"}))
        assert result.accepted and result.generation == 2
        after = await eventually(lambda: engine_ready(s, generation=2), "Ready at generation 2")
        assert after.update_revision == before.update_revision, "a lifecycle change made a new revision"

        # The next container death now recreates the Instance: the spec reached it.
        s.sim.kill_pod(NAMESPACE, f"{NAME}-engine-1-default-0")

        async def recreated() -> bool:
            return (await _instance(s, 1)).incarnation == 2 and (
                await engine_ready(s, generation=2)
            ) is not None

        await eventually(recreated, "Instance 1 recreated whole under RecreateInstanceOnPodRestart")
        # Instance 0's pod was never touched by the change itself.
        assert s.core.read_namespaced_pod(pod, NAMESPACE).metadata.uid == uids[pod]
