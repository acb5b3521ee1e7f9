"""The replay scenarios of the newer code paths: freeze and gang surge, Deployment mode,
lifecycle-only changes, the pod re-list, rollout groups and canaries, migration, relocation
and drain, TrafficMaps, multi-cluster placement, the kubectl relay. The steps they share and
the first scenarios are in `tests/replay/scenarios.py`; `tests/replay/catalog.py` lists them all.
"""

from __future__ import annotations

import asyncio
import copy
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from temporalio.client import WorkflowExecutionStatus, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.testing import WorkflowEnvironment

from kubesim.handle import KubeSim
from models.canary_analysis import CanaryAnalysisConfig, CanarySettingsResult
from models.instance import (
    QUERY_STATUS,
    InstanceStatus,
)
from planning.service.relay import relayed_manifest
from tests.fixtures.prometheus import RunningPrometheus
from tests.replay.scenarios import (
    WAIT,
    apply_accepted,
    delete_service,
    live_images,
    ready_on,
    service_story,
    status_is,
    until,
    workflow_running,
)
from tests.workflows.multicluster_harness import CLUSTERS, chat_manifest, fleet, weights_are, with_factors
from tests.workflows.rollout_examples import BLUE_GREEN, pd_manifest, pd_runtime
from tests.workflows.rollout_examples import NAME as PD_NAME
from tests.workflows.rollout_examples import NAMESPACE as NAMESPACE_PD
from tests.workflows.service_harness import (
    FAST_CLUSTER,
    IMAGE_1,
    IMAGE_2,
    NAME,
    NAMESPACE,
    Story,
    engine_ready,
    isvc_manifest,
    with_image,
)
from tests.workflows.trafficmap_harness import Gateways, TrafficMapHarness, routing_settings
from workers.worker import build_worker
from workflows.names import rollout_workflow_id
from workflows.service.messages import (
    ApplyOrigin,
    ApplyResult,
    ScaleRequest,
)
from workflows.trafficmap.messages import DrainRequest, DrainResult, UndrainRequest

# --- Newer code paths: freeze and gang surge, Deployment mode, lifecycle-only changes -------


async def _instance(s: Story, index: int) -> InstanceStatus | None:
    """Instance `index`'s status, None unless this scenario's run of it is running (see
    `replica_running`: an earlier scenario's run of the same id would hang the query)."""
    handle = s.client.get_workflow_handle(f"instance/{NAMESPACE}/{NAME}-engine-{index}")
    if not await workflow_running(handle):
        return None
    status: InstanceStatus = await handle.query(QUERY_STATUS, result_type=InstanceStatus)
    return status


def _live(s: Story) -> list[Any]:
    return [p for p in s.pods() if p.metadata.deletion_timestamp is None]


def _gang_serving(s: Story) -> dict[int, str]:
    """Index -> image of every Instance whose leader and worker both serve."""
    pods: dict[int, list[str]] = {}
    for pod in s.serving_pods():
        pods.setdefault(int(pod.metadata.labels["ome.io/instance-index"]), []).append(
            pod.spec.containers[0].image
        )
    return {index: images[0] for index, images in pods.items() if len(images) >= 2}


async def _frozen(s: Story, indexes: list[int]) -> bool:
    statuses = [await _instance(s, index) for index in indexes]
    return all(status is not None and status.pause_mode == "Freeze" for status in statuses)


async def _update_waiting(s: Story) -> bool:
    """A new revision is the update target while every pod stays on the old image."""
    lifecycle = (await s.status()).status.components["engine"].lifecycle
    return (
        lifecycle is not None
        and lifecycle.update_revision != lifecycle.current_revision
        and live_images(s) == {IMAGE_1}
    )


async def _lost_unrepaired(s: Story, pod: str) -> bool:
    """Instance 0 knows its worker is gone, still frozen, and nothing has put it back."""
    status = await _instance(s, 0)
    return (
        status is not None
        and status.pause_mode == "Freeze"
        and status.total_pods == 1
        and not status.serving
        and pod not in {p.metadata.name for p in s.pods()}
    )


async def _gang_replaced(s: Story, first: set[str]) -> list[int] | None:
    """The indexes of the two Instances once both serve the new image on none of the old pods
    and the rollout is recorded complete."""
    serving = _gang_serving(s)
    live = _live(s)
    if len(serving) != 2 or set(serving.values()) != {IMAGE_2} or len(live) != 4:
        return None
    if {p.metadata.uid for p in live} & first:
        return None
    lifecycle = (await s.status()).status.components["engine"].lifecycle
    if lifecycle is None or lifecycle.current_revision != lifecycle.update_revision:
        return None
    return sorted(serving)


async def _gang_surge_of(s: Story, index: int) -> int | None:
    """The `gang_surge_of` Instance `index` was started with: the history holds the start input."""
    handle = s.client.get_workflow_handle(f"instance/{NAMESPACE}/{NAME}-engine-{index}")
    started = (await handle.fetch_history()).events[0].workflow_execution_started_event_attributes
    spec = json.loads(started.input.payloads[0].data)
    source = spec.get("gangSurgeOf")
    return None if source is None else int(source)


async def service_gang_surge_freeze(env: WorkflowEnvironment, sim: KubeSim, task_queue: str) -> None:
    async with service_story(env, sim, task_queue, dict(FAST_CLUSTER)) as s:
        manifest = isvc_manifest(
            leader={},
            worker={"size": 1},
            lifecycle={"updateStrategy": {"type": "SurgeThenDrain", "rollingUpdate": {"maxSurge": 1}}},
        )
        await apply_accepted(s, manifest)
        await until(
            lambda: sorted(_gang_serving(s)) == [0, 1], "Instances 0 and 1 serving, leader and worker"
        )
        first = {p.metadata.uid for p in _live(s)}
        await s.handle().signal("pause", "freeze")
        await until(lambda: _frozen(s, [0, 1]), "both Instances frozen")
        await apply_accepted(s, with_image(manifest, IMAGE_2))
        await until(lambda: _update_waiting(s), "the image change held back by the freeze")
        (worker,) = [
            p.metadata.name
            for p in _live(s)
            if p.metadata.labels["ome.io/instance-index"] == "0" and "-worker-" in p.metadata.name
        ]
        s.core.delete_namespaced_pod(worker, NAMESPACE, grace_period_seconds=0)
        await until(lambda: _lost_unrepaired(s, worker), "Instance 0 short of its worker, not repaired")
        await s.handle().signal("resume")
        indexes = await until(lambda: _gang_replaced(s, first), "both Instances replaced on the new image")
        surged = {index: await _gang_surge_of(s, index) for index in indexes}
        if all(source is None for source in surged.values()):
            raise RuntimeError(f"no replacement was a gang surge target (index: source {surged})")
        print(f"         serving at indexes {indexes}, replacing (index: source) {surged}", flush=True)
        await delete_service(s)


def _router(manifest: dict[str, Any]) -> dict[str, Any]:
    """`manifest` plus a RawDeployment router (1..3 replicas) beside its OMENative engine."""
    changed = copy.deepcopy(manifest)
    changed["spec"]["router"] = {
        "minReplicas": 1,
        "maxReplicas": 3,
        "runner": {"name": "router", "image": "ome/router:1"},
        "annotations": {"ome.io/deploymentMode": "RawDeployment"},
    }
    return changed


async def _router_available(s: Story, count: int) -> bool:
    """RouterReady=True from a Deployment with `count` available pods, the service Ready."""
    view = await s.status()
    router, ready = view.status.condition("RouterReady"), view.status.condition("Ready")
    deployment = view.deployments.get("router")
    return (
        router is not None
        and (router.status, router.reason) == ("True", "Ready")
        and ready is not None
        and ready.status == "True"
        and deployment is not None
        and deployment.available_replicas == count
    )


async def _rejected(s: Story, reason: str) -> bool:
    rejected = (await s.status()).last_rejected_request
    return rejected is not None and rejected.reason == reason


async def service_deployment_scale(env: WorkflowEnvironment, sim: KubeSim, task_queue: str) -> None:
    async with service_story(env, sim, task_queue, dict(FAST_CLUSTER)) as s:
        await apply_accepted(s, _router(isvc_manifest(minReplicas=1, maxReplicas=1)))
        await until(lambda: _router_available(s, 1), "a Ready engine Instance and a Ready router Deployment")
        await s.handle().signal("scale", ScaleRequest(component="router", replicas=7))
        await until(lambda: _rejected(s, "ScaleRejected"), "the out-of-range scale refused (ScaleRejected)")
        await s.handle().signal("scale", ScaleRequest(component="router", replicas=2))
        await until(lambda: _router_available(s, 2), "RouterReady from a Deployment of two available pods")
        await delete_service(s)


async def _recreated(s: Story, index: int) -> bool:
    status = await _instance(s, index)
    return status is not None and status.incarnation == 2 and await engine_ready(s, 2) is not None


async def service_lifecycle_change(env: WorkflowEnvironment, sim: KubeSim, task_queue: str) -> None:
    async with service_story(env, sim, task_queue, dict(FAST_CLUSTER)) as s:
        await apply_accepted(s, isvc_manifest())
        before = await until(lambda: engine_ready(s, 1), "two Ready engine Instances")
        await apply_accepted(s, isvc_manifest(lifecycle={"restartPolicy": "RecreateInstanceOnPodRestart"}))
        after = await until(lambda: engine_ready(s, 2), "Ready at generation 2")
        if after.update_revision != before.update_revision:
            raise RuntimeError(f"a lifecycle-only change made revision {after.update_revision}")
        sim.kill_pod(NAMESPACE, f"{NAME}-engine-1-default-0")
        await until(lambda: _recreated(s, 1), "Instance 1 recreated whole after its container died")
        await delete_service(s)


def _recreated_pod(s: Story, name: str, old_uid: str) -> bool:
    return any(p.metadata.name == name and p.metadata.uid != old_uid for p in _live(s))


async def service_pod_relist(env: WorkflowEnvironment, sim: KubeSim, task_queue: str) -> None:
    async with service_story(env, sim, task_queue, {**FAST_CLUSTER, "pod_relist_seconds": 2.0}) as s:
        await apply_accepted(s, isvc_manifest(minReplicas=1, maxReplicas=1))
        await until(lambda: ready_on(s, IMAGE_1, [0]), "one Ready engine Instance")
        # The watcher is down while the pod dies: only the InferenceReplica's re-list can tell.
        pod = f"{NAME}-engine-0-default-0"
        (old_uid,) = [p.metadata.uid for p in _live(s) if p.metadata.name == pod]
        await s.watcher.stop()
        s.core.delete_namespaced_pod(pod, NAMESPACE, grace_period_seconds=0)
        await until(lambda: _recreated_pod(s, pod, old_uid), "the re-list to find the pod gone and its recreation")
        await s.watcher.start()
        await until(lambda: ready_on(s, IMAGE_1, [0]), "Instance 0 Ready again on a new pod")
        await delete_service(s)


async def _pd_on(s: Story, image: str, count: int = 1) -> bool:
    """The engine and the decoder each serve `count` Instances on `image`, the router one."""
    serving = [p for p in s.serving_pods() if p.metadata.deletion_timestamp is None]
    by_component: dict[str, list[str]] = {}
    for pod in serving:
        by_component.setdefault(pod.metadata.labels["ome.io/component"], []).append(
            pod.spec.containers[0].image
        )
    live = [p for p in s.pods() if p.metadata.deletion_timestamp is None]
    return (
        by_component.get("engine") == [image] * count
        and by_component.get("decoder") == [image] * count
        and len(by_component.get("router", [])) == 1
        and len(live) == 2 * count + 1
    )


async def service_rollout_group(env: WorkflowEnvironment, sim: KubeSim, task_queue: str) -> None:
    """Seed 004: engine and decoder in one blue-green group, the router alone; a new image
    runs a `Rollout`, which completes; then delete."""
    namespace = NAMESPACE_PD
    async with service_story(
        env, sim, task_queue, dict(FAST_CLUSTER), name=PD_NAME, namespace=namespace, runtime=pd_runtime()
    ) as s:
        await apply_accepted(s, pd_manifest(namespace, BLUE_GREEN))
        await until(lambda: _pd_on(s, IMAGE_1), "mistral-pd serving", within=WAIT)
        await apply_accepted(s, pd_manifest(namespace, BLUE_GREEN, IMAGE_2))
        run = s.client.get_workflow_handle(rollout_workflow_id(namespace, PD_NAME, 2))
        await until(lambda: _completed(run), "rollout run 2 to complete", within=WAIT)
        await until(lambda: _pd_on(s, IMAGE_2), "engine and decoder on the new image", within=WAIT)
        await delete_service(s)


CANARY_IMAGE_BAD = "docker.io/lmsysorg/sglang:v0.4.7-bad"


def _canary_rollout() -> dict[str, Any]:
    selector = 'namespace="{{.Namespace}}",component="{{.Component}}",revision_hash="{{.CanaryRevision}}"'
    error_rate = {
        "name": "error_rate",
        "query": f'sum(rate(ome_inference_requests_total{{{selector},code="500"}}[10s])) '
        f"/ sum(rate(ome_inference_requests_total{{{selector}}}[10s]))",
        "operator": "LT",
        "threshold": "0.05",
    }
    analysis = {"interval": "2s", "initialDelay": "4s", "failureLimit": 2, "metrics": [error_rate]}
    steps = [
        {"capacity": "50%", "traffic": 50, "analysis": analysis},
        {"capacity": "100%", "traffic": 100, "pause": {}},
    ]
    return {"groups": [{"components": ["engine", "decoder"], "canary": {"steps": steps}}]}


async def service_canary(env: WorkflowEnvironment, sim: KubeSim, task_queue: str) -> None:
    """A canary group of engine and decoder with Prometheus analysis (a real Prometheus scraping
    kubesim): a good image passes its analysis step, waits at the manual gate, is promoted and
    completes; then a bad image fails two samples and rolls back; then delete."""
    namespace = f"{NAMESPACE_PD}-canary"
    sim.set_engine_behavior(CANARY_IMAGE_BAD, error_ratio=0.3)
    with (
        tempfile.TemporaryDirectory() as scratch,
        RunningPrometheus(
            Path(scratch), {"kubesim": f"127.0.0.1:{sim.port}"}, interval_seconds=1
        ) as prometheus,
    ):
        settings = CanarySettingsResult(
            analysis=CanaryAnalysisConfig(bundled_prometheus_address=prometheus.url)
        )
        async with service_story(
            env,
            sim,
            task_queue,
            dict(FAST_CLUSTER),
            name=PD_NAME,
            namespace=namespace,
            runtime=pd_runtime(),
            canary=settings,
        ) as s:
            await apply_accepted(s, pd_manifest(namespace, _canary_rollout(), None, (2, 2)))
            await until(lambda: _pd_on(s, IMAGE_1, 2), "mistral-pd serving", within=WAIT)
            await apply_accepted(s, pd_manifest(namespace, _canary_rollout(), IMAGE_2, (2, 2)))
            await until(
                lambda: _engine_phase(s, "Paused", step=1), "the canary at its manual gate", within=WAIT
            )
            await s.handle().signal("promote")
            run = s.client.get_workflow_handle(rollout_workflow_id(namespace, PD_NAME, 2))
            await until(lambda: _completed(run), "canary run 2 to complete", within=WAIT)
            await until(lambda: _pd_on(s, IMAGE_2, 2), "engine and decoder on the new image", within=WAIT)
            await apply_accepted(s, pd_manifest(namespace, _canary_rollout(), CANARY_IMAGE_BAD, (2, 2)))
            await until(lambda: _engine_phase(s, "RolledBack"), "the bad canary rolled back", within=WAIT)
            await until(lambda: _pd_on(s, IMAGE_2, 2), "back on the stable image", within=WAIT)
            await delete_service(s)


async def _engine_phase(s: Story, phase: str, step: int | None = None) -> bool:
    isvc = s.object("inferenceservices", PD_NAME) or {}
    engine = ((isvc.get("status") or {}).get("components") or {}).get("engine") or {}
    current = (engine.get("canary") or {}).get("currentStep")
    return engine.get("rolloutPhase") == phase and (step is None or current == step)


async def _completed(handle: WorkflowHandle[Any, Any]) -> bool:
    return await status_is(handle, WorkflowExecutionStatus.COMPLETED)


def _serving_nodes(s: Story) -> dict[int, str]:
    """Instance index -> node of its serving pod."""
    return {int(p.metadata.labels["ome.io/instance-index"]): p.spec.node_name for p in s.serving_pods()}


async def _migration_ended(s: Story, workflow_id: str) -> Any:
    result = await asyncio.wait_for(s.client.get_workflow_handle(workflow_id).result(), WAIT)
    return result


async def service_migration(env: WorkflowEnvironment, sim: KubeSim, task_queue: str) -> None:
    """Two engine Instances; Instance 1 migrated off its node (replacement first, Completed);
    a request naming the wrong node (Failed); a cancelled one; delete."""
    async with service_story(env, sim, task_queue, dict(FAST_CLUSTER)) as s:
        manifest = isvc_manifest()
        await apply_accepted(s, manifest)
        await until(lambda: ready_on(s, IMAGE_1, [0, 1]), "two Ready engine Instances", within=WAIT)
        nodes = _serving_nodes(s)
        started = await s.handle().execute_update(
            "migrate", {"component": "engine", "instance": 1, "from_node": nodes[1], "reason": "maintenance"}
        )
        done = await _migration_ended(s, started["workflow_id"])
        if done["phase"] != "Completed":
            raise RuntimeError(f"the migration did not complete: {done}")
        await until(lambda: sorted(_serving_nodes(s)) == [0, 2], "Instances 0 and 2 serving", within=WAIT)
        wrong = await s.handle().execute_update(
            "migrate", {"component": "engine", "instance": 0, "from_node": "no-such-node"}
        )
        failed = await _migration_ended(s, wrong["workflow_id"])
        if failed.get("reason") != "MigrationFromNodeMismatch":
            raise RuntimeError(f"expected MigrationFromNodeMismatch: {failed}")
        await delete_service(s)


async def service_relocation(env: WorkflowEnvironment, sim: KubeSim, task_queue: str) -> None:
    """One engine Instance placed on a node whose container runtime is wedged: it times out
    and is relocated off that node (`AutoMigrationTriggered`, a `Relocated` row), Ready on
    another node, its index kept; delete."""
    sim.stall_node("gpu-node-1")
    for node in ("gpu-node-2", "gpu-node-3", "gpu-node-4"):
        sim.cordon_node(node)
    async with service_story(env, sim, task_queue, dict(FAST_CLUSTER)) as s:
        manifest = isvc_manifest(
            topologySpread=None,
            topologySpreadKey=None,
            minReplicas=1,
            maxReplicas=1,
            lifecycle={"instanceReadyTimeout": "5s"},
        )
        manifest["spec"]["engine"] = {k: v for k, v in manifest["spec"]["engine"].items() if v is not None}
        await apply_accepted(s, manifest)
        await until(
            lambda: [p.spec.node_name for p in _live(s)] == ["gpu-node-1"], "the pod on the wedged node"
        )
        sim.uncordon_node("gpu-node-2")
        await until(lambda: ready_on(s, IMAGE_1, [0]), "Instance 0 Ready off the wedged node", within=WAIT)
        if [p.spec.node_name for p in _live(s)] != ["gpu-node-2"]:
            raise RuntimeError(f"not relocated: {[p.spec.node_name for p in _live(s)]}")
        await delete_service(s)


async def _drained(s: Story, handle: WorkflowHandle[Any, Any]) -> bool:
    status = await handle.query("status")
    return bool(status["phase"] == "Drained")


async def service_drain(env: WorkflowEnvironment, sim: KubeSim, task_queue: str) -> None:
    """Three engine Instances; the node of Instance 0 drained (its Instance migrated replacement
    first), held cordoned, released; delete."""
    async with service_story(env, sim, task_queue, dict(FAST_CLUSTER)) as s:
        manifest = isvc_manifest(minReplicas=3, maxReplicas=3)
        await apply_accepted(s, manifest)
        await until(lambda: ready_on(s, IMAGE_1, [0, 1, 2]), "three Ready engine Instances", within=WAIT)
        node = _serving_nodes(s)[0]
        drain = await s.client.start_workflow(
            "Drain",
            {"node": node, "reason": "kernel upgrade"},
            id=f"drain/node/{node}",
            task_queue=task_queue,
        )
        await until(lambda: _drained(s, drain), "the node drained", within=WAIT)
        moved = _serving_nodes(s)
        if len(moved) != 3 or node in moved.values():
            raise RuntimeError(f"expected three Instances serving off {node}: {moved}")
        await drain.signal("release")
        await asyncio.wait_for(drain.result(), WAIT)
        await delete_service(s)


async def trafficmap_weights_drain_delete(env: WorkflowEnvironment, sim: KubeSim, task_queue: str) -> None:
    """A TrafficMap with chart probes and capacity polls against a stand-in of the home gateways:
    weights 2 and 3 (spec 000), published; a gate on worker-b and its lift; a drain by Update, a
    refused one, an undrain; a zero factor freezing the map and a fixed one resuming it; delete."""
    fast_probe = {
        "path": "/healthz",
        "method": "GET",
        "acceptStatuses": [200],
        "gateStatuses": [503],
        "period": "1s",
        "timeout": "500ms",
        "failureThreshold": 1,
        "successThreshold": 1,
        "allFailedPolicy": "Drain",
    }
    fast_capacity = {
        "path": "/capacity",
        "method": "GET",
        "format": "Report",
        "samples": 1,
        "quorum": 1,
        "period": "2s",
        "timeout": "1s",
        "maxAge": "10s",
    }
    gateways = Gateways(env)
    await gateways.start()
    h = TrafficMapHarness(env, sim, gateways, task_queue)
    h.prepare()
    for cluster, servable in (("worker-a", 4), ("worker-b", 2)):
        gateways.home(cluster).servable = servable
    routing = {"capacityFactors": {"worker-b": "3"}}
    homes = {"worker-a": (4, 4), "worker-b": (2, 2)}

    def published(weights: dict[str, int]) -> Callable[[Any], bool]:
        return lambda v: v.weights == weights and v.publication.published and v.publication.route == weights

    try:
        settings = routing_settings(probe=fast_probe, capacity=fast_capacity)
        async with build_worker(env.client, task_queue, sim.api_client(), routing=settings):
            handle = await h.start()
            await handle.signal("homes_changed", h.report(homes, generation=1, routing=routing))
            await h.until(handle, published({"worker-a": 2, "worker-b": 3}), within=WAIT)
            gateways.home("worker-b").probe_status = 503
            await h.until(handle, published({"worker-a": 1, "worker-b": 0}), within=WAIT)
            gateways.home("worker-b").probe_status = 200
            await h.until(handle, published({"worker-a": 2, "worker-b": 3}), within=WAIT)
            await handle.execute_update(
                "drain_cluster", DrainRequest(id="maint", cluster="worker-a"), result_type=DrainResult
            )
            try:
                await handle.execute_update(
                    "drain_cluster", DrainRequest(id="maint", cluster="worker-a"), result_type=DrainResult
                )
                raise RuntimeError("a second drain with the same ID was accepted")
            except WorkflowUpdateFailedError:
                pass
            await h.until(handle, published({"worker-a": 0, "worker-b": 3}), within=WAIT)
            await handle.execute_update(
                "undrain_cluster", UndrainRequest(id="maint"), result_type=DrainResult
            )
            await handle.signal(
                "homes_changed", h.report(homes, generation=2, routing={"capacityFactors": {"worker-b": "0"}})
            )
            await h.until(handle, lambda v: bool(v.errors), within=WAIT)
            await handle.signal("homes_changed", h.report(homes, generation=3, routing=routing))
            await h.until(handle, lambda v: v.observed_isvc_generation == 3 and not v.errors, within=WAIT)
            await handle.signal("delete")
            await asyncio.wait_for(handle.result(), WAIT)
    finally:
        await gateways.stop()


async def service_multicluster_all(env: WorkflowEnvironment, sim: KubeSim, task_queue: str) -> None:
    """Spec 000's `chat` placed All on worker-a and worker-b (three kubesims of its own): two
    members on their clusters' queues, a TrafficMap weighing them 1:1, then 1:3 with worker-b's
    factor "3"; delete drains both homes and ends the map."""
    async with fleet(env.client, task_queue) as f:
        await f.apply(chat_manifest())
        await until(lambda: weights_are(f, {"worker-a": 1, "worker-b": 1}), "weights 1:1")
        await f.apply(with_factors(chat_manifest(), {"worker-b": "3"}))
        await until(lambda: weights_are(f, {"worker-a": 1, "worker-b": 3}), "weights 1:3")
        await f.handle().signal("delete")
        await until(lambda: _completed(f.handle()), "the placement source completed")
        await until(lambda: _completed(f.trafficmap()), "the TrafficMap completed")
        for cluster in CLUSTERS:
            await until(lambda c=cluster: _completed(f.handle(c)), f"the {cluster} member completed")


async def service_kubectl_relay(env: WorkflowEnvironment, sim: KubeSim, task_queue: str) -> None:
    """The kubectl way in, as the controller relays it (issue 15)."""
    async with service_story(env, sim, task_queue, dict(FAST_CLUSTER)) as s:
        await apply_accepted(s, isvc_manifest())
        await until(lambda: ready_on(s, IMAGE_1, [0, 1]), "two Ready engine Instances", within=WAIT)
        written = s.object("inferenceservices", NAME)
        assert written is not None
        edited = s.custom.patch_namespaced_custom_object(
            "ome.io",
            "v1beta1",
            NAMESPACE,
            "inferenceservices",
            NAME,
            {"spec": with_image(isvc_manifest(), IMAGE_2)["spec"]},
        )
        for obj in (written, edited, edited, written):  # its own write, the edit twice, a late relay
            origin = ApplyOrigin(object_generation=obj["metadata"]["generation"], uid=obj["metadata"]["uid"])
            await s.handle().execute_update(
                "apply", args=[relayed_manifest(obj), origin], result_type=ApplyResult
            )
        await until(lambda: ready_on(s, IMAGE_2, [0, 1]), "both Instances on the edited image", within=WAIT)
        s.custom.patch_namespaced_custom_object(
            "ome.io",
            "v1beta1",
            NAMESPACE,
            "servingruntimes",
            "srt-qwen3-0-6b",
            {"spec": {"engineConfig": {"runner": {"image": IMAGE_1}}}},
        )
        await s.handle().signal("runtime_changed")
        s.custom.delete_namespaced_custom_object("ome.io", "v1beta1", NAMESPACE, "inferenceservices", NAME)
        await delete_service(s)
