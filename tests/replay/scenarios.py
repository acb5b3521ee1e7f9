"""The scenarios `tests/replay/record_histories.py` records: each drives the product's
workflows through one story (create, update, pause, gang surge, ...) on a dev server with the
real worker, activities and watcher, so the histories it leaves are the ones production writes.
The table in tests/replay/README.md lists them. Here: the steps every story shares, the
Instance scenarios and the first service ones; the newer code paths are in
`tests/replay/scenarios_newer.py`, and `tests/replay/catalog.py` names them all.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import kubernetes
from temporalio.client import WorkflowExecutionStatus, WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import WorkflowEnvironment

from kubesim.handle import KubeSim
from models.canary_analysis import CanarySettingsResult
from models.instance import (
    DeleteRequest,
    InstancePhase,
    RestartPolicy,
    UpdateRequest,
)
from tests.workflows.instance_kube_harness import KubeHarness, kube_harness
from tests.workflows.service_harness import (
    FAST_CLUSTER,
    IMAGE_1,
    IMAGE_2,
    NAME,
    NAMESPACE,
    Story,
    eventually,
    isvc_manifest,
    runtime_manifest,
    stray_pod,
    with_image,
)
from workers.watch.deployments import DeploymentWatcher, TemporalDeploymentSink
from workers.watch.pods import PodWatcher, TemporalSignalSink
from workers.worker import build_worker
from workflows.replica import carry, children
from workflows.service.messages import (
    ReleaseHeldRequest,
    ResetInstancesRequest,
    ScaleRequest,
)

BAD_IMAGE = "docker.io/lmsysorg/sglang:does-not-exist"
HOLD_AT_ONCE = {"drain_seconds": 0.2, "stuck_pod_grace_seconds": 1, "update_retry": None}
"""As in tests/workflows/test_replica_operations.py: no updateRetry, so the first failure that is
the revision's fault holds it; a 1 s stuck-pod grace turns an unpullable image into a failure."""
P = InstancePhase
WAIT = 90.0
"""Generous real-time bound for any one step: the machine is shared, a stall is not a failure
of the workflow until this long."""


async def until(probe: Callable[[], Any], what: str, within: float = WAIT) -> Any:
    """`eventually`, printing how long the step took: a slow step shows which one to look at."""
    began = time.monotonic()
    found = await eventually(probe, what, within=within)
    print(f"  {time.monotonic() - began:5.1f}s  {what}", flush=True)
    return found


@dataclass
class Scenario:
    name: str
    run: Callable[[WorkflowEnvironment, KubeSim, str], Awaitable[None]]
    description: str
    suggest_continue_as_new_after: int | None = None
    """Recorded on a dev server of its own that suggests continue-as-new at this many events
    (a story about a workflow's own hand-over); None: the shared one, which suggests it early."""
    run_limits: tuple[int, int, int] | None = None
    """The InferenceReplica's per-run limits at test size (`children.CHILDREN_PER_RUN`,
    `children.SENDS_PER_TASK`, `carry.PACKED_ABOVE`), recorded and replayed with them
    (`run_limits_of`); None: the product's."""


@contextmanager
def run_limits_of(scenario: Scenario) -> Iterator[None]:
    """`scenario`'s InferenceReplica limits in force (the module is passed through the sandbox,
    so the worker and the replayer read them), the product's again after."""
    if scenario.run_limits is None:
        yield
        return
    kept = children.CHILDREN_PER_RUN, children.SENDS_PER_TASK, carry.PACKED_ABOVE
    children.CHILDREN_PER_RUN, children.SENDS_PER_TASK, carry.PACKED_ABOVE = scenario.run_limits
    try:
        yield
    finally:
        children.CHILDREN_PER_RUN, children.SENDS_PER_TASK, carry.PACKED_ABOVE = kept


# --- Instance scenarios: one Instance workflow, the watcher signalling its pods -------------


async def _until_deleted(harness: KubeHarness, handle: Any) -> None:
    await handle.signal("delete", DeleteRequest())
    await harness.until_real(handle, lambda s: s.deleted, within=WAIT)
    await asyncio.wait_for(handle.result(), WAIT)


async def instance_create_delete(env: WorkflowEnvironment, sim: KubeSim, task_queue: str) -> None:
    async with kube_harness(env, sim, task_queue) as harness:
        handle = await harness.start(harness.spec(workers=1, drain_seconds=0.5))
        await harness.until_real(handle, lambda s: s.phase == P.READY and s.serving, within=WAIT)
        await _until_deleted(harness, handle)


async def instance_pod_killed(env: WorkflowEnvironment, sim: KubeSim, task_queue: str) -> None:
    async with kube_harness(env, sim, task_queue) as harness:
        handle = await harness.start(harness.spec(workers=1, drain_seconds=0.5))
        await harness.until_real(handle, lambda s: s.phase == P.READY and s.serving, within=WAIT)
        sim.kill_pod(harness.namespace, "chat-engine-1-worker-0")
        await harness.until_real(
            handle, lambda s: s.incarnation == 2 and s.phase == P.READY and s.serving, within=WAIT
        )
        await _until_deleted(harness, handle)


async def instance_surge_update(env: WorkflowEnvironment, sim: KubeSim, task_queue: str) -> None:
    async with kube_harness(env, sim, task_queue) as harness:
        handle = await harness.start(harness.spec(drain_seconds=0.5))
        await harness.until_real(handle, lambda s: s.phase == P.READY and s.serving, within=WAIT)
        await handle.signal("update", UpdateRequest(spec=harness.spec("engine:2", drain_seconds=0.5)))
        await harness.until_real(
            handle,
            lambda s: s.running_revision == "rev-engine-2" and s.phase == P.READY and s.serving,
            within=WAIT,
        )
        await _until_deleted(harness, handle)


async def instance_local_kube_calls(env: WorkflowEnvironment, sim: KubeSim, task_queue: str) -> None:
    """The path of `workflow.patched("instance-local-kube-calls")`: local activities throughout,
    a killed pod recreated, a surge whose new pod counts while the old one drains."""
    async with kube_harness(env, sim, task_queue) as harness:
        recreate = RestartPolicy.RECREATE_INSTANCE_ON_POD_RESTART
        handle = await harness.start(harness.spec(drain_seconds=0.5, restart_policy=recreate))
        await harness.until_real(handle, lambda s: s.phase == P.READY and s.serving, within=WAIT)
        sim.kill_pod(harness.namespace, "chat-engine-1-default-0")
        await harness.until_real(
            handle, lambda s: s.incarnation == 2 and s.phase == P.READY and s.serving, within=WAIT
        )
        await handle.signal("update", UpdateRequest(spec=harness.spec("engine:2", drain_seconds=0.5, restart_policy=recreate))
        )
        await harness.until_real(
            handle,
            lambda s: s.running_revision == "rev-engine-2" and s.phase == P.READY and s.serving,
            within=WAIT,
        )
        await _until_deleted(harness, handle)


# --- InferenceService scenarios: the spec 003 example through all three workflow types ------


@asynccontextmanager
async def service_story(
    env: WorkflowEnvironment,
    sim: KubeSim,
    task_queue: str,
    cluster: dict[str, Any],
    *,
    name: str = NAME,
    namespace: str = NAMESPACE,
    runtime: dict[str, Any] | None = None,
    canary: CanarySettingsResult | None = None,
) -> AsyncIterator[Story]:
    """The spec 003 example's namespace and runtime, a worker, and the real watcher process's two
    watches, pods and Deployments, as `workers.watcher.main` runs them (rather than the workflow
    tests' polling relay: their signals are the ones production histories carry)."""
    api = sim.api_client()
    core = kubernetes.client.CoreV1Api(api)
    custom = kubernetes.client.CustomObjectsApi(api)
    core.create_namespace(
        kubernetes.client.V1Namespace(metadata=kubernetes.client.V1ObjectMeta(name=namespace))
    )
    custom.create_namespaced_custom_object(
        "ome.io", "v1beta1", namespace, "servingruntimes", runtime or runtime_manifest()
    )
    watcher = PodWatcher(sim.api_client(), TemporalSignalSink(env.client))
    deployments = DeploymentWatcher(sim.api_client(), TemporalDeploymentSink(env.client))
    await watcher.start()
    await deployments.start()
    try:
        async with build_worker(env.client, task_queue, sim.api_client(), canary=canary):
            yield Story(env.client, task_queue, sim, core, custom, None, cluster, name, namespace, watcher)
    finally:
        await deployments.stop()
        await watcher.stop()


async def apply_accepted(s: Story, manifest: dict[str, Any]) -> None:
    result = await s.apply(manifest)
    if not result.accepted:
        raise RuntimeError(f"apply was refused: {result}")


async def delete_service(s: Story) -> None:
    """Delete: every Instance drained and removed, then the InferenceService workflow completes."""
    began = time.monotonic()
    await s.handle().signal("delete")
    await asyncio.wait_for(s.handle().result(), WAIT)
    print(f"  {time.monotonic() - began:5.1f}s  delete, the InferenceService workflow completed", flush=True)


def live_images(s: Story) -> set[str]:
    return {p.spec.containers[0].image for p in s.pods() if p.metadata.deletion_timestamp is None}


async def ready_on(s: Story, image: str, indexes: list[int]) -> bool:
    """Exactly the Instances `indexes` Ready, every live pod on `image`, the rollout finished."""
    if not await replica_running(s):
        return False
    replica = await s.replica_status()
    ready = sorted(row.index for row in replica.instance_statuses if row.phase == "Ready")
    view = await s.status()
    lifecycle = view.status.components["engine"].lifecycle
    live = [p for p in s.pods() if p.metadata.deletion_timestamp is None]
    return (
        ready == indexes
        and len(replica.instance_statuses) == len(indexes)
        and lifecycle is not None
        and lifecycle.current_revision == lifecycle.update_revision
        and len(live) == len(indexes)
        and live_images(s) == {image}
    )


async def up_new_image_delete(s: Story, up: str = "two Ready engine Instances", *, same_again: bool = False) -> None:
    """The example's two Instances up (`up` names the wait), optionally the same apply again,
    an image change, delete."""
    manifest = isvc_manifest()
    await apply_accepted(s, manifest)
    await until(lambda: ready_on(s, IMAGE_1, [0, 1]), up, within=WAIT)
    if same_again:
        await apply_accepted(s, manifest)  # unchanged: accepted, nothing to do
    await apply_accepted(s, with_image(manifest, IMAGE_2))
    await until(lambda: ready_on(s, IMAGE_2, [0, 1]), "both Instances on the new image", within=WAIT)
    await delete_service(s)


async def service_apply_update_delete(env: WorkflowEnvironment, sim: KubeSim, task_queue: str) -> None:
    async with service_story(env, sim, task_queue, dict(FAST_CLUSTER)) as s:
        await up_new_image_delete(s, same_again=True)


async def service_versioned_instances(env: WorkflowEnvironment, sim: KubeSim, task_queue: str) -> None:
    """Instances started under `INSTANCE_WORKFLOW_VERSION` 1: no patch markers, search attributes
    set at start, reports to the InferenceReplica as local activities."""
    async with service_story(env, sim, task_queue, dict(FAST_CLUSTER)) as s:
        await up_new_image_delete(s)


async def service_retire_in_one_call(env: WorkflowEnvironment, sim: KubeSim, task_queue: str) -> None:
    """The `service_versioned_instances` story with no drain pause (`drain_seconds` 0): each old
    pod is taken out of rotation and deleted by one `kube.delete_pods` local activity."""
    async with service_story(env, sim, task_queue, {**FAST_CLUSTER, "drain_seconds": 0.0}) as s:
        await up_new_image_delete(s)


async def replica_runs(s: Story) -> int:
    """How many runs of the engine InferenceReplica have started (each continue-as-new is one more)."""
    return len([e async for e in s.client.list_workflows(f"WorkflowId = '{s.irep().id}'")])


async def service_handover_at_rest(env: WorkflowEnvironment, sim: KubeSim, task_queue: str) -> None:
    """Image changes one after another until the InferenceReplica, at rest after one of them,
    finds its history past `history_budget.AT_REST_EVENTS` and continues as new
    (`replica-hands-over-at-rest`); one more image change on the new run; delete."""
    async with service_story(env, sim, task_queue, {**FAST_CLUSTER, "drain_seconds": 0.0}) as s:
        manifest = isvc_manifest()
        await apply_accepted(s, manifest)
        await until(lambda: ready_on(s, IMAGE_1, [0, 1]), "two Ready engine Instances", within=WAIT)
        for change in range(1, 41):
            image = f"{IMAGE_1}-{change}"
            await apply_accepted(s, with_image(manifest, image))
            await until(lambda image=image: ready_on(s, image, [0, 1]), f"image change {change} done", within=WAIT)
            if await replica_runs(s) > 1:
                break
        else:
            raise RuntimeError("40 image changes and the InferenceReplica never continued as new at rest")
        await apply_accepted(s, with_image(manifest, IMAGE_2))
        await until(lambda: ready_on(s, IMAGE_2, [0, 1]), "both Instances on the new image, on the new run", within=WAIT)
        await delete_service(s)


async def service_clean_starts(env: WorkflowEnvironment, sim: KubeSim, task_queue: str) -> None:
    """A stray pod of Instance 1 from an earlier life before the apply: the InferenceReplica's
    list before its starts finds it, so Instance 1 lists and clears it while Instance 0, clean,
    creates at once; an image change; delete."""
    async with service_story(env, sim, task_queue, dict(FAST_CLUSTER)) as s:
        s.core.create_namespaced_pod(s.namespace, stray_pod(1))
        await up_new_image_delete(s, "two Ready engine Instances, the stray gone")


async def service_scale_pause_resume(env: WorkflowEnvironment, sim: KubeSim, task_queue: str) -> None:
    async with service_story(env, sim, task_queue, dict(FAST_CLUSTER)) as s:
        manifest = isvc_manifest(minReplicas=1, maxReplicas=3)
        await apply_accepted(s, manifest)
        await until(lambda: ready_on(s, IMAGE_1, [0]), "one Ready Instance", within=WAIT)
        await s.handle().signal("scale", ScaleRequest(component="engine", replicas=3))
        await until(lambda: ready_on(s, IMAGE_1, [0, 1, 2]), "three Ready Instances", within=WAIT)
        await s.handle().signal("scale", ScaleRequest(component="engine", replicas=2))
        await until(lambda: ready_on(s, IMAGE_1, [0, 1]), "Instance 2 removed", within=WAIT)
        await s.handle().signal("pause")
        await apply_accepted(s, with_image(manifest, IMAGE_2))  # also ends the transient scale
        await until(lambda: _paused(s), "the InferenceService to show Paused", within=WAIT)
        await s.handle().signal("resume")
        await until(lambda: ready_on(s, IMAGE_2, [0]), "the held-back update after resume", within=WAIT)
        await delete_service(s)


async def _paused(s: Story) -> bool:
    return (await s.status()).phase == "Paused"


async def replica_running(s: Story) -> bool:
    """Whether this scenario's InferenceReplica runs. A query before it starts would reach the
    previous scenario's closed run of the same id, whose task queue nobody polls any more, and
    hang until the server's query timeout."""
    return await workflow_running(s.irep())


async def workflow_running(handle: WorkflowHandle[Any, Any]) -> bool:
    return await status_is(handle, WorkflowExecutionStatus.RUNNING)


async def status_is(handle: WorkflowHandle[Any, Any], status: WorkflowExecutionStatus) -> bool:
    """Whether the workflow exists and is in `status`."""
    try:
        return (await handle.describe()).status == status
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:
            return False
        raise


async def _held(s: Story, after: datetime | None = None) -> tuple[str, datetime | None] | None:
    """(revision, its last failure) once the update is Held by a failure later than `after`."""
    if not await replica_running(s):
        return None
    replica = await s.replica_status()
    hold = replica.rollout_hold
    if hold is None or hold.gate != "Held" or not replica.update_revision:
        return None
    failed = max((b.last_failure_at for b in replica.retry_blocks if b.last_failure_at), default=None)
    if after is not None and (failed is None or failed <= after):
        return None  # still the hold from before the release
    return str(replica.update_revision), failed


async def service_held_release(env: WorkflowEnvironment, sim: KubeSim, task_queue: str) -> None:
    sim.set_image_behavior(BAD_IMAGE, fail_pull=True)
    async with service_story(env, sim, task_queue, dict(HOLD_AT_ONCE)) as s:
        manifest = isvc_manifest()
        await apply_accepted(s, manifest)
        await until(lambda: ready_on(s, IMAGE_1, [0, 1]), "two Ready Instances", within=WAIT)
        await apply_accepted(s, with_image(manifest, BAD_IMAGE))
        revision, failed = await until(lambda: _held(s), "the bad revision to be Held", within=WAIT)
        await s.handle().signal("release_held", ReleaseHeldRequest(component="engine", revision="deadbeef"))
        await s.handle().signal("release_held", ReleaseHeldRequest(component="engine", revision=revision))
        await until(
            lambda: any(
                e.reason == "RetryBlockReleased" for e in s.core.list_namespaced_event(NAMESPACE).items
            ),
            "the RetryBlockReleased event",
            within=WAIT,
        )
        await until(lambda: _held(s, after=failed), "the retried revision to be Held again", within=WAIT)
        await apply_accepted(s, with_image(manifest, IMAGE_2))
        await until(lambda: ready_on(s, IMAGE_2, [0, 1]), "the corrected revision", within=WAIT)
        await s.handle().signal("reset_instances", ResetInstancesRequest(component="engine", instances="all"))
        await delete_service(s)
