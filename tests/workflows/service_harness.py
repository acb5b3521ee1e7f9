"""Harness for the InferenceService / InferenceReplica workflow tests: a worker with the real
Kubernetes activities against kubesim, a pod relay in place of the watcher, and the spec 003 example.

Everything talks the way production does: the workflows write objects through the real
activities and kubesim schedules and runs the pods; `PodRelay` turns pod changes into the
watcher's `pods_changed` signals (the watcher process itself is exercised by the e2e tests). Waits poll the `status` query (never a fixed sleep as an assertion).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

import kubernetes
from temporalio.client import Client, WithStartWorkflowOperation, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy

from activities.kube_rest import KubeRest
from bench.idle_cost import workflow_ids
from bench.lifecycle_stack import poll_until
from kubesim.handle import KubeSim
from kubesim.store import Change
from models.canary_analysis import CanarySettingsResult
from models.instance import SIGNAL_PODS_CHANGED, InstanceStatus
from models.migration import MigrationAudit
from models.pods import InstancePods
from planning.pod_summary import InstanceKey, group_by_instance, instance_key, instance_pods
from workers.worker import build_worker
from workflows.names import instance_workflow_id, irep_workflow_id, isvc_workflow_id
from workflows.replica.workflow import InferenceReplicaWorkflow
from workflows.service.messages import ApplyResult, ServiceStatusView
from workflows.service.workflow import InferenceServiceWorkflow

T = TypeVar("T")
NAMESPACE = "spread-demo"
NAME = "qwen3-0-6b"
ZONE = "topology.kubernetes.io/zone"
IMAGE_1 = "docker.io/lmsysorg/sglang:v0.4.6"
IMAGE_2 = "docker.io/lmsysorg/sglang:v0.4.7"

# Fast cluster-wide lifecycle: a drain of 0.2 s instead of 5 s keeps the story in seconds.
FAST_CLUSTER = {"drain_seconds": 0.2}


def runtime_manifest() -> dict[str, Any]:
    """`srt-qwen3-0-6b`: the runtime the spec 003 example names, one GPU per engine pod."""
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "ServingRuntime",
        "metadata": {"name": "srt-qwen3-0-6b", "namespace": NAMESPACE},
        "spec": {
            "supportedModelFormats": [{"name": "safetensors", "autoSelect": True}],
            "engineConfig": {
                "runner": {
                    "name": "ome-container",
                    "image": IMAGE_1,
                    "resources": {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}},
                }
            },
        },
    }


def isvc_manifest(**engine: Any) -> dict[str, Any]:
    """Spec 003's `qwen3-0-6b`: two single-pod engine Instances, Required zone spread."""
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": NAME, "namespace": NAMESPACE},
        "spec": {
            "deploymentMode": "OMENative",
            "model": {"name": "qwen3-0-6b"},
            "runtime": {"name": "srt-qwen3-0-6b"},
            "engine": {
                "minReplicas": 2,
                "maxReplicas": 2,
                "topologySpread": "Required",
                "topologySpreadKey": ZONE,
                **engine,
            },
        },
    }


def with_image(manifest: dict[str, Any], image: str) -> dict[str, Any]:
    changed = copy.deepcopy(manifest)
    changed["spec"]["engine"]["runner"] = {"image": image}
    return changed


@dataclass
class Story:
    client: Client
    task_queue: str
    sim: KubeSim
    core: Any
    custom: Any
    relay: PodRelay | None = None
    cluster: dict[str, Any] | None = None
    name: str = NAME
    namespace: str = NAMESPACE
    watcher: Any = None
    """The real pod watcher, where one runs in-process (the replay scenarios), so a scenario can
    stop it and lose pod changes."""

    @property
    def isvc_id(self) -> str:
        return isvc_workflow_id(self.namespace, self.name)

    def handle(self) -> WorkflowHandle[Any, Any]:
        return self.client.get_workflow_handle(self.isvc_id)

    def irep(self, component: str = "engine") -> WorkflowHandle[Any, Any]:
        return self.client.get_workflow_handle(irep_workflow_id(self.namespace, self.name, component))

    async def apply(self, manifest: dict[str, Any]) -> ApplyResult:
        start = WithStartWorkflowOperation(
            InferenceServiceWorkflow.run,
            {"manifest": manifest, "cluster": self.cluster or FAST_CLUSTER},
            id=self.isvc_id,
            task_queue=self.task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        )
        return await self.client.execute_update_with_start_workflow(
            InferenceServiceWorkflow.apply, manifest, start_workflow_operation=start
        )

    async def status(self) -> ServiceStatusView:
        return await self.handle().query(InferenceServiceWorkflow.status)

    async def replica_status(self) -> Any:
        return await self.irep().query(InferenceReplicaWorkflow.status)

    def pods(self) -> list[Any]:
        listed = self.core.list_namespaced_pod(self.namespace, label_selector=f"ome.io/inferenceservice={self.name}")
        return list(listed.items)

    def live_uid(self, name: str) -> str | None:
        """The uid of the pod `name` while it lives (not being deleted); None otherwise."""
        for pod in self.pods():
            if pod.metadata.name == name and pod.metadata.deletion_timestamp is None:
                return str(pod.metadata.uid)
        return None

    async def instance(self, index: int = 0, component: str = "engine") -> InstanceStatus:
        """The `status` query of the component's Instance `index`."""
        handle = self.client.get_workflow_handle(instance_workflow_id(self.namespace, self.name, component, index))
        status: InstanceStatus = await handle.query("status", result_type=InstanceStatus)
        return status

    def zone_of(self, node: str) -> str:
        return str(self.core.read_node(node).metadata.labels.get(ZONE))

    def serving_pods(self) -> list[Any]:
        serving = []
        for pod in self.pods():
            if pod.metadata.deletion_timestamp is not None:
                continue
            conditions = {c.type: c.status for c in pod.status.conditions or []}
            if conditions.get("Ready") == "True" and conditions.get("ome.io/serving") == "True":
                serving.append(pod)
        return serving

    def object(self, plural: str, name: str) -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = self.custom.get_namespaced_custom_object(
                "ome.io", "v1beta1", self.namespace, plural, name
            )
        except kubernetes.client.ApiException as error:
            if error.status == 404:
                return None
            raise
        return found


def stray_pod(index: int, ordinal: int = 1) -> dict[str, Any]:
    """A pod of the example's engine Instance `index` from an earlier life (an old revision and
    incarnation), left behind on the single-pod ordinal `ordinal`: what a create must clear."""
    labels = {
        "ome.io/inferenceservice": NAME,
        "ome.io/component": "engine",
        "ome.io/instance-index": str(index),
        "ome.io/role": "default",
        "ome.io/revision": "0ld0ld00",
        "ome.io/incarnation": "3",
    }
    return {
        "metadata": {"name": f"{NAME}-engine-{index}-default-{ordinal}", "namespace": NAMESPACE, "labels": labels},
        "spec": {"containers": [{"name": "engine", "image": "example.com/old:1"}]},
    }


async def eventually(probe: Callable[[], Any], what: str, within: float = 60.0) -> Any:
    """Poll `probe` (sync or async) until it returns something truthy; fail naming `what`."""
    try:
        return await poll_until(what, probe, within, every=0.2)
    except TimeoutError as error:
        raise AssertionError(str(error)) from None


async def engine_ready(s: Story, generation: int = 1) -> Any:
    """The engine's lifecycle once Ready with two Instances at `generation`, else None.

    The InferenceReplica reports a generation only after its signals for it were delivered,
    so from then on every Instance sees the change before any later pod event."""
    view = await s.status()
    lifecycle = view.status.components["engine"].lifecycle
    ready = view.status.condition("Ready")
    if ready is None or ready.status != "True" or lifecycle is None or lifecycle.ready_replicas != 2:
        return None
    return lifecycle if lifecycle.observed_generation == generation else None


class PodRelay:
    """Stands in for the watcher process: lists the product's pods every 0.1 s and signals
    each Instance the same `InstancePods` summary the watcher would (`planning.pod_summary`),
    and, like the watcher, only when it changed: never the same summary twice in a row, so an
    Instance that needed a repeat to wake up stalls here as it would in production. Polling
    keeps these tests independent of watch-stream timing. A pod created and gone between two
    polls still reaches its Instance, as with the watcher (which owes a summary to an Instance
    one of whose pods it saw): the relay follows the store's pod creations for that alone.

    `lag_seconds` delays every delivery (in order), as a busy watcher or a slow signal path
    does: summaries then reach a workflow after its own writes and lists. `delivered` holds,
    per Instance, the last summary a workflow accepted.
    """

    def __init__(self, client: Client, sim: KubeSim, lag_seconds: float = 0.0, cluster: str | None = None) -> None:
        self.client = client
        self.cluster = cluster
        """A workload cluster's relay signals its Instances' `@cluster` workflow IDs."""
        self.rest = KubeRest(sim.api_client())
        self.lag_seconds = lag_seconds
        self.sent: dict[InstanceKey, InstancePods] = {}
        self.delivered: dict[InstanceKey, InstancePods] = {}
        self.signals = 0
        self.task: asyncio.Task[None] | None = None
        self.outbox: asyncio.Queue[tuple[float, InstanceKey, InstancePods]] = asyncio.Queue()
        self.created: set[InstanceKey] = set()
        """Instances a pod was created for since the last poll (added from the store's thread)."""
        self._created_lock = threading.Lock()
        self._unsubscribe = sim.cluster.store.subscribe(self._on_change)

    def _on_change(self, change: Change) -> None:
        if change.type_key == ("", "pods") and change.type == "ADDED":
            key = instance_key(change.obj)
            if key is not None:
                with self._created_lock:
                    self.created.add(key)

    def snapshot(self) -> dict[InstanceKey, InstancePods]:
        # Taken before the list: a pod created after it and gone before it is next poll's.
        with self._created_lock:
            created, self.created = self.created, set()
        pods = self.rest.get("/api/v1/pods", [("labelSelector", "ome.io/inferenceservice")])
        nodes = self.rest.get("/api/v1/nodes", [])
        by_name = {node["metadata"]["name"]: node for node in nodes.get("items") or []}
        version = str(pods["metadata"].get("resourceVersion") or "")
        grouped = group_by_instance(pods.get("items") or [], by_name, resource_version=version)
        for key in set(self.sent) | created:
            grouped.setdefault(key, instance_pods(key, [], by_name, resource_version=version))
        return grouped

    async def run(self) -> None:
        deliver = asyncio.create_task(self.deliver(), name="pod-relay-deliver")
        try:
            while True:
                for key, summary in (await asyncio.to_thread(self.snapshot)).items():
                    if summary.same_state(self.sent.get(key)):
                        continue
                    # Recorded as sent even when no such Instance exists (yet, or any more), as
                    # the watcher does: a new Instance lists its pods itself at start.
                    self.sent[key] = summary
                    self.outbox.put_nowait((time.monotonic() + self.lag_seconds, key, summary))
                await asyncio.sleep(0.1)
        finally:
            deliver.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await deliver

    async def deliver(self) -> None:
        while True:
            due, key, summary = await self.outbox.get()
            await asyncio.sleep(max(due - time.monotonic(), 0.0))
            namespace, isvc, component, index = key
            handle = self.client.get_workflow_handle(
                instance_workflow_id(namespace, isvc, component, index, self.cluster)
            )
            with contextlib.suppress(Exception):  # no such Instance: dropped, as the watcher does
                await handle.signal(SIGNAL_PODS_CHANGED, summary)
                self.signals += 1
                self.delivered[key] = summary

    def start(self) -> None:
        self.task = asyncio.create_task(self.run(), name="pod-relay")

    async def stop(self) -> None:
        self._unsubscribe()
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task


@asynccontextmanager
async def story(
    client: Client,
    task_queue: str,
    sim: KubeSim,
    cluster: dict[str, Any] | None = None,
    *,
    name: str = NAME,
    namespace: str = NAMESPACE,
    runtime: dict[str, Any] | None = None,
    canary: CanarySettingsResult | None = None,
    migration_audit: MigrationAudit | None = MigrationAudit(),
    sandbox: bool = True,
) -> AsyncIterator[Story]:
    """A worker and a watcher around one kubesim, with a runtime in place (the spec 003
    example's unless `runtime` names another, applied in `namespace`); `canary`: the
    worker's canary settings (its Prometheus, bindings, default ready timeout);
    `migration_audit`: the worker's migration caps (None: unconfigured, as OME without
    `lifecycle.audit`); `sandbox`: the worker's `OME_WORKER__SANDBOX`."""
    api = sim.api_client()
    core = kubernetes.client.CoreV1Api(api)
    custom = kubernetes.client.CustomObjectsApi(api)
    core.create_namespace({"metadata": {"name": namespace}})
    runtime = runtime or runtime_manifest()
    runtime = {**runtime, "metadata": {**runtime["metadata"], "namespace": namespace}}
    custom.create_namespaced_custom_object("ome.io", "v1beta1", namespace, "servingruntimes", runtime)
    relay = PodRelay(client, sim)
    relay.start()
    try:
        # Activities still running when the test ends are cancelled at once, not awaited.
        async with build_worker(
            client, task_queue, sim.api_client(), graceful_shutdown_timeout=timedelta(0), canary=canary,
            migration_audit=migration_audit, sandbox=sandbox,
        ):
            try:
                yield Story(client, task_queue, sim, core, custom, relay, cluster, name, namespace)
            finally:
                await terminate_leftovers(client, task_queue)
    finally:
        await relay.stop()


async def end_the_service(client: Client, task_queue: str, instances: int = 2) -> None:
    """`story`'s clean-up on the time-skipping server, which cannot list workflows: end the
    example service's workflows by id (each such test has a server of its own)."""
    for workflow_id in workflow_ids(instances, NAMESPACE, NAME):
        with contextlib.suppress(Exception):  # ended already
            await client.get_workflow_handle(workflow_id).terminate("test finished")


async def terminate_leftovers(client: Client, task_queue: str) -> None:
    """Workflow IDs derive from the object, so the next test would meet this test's workflows
    (and their task queue, which no worker polls any more): end whatever still runs on it,
    children included (they inherit the task queue)."""
    query = f'TaskQueue="{task_queue}" AND ExecutionStatus="Running"'
    for _ in range(3):  # until none is listed: a termination reaches visibility a moment later
        running = [execution.id async for execution in client.list_workflows(query)]
        for workflow_id in running:
            with contextlib.suppress(Exception):  # ended meanwhile
                await client.get_workflow_handle(workflow_id).terminate("test finished")
        if not running:
            return
        await asyncio.sleep(0.2)
