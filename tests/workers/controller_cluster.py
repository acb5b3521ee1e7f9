"""The controller tests' cluster: kubesim, a real Temporal dev server and a stand-in
InferenceService workflow (`tests.workers.test_controller_workflow`) that records every message
it receives, and a controller to start against them (`Cluster.controller`)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from uuid import uuid4

import kubernetes.client
from kubernetes.client.exceptions import ApiException
from temporalio.client import Client
from temporalio.service import RPCError
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from kubesim.handle import KubeSim
from planning.service.relay import RELAYED_ANNOTATION
from tests.workers.test_controller_workflow import (
    FakeInferenceService,
)
from workers.control.kube import KubeWriter
from workers.control.service_controller import InferenceServiceController
from workers.control.temporal import TemporalSender
from workflows.names import isvc_workflow_id

GROUP, VERSION = "ome.io", "v1beta1"
REPO_ROOT = Path(__file__).resolve().parents[2]
DEPLOY_CONTROLLER = REPO_ROOT / "deploy" / "controller.yaml"
PAUSED = "ome.io/rollout-paused"
WAIT_SECONDS = 10.0


async def until(check: Callable[[], Any], seconds: float = WAIT_SECONDS) -> Any:
    """Poll `check` (sync or async) until it returns something truthy."""
    deadline = asyncio.get_running_loop().time() + seconds
    while True:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"not met within {seconds}s")
        await asyncio.sleep(0.05)


class Cluster:
    """kubectl, the stand-in workflow and controller instances for one test namespace."""

    def __init__(self, sim: KubeSim, client: Client, task_queue: str) -> None:
        self.sim = sim
        self.client = client
        self.task_queue = task_queue
        self.namespace = f"ctl-{uuid4().hex[:8]}"
        self.custom = kubernetes.client.CustomObjectsApi(sim.api_client())
        self.core = kubernetes.client.CoreV1Api(sim.api_client())
        self.core.create_namespace({"metadata": {"name": self.namespace}})

    # --- kubectl ------------------------------------------------------------------------

    def create(self, name: str, plural: str = "inferenceservices", **metadata: Any) -> dict[str, Any]:
        spec = metadata.pop("spec", {"model": {"name": "llama"}, "runtime": {"name": "rt"}})
        kind = {"inferenceservices": "InferenceService", "inferencereplicas": "InferenceReplica",
                "servingruntimes": "ServingRuntime", "trafficmaps": "TrafficMap"}[plural]
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": kind,
            "metadata": {"name": name, "namespace": self.namespace, **metadata},
            "spec": spec,
        }
        return self.custom.create_namespaced_custom_object(GROUP, VERSION, self.namespace, plural, body)

    def patch(self, name: str, body: dict[str, Any], plural: str = "inferenceservices") -> dict[str, Any]:
        return self.custom.patch_namespaced_custom_object(GROUP, VERSION, self.namespace, plural, name, body)

    def annotate(self, name: str, plural: str = "inferenceservices", **annotations: str | None) -> None:
        self.patch(name, {"metadata": {"annotations": annotations}}, plural)

    def get(self, name: str, plural: str = "inferenceservices") -> dict[str, Any] | None:
        try:
            return self.custom.get_namespaced_custom_object(GROUP, VERSION, self.namespace, plural, name)
        except ApiException as error:
            if error.status == 404:
                return None
            raise

    def annotations(self, name: str, plural: str = "inferenceservices") -> dict[str, str]:
        return ((self.get(name, plural) or {}).get("metadata") or {}).get("annotations") or {}

    def record(self, name: str) -> dict[str, str]:
        return json.loads(self.annotations(name).get(RELAYED_ANNOTATION) or "{}")

    def events(self, reason: str, name: str | None = None) -> list[Any]:
        listed = self.core.list_namespaced_event(self.namespace).items
        return [e for e in listed if e.reason == reason and (name is None or e.involved_object.name == name)]

    # --- the workflow -------------------------------------------------------------------

    async def calls(self, name: str, message: str | None = None) -> list[dict[str, Any]]:
        handle = self.client.get_workflow_handle(isvc_workflow_id(self.namespace, name))
        try:
            calls = await handle.query("calls", result_type=list)
        except RPCError:
            return []
        return [call for call in calls if message is None or call["name"] == message]

    async def count(self, name: str, message: str) -> int:
        return len(await self.calls(name, message))

    @asynccontextmanager
    async def controller(
        self, api_client: Any = None, sender: TemporalSender | None = None, concurrency: int = 32
    ) -> AsyncIterator[InferenceServiceController]:
        controller = InferenceServiceController(
            api_client or self.sim.api_client(),
            sender or TemporalSender(self.client, self.task_queue),
            KubeWriter(api_client or self.sim.api_client()),
            coalesce_seconds=0.02,
            concurrency=concurrency,
        )
        await controller.start()
        try:
            await asyncio.wait_for(controller.wait_synced(), WAIT_SECONDS)
            yield controller
        finally:
            await controller.stop()


@asynccontextmanager
async def running_cluster(dev_client: Client, kubesim: KubeSim, task_queue: str) -> AsyncIterator[Cluster]:
    """A worker for the stand-in workflow around the cluster."""
    async with Worker(
        dev_client,
        task_queue=task_queue,
        workflows=[FakeInferenceService],
        workflow_runner=UnsandboxedWorkflowRunner(),
    ):
        yield Cluster(kubesim, dev_client, task_queue)


async def settled(controller: InferenceServiceController) -> None:
    """Let the controller finish what it was doing, and a little more (a resend would show)."""
    await until(controller.idle)
    await asyncio.sleep(0.3)
    await until(controller.idle)
