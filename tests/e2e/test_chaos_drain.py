"""A node drained with the `temporal` CLI while the worker is SIGKILLed five times.

Issue 13: drain a node that holds 3 Instances of a 6-Instance service; serving Instances are
never fewer than 6 (sampled every 100 ms from kubesim's store), the node ends with none of the
product's pods and stays cordoned until `release`; killing the worker at least five times
during the drain ends in the same state as a drain nobody disturbs.

The worker and the watcher run as their own processes (`bench.lifecycle_stack`), so a SIGKILL
is a real crash; kubesim runs in this process with instant readiness. The drain is started and
released with the `temporal` binary, as an operator would. A kill that lands during a
Kubernetes call costs that call's heartbeat timeout (15 s) and one during the drain's own
activities their start-to-close (30 s) before Temporal retries them, so the test takes one to
three minutes depending on where the kills land.
"""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from uuid import uuid4

import pytest
from temporalio.testing import WorkflowEnvironment

from bench.lifecycle_stack import (
    IMAGE_1,
    PodSnapshot,
    ProductProcess,
    apply,
    instant_kubesim,
    isvc_manifest,
    observe_pods,
    prepare_namespace,
    watcher_process,
    worker_process,
)
from kubesim.handle import KubeSim
from tests.e2e.running_stack import TEMPORAL_CLI
from workflows.names import drain_workflow_id

pytestmark = pytest.mark.e2e

INSTANCES = 6
ON_NODE = 3
KILLS = 5
SEED = 13_2026
NAME = "drain"
SAMPLE_SECONDS = 0.1
KILL_AFTER_SECONDS = (0.3, 1.5)
DOWN_SECONDS = (0.0, 0.8)
DRAIN_WITHIN = 420.0


@pytest.fixture
def cluster() -> Iterator[KubeSim]:
    """Four 8-GPU nodes in one zone, instant readiness."""
    sim = instant_kubesim("zones=1,nodes-per-zone=4,gpus=8")
    try:
        yield sim
    finally:
        sim.stop()


@dataclass
class Serving:
    samples: int = 0
    fewest: int | None = None
    fewest_at: PodSnapshot | None = None
    most_live: int = 0
    counts: Counter[int] = field(default_factory=Counter)


async def sample(sim: KubeSim, namespace: str, record: Serving, stop: asyncio.Event) -> None:
    while not stop.is_set():
        seen = await asyncio.to_thread(observe_pods, sim, namespace, NAME)
        record.samples += 1
        serving = len(seen.serving_indexes())
        record.counts[serving] += 1
        if record.fewest is None or serving < record.fewest:
            record.fewest, record.fewest_at = serving, seen
        record.most_live = max(record.most_live, sum(len(p) for p in seen.live_by_index().values()))
        try:
            await asyncio.wait_for(stop.wait(), SAMPLE_SECONDS)
        except TimeoutError:
            pass


def temporal(address: str, *args: str) -> str:
    done = subprocess.run(
        [str(TEMPORAL_CLI), *args, "--address", address], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, f"temporal {' '.join(args)} failed: {done.stderr}"
    return done.stdout


def drain_status(address: str, node: str) -> dict[str, object]:
    out = temporal(address, "workflow", "query", "--workflow-id", drain_workflow_id(node), "--name", "status",
                   "--output", "json")
    answer = json.loads(out)
    result = answer["queryResult"][0] if "queryResult" in answer else answer
    assert isinstance(result, dict)
    return result


def pods_on(sim: KubeSim, namespace: str, node: str) -> list[str]:
    return [p["metadata"]["name"] for p in sim.objects("", "pods", namespace) if p["spec"].get("nodeName") == node]


def unschedulable(sim: KubeSim, node: str) -> bool:
    found = next(n for n in sim.objects("", "nodes") if n["metadata"]["name"] == node)
    return bool((found.get("spec") or {}).get("unschedulable"))


async def settled(sim: KubeSim, namespace: str, count: int, worker: ProductProcess) -> None:
    deadline = time.monotonic() + 120
    while not (await asyncio.to_thread(observe_pods, sim, namespace, NAME)).settled_on(IMAGE_1, count):
        assert time.monotonic() < deadline, f"{count} Instances did not come up\n{worker.tail()}"
        await asyncio.sleep(0.25)


async def bring_up(client: object, sim: KubeSim, task_queue: str, namespace: str, worker: ProductProcess) -> str:
    """Six Instances, three on one node: kubesim packs pods, so the first three come up with only
    that node schedulable and the other three with only a second one; returns the first."""
    nodes = sorted(n["metadata"]["name"] for n in sim.objects("", "nodes"))
    first, second = nodes[0], nodes[1]
    for other in nodes[1:]:
        sim.cordon_node(other)
    await apply(client, task_queue, isvc_manifest(namespace, NAME, ON_NODE, IMAGE_1))  # type: ignore[arg-type]
    await settled(sim, namespace, ON_NODE, worker)
    sim.cordon_node(first)
    sim.uncordon_node(second)
    await apply(client, task_queue, isvc_manifest(namespace, NAME, INSTANCES, IMAGE_1))  # type: ignore[arg-type]
    await settled(sim, namespace, INSTANCES, worker)
    for node in nodes:
        sim.uncordon_node(node)
    per_node = Counter(p["spec"]["nodeName"] for p in sim.objects("", "pods", namespace))
    assert per_node[first] == ON_NODE, f"the Instances landed {dict(per_node)}; the test needs 3 on {first}"
    return first


async def drain_with_kills(
    env: WorkflowEnvironment, sim: KubeSim, tmp_path: Path, kills: int
) -> tuple[Serving, list[float], str, str]:
    client = env.client
    address = client.service_client.config.target_host
    task_queue = f"tq-{uuid4()}"
    namespace = f"drain-{uuid4().hex[:8]}"
    worker = worker_process(address, task_queue, sim.kubeconfig_path, tmp_path / f"worker-{kills}.log")
    watcher = watcher_process(address, task_queue, sim.kubeconfig_path, tmp_path / f"watcher-{kills}.log")
    prepare_namespace(sim, namespace)
    worker.start()
    watcher.start()
    try:
        node = await bring_up(client, sim, task_queue, namespace, worker)
        record, stop = Serving(), asyncio.Event()
        sampler = asyncio.create_task(sample(sim, namespace, record, stop))
        started = time.monotonic()
        moments: list[float] = []
        try:
            temporal(
                address, "workflow", "start", "--type", "Drain", "--task-queue", task_queue,
                "--workflow-id", drain_workflow_id(node),
                "--input", json.dumps({"node": node, "reason": "kernel upgrade"}),
            )
            rng = random.Random(SEED)
            for _ in range(kills):
                await asyncio.sleep(rng.uniform(*KILL_AFTER_SECONDS))
                assert pods_on(sim, namespace, node), (
                    f"the node was empty {time.monotonic() - started:.1f} s in, before kill {len(moments) + 1}"
                )
                worker.kill()
                moments.append(round(time.monotonic() - started, 1))
                await asyncio.sleep(rng.uniform(*DOWN_SECONDS))
                await asyncio.to_thread(worker.start)
            while drain_status(address, node)["phase"] != "Drained":
                assert time.monotonic() - started < DRAIN_WITHIN, (
                    f"not drained after {DRAIN_WITHIN:.0f} s: {drain_status(address, node)}\n{worker.tail()}"
                )
                await asyncio.sleep(0.5)
            # Held: still cordoned a while later, with none of the product's pods.
            await asyncio.sleep(2)
        finally:
            stop.set()
            await sampler
        assert drain_status(address, node)["phase"] == "Drained"
        assert unschedulable(sim, node), "the drained node must stay cordoned until release"
        assert pods_on(sim, namespace, node) == []
        temporal(address, "workflow", "signal", "--workflow-id", drain_workflow_id(node), "--name", "release")
        result = temporal(address, "workflow", "result", "--workflow-id", drain_workflow_id(node))
        assert "Released" in result, result
        assert not unschedulable(sim, node), "release uncordons the node"
        end = await asyncio.to_thread(observe_pods, sim, namespace, NAME)
        by_index = end.live_by_index()
        assert len(end.pods) == INSTANCES and all(len(p) == 1 for p in by_index.values()), (
            f"one pod per Instance and nothing left over: {end.pods}"
        )
        assert len(end.serving_indexes(IMAGE_1)) == INSTANCES, "six Instances serve"
        # Which indexes the replacements took is timing (a migration's surge takes the lowest
        # index free at that moment, and an earlier migration may just have freed one), so the
        # verdict counts distinct Instances, not how many landed above the original range.
        verdict = (
            f"{len(end.serving_indexes())} serving, {len(end.pods)} pods, {len(by_index)} Instances, "
            f"{len(pods_on(sim, namespace, node))} on the drained node"
        )
        return record, moments, node, verdict
    finally:
        worker.kill()
        watcher.stop(within=10)


async def test_a_drain_with_the_worker_killed_five_times_ends_as_an_undisturbed_one(
    dev_server: WorkflowEnvironment, cluster: KubeSim, tmp_path: Path
) -> None:
    calm, _, calm_node, calm_end = await drain_with_kills(dev_server, cluster, tmp_path, 0)
    chaos, moments, node, chaos_end = await drain_with_kills(dev_server, cluster, tmp_path, KILLS)
    for name, record in (("undisturbed", calm), ("killed", chaos)):
        assert record.samples > 10, f"the sampler must have watched the {name} drain"
        assert record.fewest == INSTANCES, (
            f"{name}: only {record.fewest} of {INSTANCES} Instances served at one moment; "
            f"serving counts seen: {dict(record.counts)}"
        )
        assert record.most_live <= INSTANCES + 1, f"{name}: more than one replacement at a time"
    assert len(moments) == KILLS
    assert chaos_end.replace(node, "X") == calm_end.replace(calm_node, "X")
    print(f"drain with kills at {moments} s ended as the undisturbed one: {chaos_end}")
