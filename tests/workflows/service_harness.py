"""Harness for the InferenceService / InferenceReplica workflow tests: a worker with the real
Kubernetes activities against kubesim, the pod watcher in-process, and the spec 003 example.

Everything talks the way production does: the workflows write objects through the real
activities, kubesim schedules and runs the pods, and the watcher turns pod changes into
`pods_changed` signals. Waits poll the `status` query (never a fixed sleep as an assertion).
"""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import kubernetes
from temporalio.client import Client, WithStartWorkflowOperation, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy

from kubesim.handle import KubeSim
from workers.watcher import PodWatcher, TemporalSignalSink
from workers.worker import build_worker
from workflows.inference_replica import InferenceReplicaWorkflow
from workflows.inference_service import InferenceServiceWorkflow
from workflows.names import irep_workflow_id, isvc_workflow_id
from workflows.service_calls import ApplyResult, ServiceStatusView

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

    @property
    def isvc_id(self) -> str:
        return isvc_workflow_id(NAMESPACE, NAME)

    def handle(self) -> WorkflowHandle[Any, Any]:
        return self.client.get_workflow_handle(self.isvc_id)

    def irep(self, component: str = "engine") -> WorkflowHandle[Any, Any]:
        return self.client.get_workflow_handle(irep_workflow_id(NAMESPACE, NAME, component))

    async def apply(self, manifest: dict[str, Any]) -> ApplyResult:
        start = WithStartWorkflowOperation(
            InferenceServiceWorkflow.run,
            {"manifest": manifest, "cluster": FAST_CLUSTER},
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
        listed = self.core.list_namespaced_pod(NAMESPACE, label_selector=f"ome.io/inferenceservice={NAME}")
        return list(listed.items)

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
            found: dict[str, Any] = self.custom.get_namespaced_custom_object("ome.io", "v1beta1", NAMESPACE, plural, name)
        except kubernetes.client.ApiException as error:
            if error.status == 404:
                return None
            raise
        return found


async def eventually(probe: Callable[[], Any], what: str, within: float = 60.0) -> Any:
    """Poll `probe` (sync or async) until it returns something truthy; fail naming `what`."""
    deadline = time.monotonic() + within
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = probe()
            if asyncio.iscoroutine(last):
                last = await last
        except Exception as error:  # noqa: BLE001 - a query before the first task is normal
            last = error
        if last and not isinstance(last, Exception):
            return last
        await asyncio.sleep(0.2)
    raise AssertionError(f"timed out after {within:.0f}s waiting for {what}; last saw {last!r}")


@asynccontextmanager
async def story(client: Client, task_queue: str, sim: KubeSim) -> AsyncIterator[Story]:
    """A worker and a watcher around one kubesim, with the example's runtime in place."""
    api = sim.api_client()
    core = kubernetes.client.CoreV1Api(api)
    custom = kubernetes.client.CustomObjectsApi(api)
    core.create_namespace({"metadata": {"name": NAMESPACE}})
    custom.create_namespaced_custom_object("ome.io", "v1beta1", NAMESPACE, "servingruntimes", runtime_manifest())
    watcher = PodWatcher(sim.api_client(), TemporalSignalSink(client))
    await watcher.start()
    try:
        async with build_worker(client, task_queue, sim.api_client()):
            yield Story(client, task_queue, sim, core, custom)
    finally:
        await watcher.stop()
