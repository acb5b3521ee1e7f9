"""Replay scenarios of the fleet-scale bookkeeping: what the InferenceReplica counts from its own
records rather than from its Instances' reports, and which reports still carry news.
`tests/replay/catalog.py` lists them all."""

from __future__ import annotations

from temporalio.testing import WorkflowEnvironment

from kubesim.handle import KubeSim
from tests.kubesim.helpers import quota_counted
from tests.kubesim.webhooks import WebhookServer, hold_writes, pod_writes
from tests.replay.scenarios import WAIT, apply_accepted, delete_service, ready_on, service_story, until
from tests.workflows.service_harness import FAST_CLUSTER, IMAGE_1, NAMESPACE, Story, isvc_manifest
from workflows.service.messages import ScaleRequest

HOLD_SECONDS = 3.0


async def _rows_are(s: Story, expected: list[tuple[int, str, str | None]]) -> bool:
    rows = [
        (row.index, row.phase, row.operation.waiting if row.operation is not None else None)
        for row in (await s.replica_status()).instance_statuses
    ]
    return rows == expected


async def service_launched_removals(env: WorkflowEnvironment, sim: KubeSim, task_queue: str) -> None:
    server = WebhookServer().start()
    try:
        async with service_story(env, sim, task_queue, dict(FAST_CLUSTER)) as s:
            await apply_accepted(s, isvc_manifest(minReplicas=1, maxReplicas=3))
            await until(lambda: ready_on(s, IMAGE_1, [0]), "one Ready Instance", within=WAIT)
            release = hold_writes(sim, server, "pod-creates", NAMESPACE, pod_writes("CREATE"), HOLD_SECONDS)
            await s.handle().signal("scale", ScaleRequest(component="engine", replicas=3))
            started = [(0, "Ready", None), (1, "Creating", None), (2, "Creating", None)]
            await until(lambda: _rows_are(s, started), "1 and 2 started, unheard of (their pods' creation held)")
            await s.handle().signal("scale", ScaleRequest(component="engine", replicas=1))
            told = [(0, "Ready", None), (1, "Deleting", None), (2, "Deleting", None)]
            await until(lambda: _rows_are(s, told), "1 and 2 told to delete, shown Deleting from the requests")
            await until(lambda: ready_on(s, IMAGE_1, [0]), "1 and 2 deleted", within=WAIT)
            release()
            await delete_service(s)
    finally:
        server.stop()


async def service_waits_reported(env: WorkflowEnvironment, sim: KubeSim, task_queue: str) -> None:
    async with service_story(env, sim, task_queue, dict(FAST_CLUSTER)) as s:
        await apply_accepted(s, isvc_manifest(minReplicas=1, maxReplicas=3))
        await until(lambda: ready_on(s, IMAGE_1, [0]), "one Ready Instance", within=WAIT)
        quota = {"metadata": {"name": "one-pod"}, "spec": {"hard": {"pods": "1"}}}
        s.core.create_namespaced_resource_quota(NAMESPACE, quota)
        await until(lambda: quota_counted(s.core, NAMESPACE, "one-pod"), "the quota counted")
        await s.handle().signal("scale", ScaleRequest(component="engine", replicas=2))
        waiting = [(0, "Ready", None), (1, "Creating", "QuotaExceeded")]
        await until(lambda: _rows_are(s, waiting), "Instance 1 shown waiting for quota")
        s.core.patch_namespaced_resource_quota("one-pod", NAMESPACE, {"spec": {"hard": {"pods": "2"}}})
        await until(lambda: ready_on(s, IMAGE_1, [0, 1]), "Instance 1 Ready once the quota has room", within=WAIT)
        await delete_service(s)


async def service_quota_not_counted(env: WorkflowEnvironment, sim: KubeSim, task_queue: str) -> None:
    async with service_story(env, sim, task_queue, dict(FAST_CLUSTER)) as s:
        await apply_accepted(s, isvc_manifest(minReplicas=1, maxReplicas=3))
        await until(lambda: ready_on(s, IMAGE_1, [0]), "one Ready Instance", within=WAIT)
        s.core.create_namespaced_resource_quota(NAMESPACE, {"metadata": {"name": "pods"}, "spec": {"hard": {"pods": "1"}}})
        await until(lambda: quota_counted(s.core, NAMESPACE, "pods"), "the quota counted")
        # Its use unknown again, as for a quota just created: the API server refuses every pod.
        s.core.patch_namespaced_resource_quota_status("pods", NAMESPACE, [{"op": "remove", "path": "/status/used"}])
        await s.handle().signal("scale", ScaleRequest(component="engine", replicas=3))
        waiting = [(0, "Ready", None), (1, "Creating", "QuotaNotCounted"), (2, "Creating", "QuotaNotCounted")]
        await until(lambda: _rows_are(s, waiting), "Instances 1 and 2 shown waiting for the quota's count")
        await s.handle().signal("scale", ScaleRequest(component="engine", replicas=2))
        await until(lambda: _rows_are(s, waiting[:2]), "Instance 2 gone while its create waited")
        s.core.patch_namespaced_resource_quota("pods", NAMESPACE, {"spec": {"hard": {"pods": "2"}}})
        await until(lambda: ready_on(s, IMAGE_1, [0, 1]), "Instance 1 Ready once the quota is counted", within=WAIT)
        await delete_service(s)


async def service_gang_partial_create(env: WorkflowEnvironment, sim: KubeSim, task_queue: str) -> None:
    gang = {"leader": {}, "worker": {"size": 1}}
    async with service_story(env, sim, task_queue, dict(FAST_CLUSTER)) as s:
        await apply_accepted(s, isvc_manifest(minReplicas=1, maxReplicas=2, **gang))
        await until(lambda: _rows_are(s, [(0, "Ready", None)]), "Instance 0 Ready")
        s.core.create_namespaced_resource_quota(NAMESPACE, {"metadata": {"name": "three"}, "spec": {"hard": {"pods": "3"}}})
        await until(lambda: quota_counted(s.core, NAMESPACE, "three"), "the quota counted")
        await s.handle().signal("scale", ScaleRequest(component="engine", replicas=2))
        waiting = [(0, "Ready", None), (1, "Creating", "QuotaExceeded")]
        await until(lambda: _rows_are(s, waiting), "Instance 1's leader made, its worker refused")
        s.core.patch_namespaced_resource_quota("three", NAMESPACE, {"spec": {"hard": {"pods": "4"}}})
        ready = [(0, "Ready", None), (1, "Ready", None)]
        await until(lambda: _rows_are(s, ready), "Instance 1 Ready once the quota has room", within=WAIT)
        await delete_service(s)


def _gang_pods(s: Story) -> dict[int, int]:
    """Index -> live pods (leader and worker) of each engine Instance."""
    counts: dict[int, int] = {}
    for pod in s.pods():
        if pod.metadata.deletion_timestamp is None:
            index = int(pod.metadata.labels["ome.io/instance-index"])
            counts[index] = counts.get(index, 0) + 1
    return counts


async def service_gang_deletes_counted(env: WorkflowEnvironment, sim: KubeSim, task_queue: str) -> None:
    async with service_story(env, sim, task_queue, dict(FAST_CLUSTER)) as s:
        await apply_accepted(s, isvc_manifest(minReplicas=1, maxReplicas=2, leader={}, worker={"size": 1}))
        await until(lambda: _rows_are(s, [(0, "Ready", None)]), "Instance 0 Ready")
        await s.handle().signal("scale", ScaleRequest(component="engine", replicas=2))
        ready = [(0, "Ready", None), (1, "Ready", None)]
        await until(lambda: _rows_are(s, ready), "Instances 0 and 1 Ready, leader and worker each")
        # Pods that take 12 s to exit, in real time (fast timing scales the grace period too):
        # the Instance counts them Terminating once its delete call returns and reports what it
        # holds of the budget then, not when the watcher lets their way out through (up to 10 s,
        # `WAY_OUT_SETTLE_SECONDS`).
        fast = sim.cluster.timing.factor
        sim.set_image_behavior(IMAGE_1, stop_seconds=12.0)
        sim.set_default_timing(factor=1.0)
        await s.handle().signal("scale", ScaleRequest(component="engine", replicas=1))
        await until(lambda: _rows_are(s, [(0, "Ready", None)]), "Instance 1 deleted", within=WAIT)
        await until(lambda: _gang_pods(s) == {0: 2}, "Instance 1's two pods gone")
        sim.set_default_timing(factor=fast)
        await delete_service(s)
