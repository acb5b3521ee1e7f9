"""Replay scenarios of the fleet-scale bookkeeping: what the InferenceReplica counts from its own
records rather than from its Instances' reports. `tests/replay/catalog.py` lists them all."""

from __future__ import annotations

from temporalio.testing import WorkflowEnvironment

from kubesim.handle import KubeSim
from models.instance import QUERY_STATUS, InstanceStatus
from tests.replay.scenarios import (
    WAIT,
    apply_accepted,
    delete_service,
    ready_on,
    service_story,
    until,
    workflow_running,
)
from tests.workflows.service_harness import FAST_CLUSTER, IMAGE_1, NAME, NAMESPACE, Story, isvc_manifest
from workflows.service.messages import ScaleRequest

QUOTA = "one-pod"


async def _waits_for_quota(s: Story, index: int) -> bool:
    handle = s.client.get_workflow_handle(f"instance/{NAMESPACE}/{NAME}-engine-{index}")
    if not await workflow_running(handle):
        return False
    status: InstanceStatus = await handle.query(QUERY_STATUS, result_type=InstanceStatus)
    return status.operation is not None and status.operation.waiting == "QuotaExceeded"


async def _rows(s: Story) -> list[tuple[int, str]]:
    return [(row.index, row.phase) for row in (await s.replica_status()).instance_statuses]


async def service_launched_removals(env: WorkflowEnvironment, sim: KubeSim, task_queue: str) -> None:
    async with service_story(env, sim, task_queue, dict(FAST_CLUSTER)) as s:
        await apply_accepted(s, isvc_manifest(minReplicas=1, maxReplicas=3))
        await until(lambda: ready_on(s, IMAGE_1, [0]), "one Ready Instance", within=WAIT)
        s.core.create_namespaced_resource_quota(NAMESPACE, {"metadata": {"name": QUOTA}, "spec": {"hard": {"pods": "1"}}})
        await s.handle().signal("scale", ScaleRequest(component="engine", replicas=3))
        for index in (1, 2):
            await until(lambda index=index: _waits_for_quota(s, index), f"Instance {index} waiting for quota")
        await until(lambda: _rows_are(s, [(0, "Ready"), (1, "Creating"), (2, "Creating")]), "1 and 2 unheard of")
        await s.handle().signal("scale", ScaleRequest(component="engine", replicas=1))
        await until(lambda: ready_on(s, IMAGE_1, [0]), "1 and 2 deleted", within=WAIT)
        s.core.delete_namespaced_resource_quota(QUOTA, NAMESPACE)
        await delete_service(s)


async def _rows_are(s: Story, expected: list[tuple[int, str]]) -> bool:
    return await _rows(s) == expected
