"""The worker SIGKILLed at random moments during a blue-green rollout group's run.

Seed 004's mistral-pd with 4 engines and 2 decoders in one blue-green group (the router in
none): a change of image and of pairing protocol (kv-v1 -> kv-v2) opens a `Rollout` run that
moves both components in waves of 25%. The worker process is killed five times while the run
moves them. It must end with every engine and decoder Instance on the new image, the router
untouched, no duplicated or orphaned pods, never fewer than the desired Instances of a
component serving (blue-green under SurgeThenDrain brings each new Instance into rotation
before its old one drains), an engine and a decoder of the same token serving in every
sample, and the run completed.

As in `test_chaos_worker_kill.py`, the worker runs as its own process so a SIGKILL is a real
crash, the watcher runs beside it and is never killed, and kubesim is sampled on its own loop.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from uuid import uuid4

import kubernetes
import pytest
from temporalio.testing import WorkflowEnvironment

from bench.lifecycle_stack import (
    IMAGE_1,
    IMAGE_2,
    PodSnapshot,
    apply,
    observe_pods,
    topology_for,
    watcher_process,
    worker_process,
)
from kubesim.handle import KubeSim
from kubesim.timing import Timing
from tests.workflows.rollout_examples import NAME, pd_manifest, pd_runtime
from workflows.names import rollout_workflow_id
from workflows.rollout.messages import RolloutView

pytestmark = pytest.mark.e2e

DESIRED = {"engine": 4, "decoder": 2, "router": 1}
KILLS = 5
SEED = 4_2026
KILL_AFTER_SECONDS = (0.2, 1.2)
DOWN_SECONDS = (0.0, 0.8)
SETTLE_WITHIN = 180.0
KV_V1 = {"pairingProtocol": "kv-v1", "groups": [{"components": ["engine", "decoder"], "blueGreen": {}}]}
KV_V2 = {"pairingProtocol": "kv-v2", "groups": [{"components": ["engine", "decoder"], "blueGreen": {}}]}
"""The rolled-out change moves the pairing protocol too, so the pairing invariant is at stake."""


@pytest.fixture
def cluster() -> Iterator[KubeSim]:
    sim = KubeSim(topology=topology_for(32), crds="product", timing=Timing.fast()).start()
    # Each new Instance takes a moment to become ready, so the run spans the kills.
    sim.set_default_timing(pull_seconds=0.0, start_seconds=0.0, ready_seconds=0.3, factor=1.0)
    try:
        yield sim
    finally:
        sim.stop()


def prepare(sim: KubeSim, namespace: str) -> None:
    api = sim.api_client()
    kubernetes.client.CoreV1Api(api).create_namespace({"metadata": {"name": namespace}})
    runtime = pd_runtime()
    runtime["metadata"]["namespace"] = namespace
    kubernetes.client.CustomObjectsApi(api).create_namespaced_custom_object(
        "ome.io", "v1beta1", namespace, "servingruntimes", runtime
    )
    api.close()


def settled(seen: PodSnapshot, images: dict[str, str]) -> bool:
    return all(seen.of(c).settled_on(image, DESIRED[c]) for c, image in images.items())


async def until_settled(sim: KubeSim, namespace: str, images: dict[str, str], within: float) -> None:
    deadline = time.monotonic() + within
    while not settled(await asyncio.to_thread(observe_pods, sim, namespace, NAME), images):
        assert time.monotonic() < deadline, f"not settled on {images} within {within:.0f} s"
        await asyncio.sleep(0.2)


class RolloutSampler:
    """Samples the pods every 0.1 s while a run moves the group (kubesim's store, no request):
    the fewest Instances of each component serving at once, the most live pods of one
    Instance, no pod outside a component's Instance indexes, and the samples in which no
    engine and decoder of one pairing-protocol token served together. A subclass looks at
    each snapshot too by overriding `observe` (`test_chaos_canary.py`)."""

    def __init__(self, sim: KubeSim, namespace: str, desired: Mapping[str, int] = DESIRED) -> None:
        self.sim, self.namespace = sim, namespace
        self.desired = dict(desired)
        self.fewest = dict(desired)
        self.most_live = 0
        self.samples = 0
        self.unpaired: list[tuple[set[str], set[str]]] = []
        self.stop = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def run(self) -> None:
        while not self.stop.is_set():
            seen = await asyncio.to_thread(observe_pods, self.sim, self.namespace, NAME)
            self.samples += 1
            self.observe(seen)
            await asyncio.sleep(0.1)

    def observe(self, seen: PodSnapshot) -> None:
        engines, decoders = seen.of("engine").serving_tokens(), seen.of("decoder").serving_tokens()
        if not engines & decoders:
            self.unpaired.append((engines, decoders))
        for component, desired in self.desired.items():
            mine = seen.of(component)
            self.fewest[component] = min(self.fewest[component], len(mine.serving_indexes()))
            for index, pods in mine.live_by_index().items():
                assert index is not None and 0 <= index < desired, f"stray {component} pods {pods}"
                self.most_live = max(self.most_live, len(pods))

    async def __aenter__(self) -> RolloutSampler:
        self.task = asyncio.create_task(self.run())
        return self

    async def __aexit__(self, *_: object) -> None:
        self.stop.set()
        assert self.task is not None
        await self.task

    def check(self) -> None:
        """Blue-green under SurgeThenDrain: never fewer serving than desired, at most one surge pod."""
        assert self.fewest == self.desired, f"fewer Instances served than desired at one moment: {self.fewest}"
        assert self.most_live <= 2, "an Instance had more than its pod and one surge pod"
        assert self.samples > 20, f"only {self.samples} samples: the sampler missed the run"
        assert not self.unpaired, f"no same-token engine+decoder pair served in {len(self.unpaired)} samples: {self.unpaired[:3]}"

    def check_tokens(self, seen: PodSnapshot) -> None:
        """The run ended on kv-v2: every engine and decoder pod carries it."""
        for component in ("engine", "decoder"):
            assert {p.pairing for p in seen.of(component).pods} == {"kv-v2"}, f"{component} not all on kv-v2"


async def test_worker_killed_five_times_during_a_blue_green_run(
    dev_server: WorkflowEnvironment, cluster: KubeSim, tmp_path: Path
) -> None:
    client = dev_server.client
    address = client.service_client.config.target_host
    task_queue = f"tq-{uuid4()}"
    namespace = f"chaos-pd-{uuid4().hex[:8]}"
    worker = worker_process(address, task_queue, cluster.kubeconfig_path, tmp_path / "worker.log")
    watcher = watcher_process(address, task_queue, cluster.kubeconfig_path, tmp_path / "watcher.log")
    prepare(cluster, namespace)
    worker.start()
    watcher.start()
    try:
        await apply(client, task_queue, pd_manifest(namespace, KV_V1, IMAGE_1, (4, 2)))
        await until_settled(cluster, namespace, {"engine": IMAGE_1, "decoder": IMAGE_1}, SETTLE_WITHIN)
        router_before = {p.uid for p in (await asyncio.to_thread(observe_pods, cluster, namespace, NAME)).of("router").pods}

        async with RolloutSampler(cluster, namespace) as sampler:
            changed = await apply(client, task_queue, pd_manifest(namespace, KV_V2, IMAGE_2, (4, 2)))
            assert changed.generation == 2
            rng = random.Random(SEED)
            for kill in range(KILLS):
                await asyncio.sleep(rng.uniform(*KILL_AFTER_SECONDS))
                seen = await asyncio.to_thread(observe_pods, cluster, namespace, NAME)
                assert not settled(seen, {"engine": IMAGE_2, "decoder": IMAGE_2}), (
                    f"the run finished before kill {kill + 1}: the kills must land during it"
                )
                worker.kill()
                await asyncio.sleep(rng.uniform(*DOWN_SECONDS))
                await asyncio.to_thread(worker.start)
            await until_settled(cluster, namespace, {"engine": IMAGE_2, "decoder": IMAGE_2}, SETTLE_WITHIN)

        assert worker.starts == KILLS + 1
        sampler.check()
        after = await asyncio.to_thread(observe_pods, cluster, namespace, NAME)
        assert {p.uid for p in after.of("router").pods} == router_before, "the router is in no group: untouched"
        sampler.check_tokens(after)
        run = client.get_workflow_handle(rollout_workflow_id(namespace, NAME, 2), result_type=RolloutView)
        result = await asyncio.wait_for(run.result(), 60)
        assert result.outcome == "Completed"
    finally:
        worker.kill()
        watcher.stop(within=10)
