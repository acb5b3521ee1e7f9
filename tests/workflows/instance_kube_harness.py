"""Harness for Instance workflow tests with the real activities, kubesim and the watcher.

kubesim runs in real time and the test server skips time: `until_real` waits for what
kubesim does (no skipping happens while a test only queries), and `until_skipping` moves
workflow time forward on purpose, a step at a time, for deadlines and back-offs.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any
from uuid import uuid4

import kubernetes
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from kubesim.handle import KubeSim
from models.instance import InstanceSpec, InstanceStatus
from tests.fixtures.temporal import register_search_attributes
from tests.workflows.instance_harness import make_spec, start_instance
from workers.watch.pods import PodWatcher, TemporalSignalSink
from workers.worker import build_worker

Handle = WorkflowHandle[Any, InstanceStatus]


def pod_spec(image: str, gpus: int = 0) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "engine", "image": image}
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    # A short grace keeps deletes quick in kubesim's scaled time.
    return {"containers": [container], "terminationGracePeriodSeconds": 30}


class KubeHarness:
    def __init__(self, env: WorkflowEnvironment, sim: KubeSim, task_queue: str, namespace: str) -> None:
        self.env = env
        self.sim = sim
        self.task_queue = task_queue
        self.namespace = namespace

    def spec(self, image: str = "engine:1", workers: int = 0, **overrides: Any) -> InstanceSpec:
        values: dict[str, Any] = {
            "namespace": self.namespace,
            "leader_pod_spec": pod_spec(image),
            "worker_pod_spec": pod_spec(image) if workers else None,
            "drain_seconds": 2.0,
        }
        return make_spec(image, workers, **{**values, **overrides})

    async def start(self, spec: InstanceSpec, first: InstanceSpec | None = None) -> Handle:
        """Start `spec`'s Instance as its parent would; `first=spec` as runs of version 0 were."""
        return await start_instance(self.env, spec, self.task_queue, first)

    async def status(self, handle: Handle) -> InstanceStatus:
        return await handle.query("status", result_type=InstanceStatus)

    async def until_real(
        self, handle: Handle, test: Callable[[InstanceStatus], bool], within: float = 60.0
    ) -> InstanceStatus:
        """Wait in real time (no time skipping) until `test` holds."""
        deadline = time.monotonic() + within
        status = await self.status(handle)
        while not test(status):
            if time.monotonic() > deadline:
                raise AssertionError(f"not reached within {within:.0f}s; last status: {status}")
            await asyncio.sleep(0.1)
            status = await self.status(handle)
        return status

    async def until_skipping(
        self, handle: Handle, test: Callable[[InstanceStatus], bool], step: float = 10.0, within: float = 90.0
    ) -> InstanceStatus:
        """Alternate `step` seconds of skipped workflow time with a moment of real time."""
        deadline = time.monotonic() + within
        status = await self.status(handle)
        while not test(status):
            if time.monotonic() > deadline:
                raise AssertionError(f"not reached within {within:.0f}s; last status: {status}")
            await self.env.sleep(step)
            await asyncio.sleep(0.15)
            status = await self.status(handle)
        return status

    def pods(self) -> dict[str, dict[str, Any]]:
        return {p["metadata"]["name"]: p for p in self.sim.objects("", "pods", self.namespace)}

    def live_pods(self) -> dict[str, dict[str, Any]]:
        return {n: p for n, p in self.pods().items() if not p["metadata"].get("deletionTimestamp")}

    def serving_pods(self) -> list[str]:
        """Pods in rotation: Ready (containers and the ome.io/serving gate) and not terminating."""
        names = []
        for name, pod in self.live_pods().items():
            conditions = {c["type"]: c["status"] for c in (pod.get("status") or {}).get("conditions") or []}
            if conditions.get("Ready") == "True" and conditions.get("ome.io/serving") == "True":
                names.append(name)
        return names

    def events(self) -> list[str]:
        return [e.get("reason", "") for e in self.sim.objects("", "events", self.namespace)]


@asynccontextmanager
async def kube_harness(
    env: WorkflowEnvironment, sim: KubeSim, task_queue: str, extra_workflows: Sequence[type[Any]] = ()
) -> AsyncIterator[KubeHarness]:
    """A worker with the real activities (and `extra_workflows`, a stand-in parent say) and an
    in-process watcher around `sim`."""
    await register_search_attributes(env)
    namespace = f"inst-{uuid4().hex[:8]}"
    kubernetes.client.CoreV1Api(sim.api_client()).create_namespace({"metadata": {"name": namespace}})
    watcher = PodWatcher(sim.api_client(), TemporalSignalSink(env.client))
    await watcher.start()
    try:
        async with build_worker(env.client, task_queue, sim.api_client(), extra_workflows=extra_workflows):
            yield KubeHarness(env, sim, task_queue, namespace)
    finally:
        await watcher.stop()
