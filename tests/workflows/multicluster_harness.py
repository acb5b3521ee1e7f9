"""Harness of the multi-cluster workflow tests: a control plane and two workload clusters.

Three kubesims: the control plane (WorkloadClusters, the user's InferenceService, its
TrafficMap and global route) and `worker-a` / `worker-b`, each with its inference gateway.
One worker per cluster, as `workers.worker` runs them: the main task queue with the control
plane's client and `<queue>@worker-a` / `<queue>@worker-b` with each workload cluster's, all
running the same workflows and activities. A `PodRelay` per workload cluster stands in for
its watcher (signalling the `@cluster` Instance IDs). The spec 000 service `chat` is placed
`All` on both clusters.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import kubernetes
from temporalio.client import Client, WithStartWorkflowOperation, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy

from kubesim.handle import KubeSim
from kubesim.timing import Timing
from tests.workflows.service_harness import PodRelay, runtime_manifest, terminate_leftovers
from workers.worker import build_worker
from workflows.names import cluster_task_queue, isvc_workflow_id, trafficmap_workflow_id
from workflows.service.messages import ApplyResult, ServiceStatusView
from workflows.service.workflow import InferenceServiceWorkflow

NAMESPACE = "prod"
NAME = "chat"
CLUSTERS = ("worker-a", "worker-b")
TOPOLOGY = "zones=1,nodes-per-zone=3,gpus=8"
FAST_CLUSTER = {"drain_seconds": 0.2}
RUNTIME = "srt-llama-3-1-8b-instruct"


def chat_manifest(**spec: Any) -> dict[str, Any]:
    """Spec 000's `chat` as OMENative Instances: two engine replicas per home, placed `All` on
    worker-a and worker-b."""
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": NAME, "namespace": NAMESPACE},
        "spec": {
            "deploymentMode": "OMENative",
            "model": {"name": "llama-3-1-8b-instruct"},
            "runtime": {"name": RUNTIME},
            "engine": {"minReplicas": 2, "maxReplicas": 4},
            "placement": {
                "policy": "ClusterAffinity",
                "mode": "All",
                "clusterAffinity": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": list(CLUSTERS)}]}
                ],
            },
            **spec,
        },
    }


def with_factors(manifest: dict[str, Any], factors: dict[str, str]) -> dict[str, Any]:
    changed = copy.deepcopy(manifest)
    changed["spec"]["routing"] = {"capacityFactors": factors}
    return changed


@dataclass
class Fleet:
    client: Client
    task_queue: str
    control: KubeSim
    homes: dict[str, KubeSim]
    relays: dict[str, PodRelay] = field(default_factory=dict)

    @property
    def isvc_id(self) -> str:
        return isvc_workflow_id(NAMESPACE, NAME)

    def handle(self, cluster: str | None = None) -> WorkflowHandle[Any, Any]:
        return self.client.get_workflow_handle(isvc_workflow_id(NAMESPACE, NAME, cluster))

    def trafficmap(self) -> WorkflowHandle[Any, Any]:
        return self.client.get_workflow_handle(trafficmap_workflow_id(NAMESPACE, NAME))

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

    async def status(self, cluster: str | None = None) -> ServiceStatusView:
        return await self.handle(cluster).query(InferenceServiceWorkflow.status)

    def custom(self, cluster: str | None = None) -> Any:
        sim = self.control if cluster is None else self.homes[cluster]
        return kubernetes.client.CustomObjectsApi(sim.api_client())

    def core(self, cluster: str | None = None) -> Any:
        sim = self.control if cluster is None else self.homes[cluster]
        return kubernetes.client.CoreV1Api(sim.api_client())

    def serving_pods(self, cluster: str) -> list[Any]:
        pods = self.core(cluster).list_namespaced_pod(NAMESPACE, label_selector=f"ome.io/inferenceservice={NAME}")
        serving = []
        for pod in pods.items:
            conditions = {c.type: c.status for c in pod.status.conditions or []}
            if pod.metadata.deletion_timestamp is None and conditions.get("ome.io/serving") == "True":
                serving.append(pod)
        return serving

    def trafficmap_object(self) -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = self.custom().get_namespaced_custom_object(
                "ome.io", "v1beta1", NAMESPACE, "trafficmaps", NAME
            )
        except kubernetes.client.ApiException as error:
            if error.status == 404:
                return None
            raise
        return found

    def weights(self) -> dict[str, int]:
        found = self.trafficmap_object()
        if found is None:
            return {}
        return {entry["cluster"]: entry.get("weight", 0) for entry in found["spec"].get("entries") or []}


async def weights_are(f: Fleet, expected: dict[str, int]) -> dict[str, int] | None:
    """The TrafficMap object's weights once they are `expected`."""
    weights = f.weights()
    return weights if weights == expected else None


def register(control: KubeSim, name: str, ready: bool = True) -> None:
    """A WorkloadCluster on the control plane, its `Ready` as the watcher would write it."""
    custom = kubernetes.client.CustomObjectsApi(control.api_client())
    body = {
        "apiVersion": "ome.io/v1beta1",
        "kind": "WorkloadCluster",
        "metadata": {"name": name, "labels": {"ome.io/cluster-name": name}},
        "spec": {"clusterSource": {"kubeConfig": {"secretRef": {"name": f"wlc-{name}-kubeconfig", "namespace": "ome"}}}},
    }
    with contextlib.suppress(kubernetes.client.ApiException):
        custom.create_cluster_custom_object("ome.io", "v1beta1", "workloadclusters", body)
    status = "True" if ready else "False"
    condition = {"type": "Ready", "status": status, "reason": "Reachable" if ready else "ConnectionFailed",
                 "message": "GET /version answered", "lastTransitionTime": "2026-12-02T00:00:00Z"}
    custom.patch_cluster_custom_object_status(
        "ome.io", "v1beta1", "workloadclusters", name, {"status": {"conditions": [condition]}}
    )


def prepare_home(sim: KubeSim) -> None:
    api = sim.api_client()
    kubernetes.client.CoreV1Api(api).create_namespace({"metadata": {"name": NAMESPACE}})
    runtime = runtime_manifest()
    runtime = {**runtime, "metadata": {"name": RUNTIME, "namespace": NAMESPACE}}
    kubernetes.client.CustomObjectsApi(api).create_namespaced_custom_object(
        "ome.io", "v1beta1", NAMESPACE, "servingruntimes", runtime
    )


async def end_earlier_runs(client: Client) -> None:
    """`prod/chat`'s workflow IDs are fixed: a run another test left on this dev server (on a
    task queue no worker polls any more) would take this test's update and never answer."""
    query = f'WorkflowId STARTS_WITH "isvc/{NAMESPACE}/{NAME}" OR WorkflowId = "trafficmap/{NAMESPACE}/{NAME}"'
    async for execution in client.list_workflows(f'({query}) AND ExecutionStatus = "Running"'):
        with contextlib.suppress(Exception):  # ended meanwhile
            await client.get_workflow_handle(execution.id).terminate("a new test starts")


@asynccontextmanager
async def fleet(client: Client, task_queue: str) -> AsyncIterator[Fleet]:
    """The control plane, worker-a and worker-b, a worker per cluster and a relay per home."""
    async with AsyncExitStack() as stack:
        control = stack.enter_context(KubeSim(topology=TOPOLOGY, crds="product", timing=Timing.fast()))
        kubernetes.client.CoreV1Api(control.api_client()).create_namespace({"metadata": {"name": NAMESPACE}})
        homes: dict[str, KubeSim] = {}
        for name in CLUSTERS:
            sim = stack.enter_context(
                KubeSim(topology=TOPOLOGY, crds="product", timing=Timing.fast(), gateway_port=0)
            )
            prepare_home(sim)
            register(control, name)
            homes[name] = sim
        result = Fleet(client, task_queue, control, homes)
        await end_earlier_runs(client)
        queues = [(task_queue, control)] + [(cluster_task_queue(task_queue, n), s) for n, s in homes.items()]
        for queue, sim in queues:
            await stack.enter_async_context(
                build_worker(client, queue, sim.api_client(), graceful_shutdown_timeout=timedelta(0))
            )
        for name, sim in homes.items():
            relay = PodRelay(client, sim, cluster=name)
            relay.start()
            result.relays[name] = relay
            stack.push_async_callback(relay.stop)
        try:
            yield result
        finally:
            for queue, _ in queues:
                await terminate_leftovers(client, queue)


async def homes_serving_counts(f: Fleet, counts: dict[str, int]) -> bool:
    """Each named home serves exactly that many pods."""
    return all(len(f.serving_pods(cluster)) == n for cluster, n in counts.items())
