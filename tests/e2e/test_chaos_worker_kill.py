"""Two workers SIGKILLed one at a time at random moments during a SurgeThenDrain update of many Instances.

Issue 6 asks that killing the worker during the update of 200 Instances ends with exactly
200 Instances on the new revision, no duplicated or orphaned pods, and never fewer than 200
serving Instances at any moment (SurgeThenDrain puts the new pod into rotation before the
old one drains). Issue 17 runs the product as two worker processes on one task queue: the
kills alternate between them (one is killed, restarted and polling again before the other
is killed), so the survivor carries on while the victim's in-flight tasks wait for their
timeouts.

Each worker runs as its own process (`python -m workers`, configured through its
environment) so a SIGKILL is a real crash: in-flight workflow tasks and activities are lost
and Temporal hands them to a live worker after their timeouts. The watcher runs as its
own process too and is never killed. kubesim runs in this process with instant readiness and
is sampled every `SAMPLE_SECONDS` by reading its store on its own loop (no API request), so
the sampling neither slows the cluster down nor shows up in its request counters.

An Instance "serves" when one of its live pods (no deletionTimestamp) is Ready with the
`ome.io/serving` condition True; the count is per Instance index, so the surge pod and the
old pod of one Instance count once.

N is `INSTANCES`, the full 200. Most of the update is not N but the activities in flight at
the last kill: Temporal retries a Kubernetes call of the killed worker only after its heartbeat
timeout (15 s, `workflows.kube_calls.KUBE_HEARTBEAT`), and a workflow task after its own.
The bench (`bench/lifecycle_bench.py`) measures the same update without kills.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from uuid import uuid4

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.testing import WorkflowEnvironment

from bench.lifecycle_stack import (
    IMAGE_1,
    IMAGE_2,
    PodSnapshot,
    ProductProcess,
    apply,
    instant_kubesim,
    isvc_manifest,
    observe_pods,
    prepare_namespace,
    topology_for,
    watcher_process,
    worker_processes,
)
from kubesim.handle import KubeSim
from models.instance import InstanceStatus
from workflows.names import instance_workflow_id

pytestmark = pytest.mark.e2e

INSTANCES = 200
WORKERS = 2
KILLS = 5
"""Kill `k` hits worker `k % WORKERS`: 3 kills of the first worker, 2 of the second."""
SEED = 6_2026
NAME = "chaos"
SAMPLE_SECONDS = 0.15
KILL_AFTER_SECONDS = (0.3, 2.5)
"""A kill lands this long (uniformly drawn) after the previous victim was restarted, and not
before it is polling again."""
DOWN_SECONDS = (0.0, 1.0)
"""How long a killed worker stays dead before it is restarted."""
BRING_UP_WITHIN = 150.0
UPDATE_WITHIN = 240.0
STATUS_AGREES_WITHIN = 60.0


@pytest.fixture
def cluster() -> Iterator[KubeSim]:
    """kubesim with room for every Instance and its surge pod, and instant readiness."""
    sim = instant_kubesim(topology_for(INSTANCES * 2))
    try:
        yield sim
    finally:
        sim.stop()


@dataclass
class ServingRecord:
    """What the sampler saw while the update ran."""

    samples: int = 0
    fewest_serving: int | None = None
    fewest_at: PodSnapshot | None = None
    fewest_when: datetime | None = None
    """When that fewest sample was taken (UTC), to read against the Instances' histories."""
    most_live_per_instance: int = 0
    stray_pods: set[str] = field(default_factory=set)


async def sample_until(sim: KubeSim, namespace: str, record: ServingRecord, stop: asyncio.Event) -> None:
    while not stop.is_set():
        seen = await asyncio.to_thread(observe_pods, sim, namespace, NAME)
        record.samples += 1
        serving = len(seen.serving_indexes())
        if record.fewest_serving is None or serving < record.fewest_serving:
            record.fewest_serving, record.fewest_at, record.fewest_when = serving, seen, datetime.now(UTC)
        for index, pods in seen.live_by_index().items():
            if index is None or not 0 <= index < INSTANCES:
                record.stray_pods.update(pod.name for pod in pods)
            else:
                record.most_live_per_instance = max(record.most_live_per_instance, len(pods))
        try:
            await asyncio.wait_for(stop.wait(), SAMPLE_SECONDS)
        except TimeoutError:
            pass


async def history_lines(client: Client, workflow_id: str, moment: datetime | None) -> str:
    """Every run's events of `workflow_id`, one line each, timed against `moment`: what to read
    when an Instance stopped serving (a failure leaves no other trace of which step did it)."""
    lines = [f"--- {workflow_id}, times against the fewest-serving sample at {moment}"]
    async for execution in client.list_workflows(f"WorkflowId = '{workflow_id}'"):
        lines.append(f"run {execution.run_id} started {execution.start_time}")
        handle = client.get_workflow_handle(workflow_id, run_id=execution.run_id)
        async for event in handle.fetch_history_events():
            at = event.event_time.ToDatetime(tzinfo=UTC)
            offset = f"{(at - moment).total_seconds():+8.3f}s" if moment is not None else at.isoformat()
            detail = ""
            if event.HasField("workflow_execution_signaled_event_attributes"):
                detail = event.workflow_execution_signaled_event_attributes.signal_name
            elif event.HasField("activity_task_scheduled_event_attributes"):
                detail = event.activity_task_scheduled_event_attributes.activity_type.name
            elif event.HasField("timer_started_event_attributes"):
                detail = str(event.timer_started_event_attributes.start_to_fire_timeout.ToTimedelta())
            if event.user_metadata.HasField("summary"):
                detail += " " + event.user_metadata.summary.data.decode(errors="replace")
            lines.append(f"{event.event_id:4} {offset} {EventType.Name(event.event_type)} {detail}")
    return "\n".join(lines)


async def wait_settled(
    sim: KubeSim, namespace: str, image: str, within: float, workers: list[ProductProcess]
) -> float:
    started = time.monotonic()
    seen: PodSnapshot | None = None
    while time.monotonic() - started < within:
        seen = await asyncio.to_thread(observe_pods, sim, namespace, NAME)
        if seen.settled_on(image, INSTANCES):
            return time.monotonic() - started
        await asyncio.sleep(0.25)
    assert seen is not None
    unsettled = [
        (index, [(p.name, p.image.rsplit(":", 1)[-1], p.ready, p.serving, p.terminating) for p in pods])
        for index, pods in sorted(
            seen.live_by_index().items(), key=lambda item: (item[0] is None, item[0] or 0)
        )
        if index is None
        or len(pods) != 1
        or pods[0].image != image
        or not (pods[0].ready and pods[0].serving)
    ]
    raise AssertionError(
        f"{INSTANCES} Instances did not settle on {image} within {within:.0f} s; "
        f"{len(seen.pods)} pods, unsettled Instances: {unsettled[:10]}\n"
        + "\n".join(f"{worker.log.name} tail:\n{worker.tail(2000)}" for worker in workers)
    )


def update_finished(sim: KubeSim, namespace: str) -> bool:
    return observe_pods(sim, namespace, NAME).settled_on(IMAGE_2, INSTANCES)


async def test_two_workers_killed_one_at_a_time_during_update_keep_every_instance_serving(
    dev_server: WorkflowEnvironment, cluster: KubeSim, tmp_path: Path
) -> None:
    client = dev_server.client
    address = client.service_client.config.target_host
    task_queue = f"tq-{uuid4()}"
    namespace = f"chaos-{uuid4().hex[:8]}"
    workers = worker_processes(WORKERS, address, task_queue, cluster.kubeconfig_path, tmp_path)
    watcher = watcher_process(address, task_queue, cluster.kubeconfig_path, tmp_path / "watcher.log")
    prepare_namespace(cluster, namespace)
    for process in (*workers, watcher):
        process.start()
    try:
        await apply(client, task_queue, isvc_manifest(namespace, NAME, INSTANCES, IMAGE_1))
        await wait_settled(cluster, namespace, IMAGE_1, BRING_UP_WITHIN, workers)
        before = {
            p.index: p.uid for p in (await asyncio.to_thread(observe_pods, cluster, namespace, NAME)).pods
        }

        record = ServingRecord()
        stop = asyncio.Event()
        sampler = asyncio.create_task(sample_until(cluster, namespace, record, stop))
        started = time.monotonic()
        kill_moments: list[tuple[str, float]] = []
        try:
            result = await apply(client, task_queue, isvc_manifest(namespace, NAME, INSTANCES, IMAGE_2))
            assert result.changed and result.generation == 2
            rng = random.Random(SEED)
            restarting: asyncio.Future[None] | None = None
            for kill in range(KILLS):
                victim = workers[kill % WORKERS]
                # The pause runs while the previous victim starts again; the kill waits for both,
                # so only one worker is ever down.
                await asyncio.gather(asyncio.sleep(rng.uniform(*KILL_AFTER_SECONDS)), restarting or asyncio.sleep(0))
                assert not await asyncio.to_thread(update_finished, cluster, namespace), (
                    f"the update finished {time.monotonic() - started:.1f} s in, before kill "
                    f"{len(kill_moments) + 1}: the kills must land during the update"
                )
                victim.kill()
                kill_moments.append((victim.log.stem, round(time.monotonic() - started, 1)))
                await asyncio.sleep(rng.uniform(*DOWN_SECONDS))
                assert all(other.process is not None and other.process.poll() is None
                           for other in workers if other is not victim), "a second worker died"  # fmt: skip
                restarting = asyncio.ensure_future(asyncio.to_thread(victim.start))
            if restarting is not None:
                await restarting
            took = await wait_settled(cluster, namespace, IMAGE_2, UPDATE_WITHIN, workers)
        finally:
            stop.set()
            await sampler

        assert [worker.starts for worker in workers] == [
            1 + len(range(index, KILLS, WORKERS)) for index in range(WORKERS)
        ], "each worker is killed and restarted in turn"
        fewest_at = record.fewest_at or PodSnapshot(())
        not_serving = sorted(set(range(INSTANCES)) - fewest_at.serving_indexes())
        if record.fewest_serving != INSTANCES:
            for index in not_serving:  # what each Instance's workflow did around that moment
                print(await history_lines(client, instance_workflow_id(namespace, NAME, "engine", index), record.fewest_when))
        assert record.fewest_serving == INSTANCES, (
            f"only {record.fewest_serving} of {INSTANCES} Instances served at one moment (kills at {kill_moments} s); "
            f"not serving then: {not_serving}; their pods then (name, uid, image, Ready, serving, terminating): "
            + "; ".join(
                f"{pod.index}: {pod.name} {pod.uid[:8]} {pod.image} {pod.ready} {pod.serving} {pod.terminating}"
                for pod in fewest_at.pods if pod.index in not_serving
            )
        )
        assert record.samples > 10, "the sampler must have watched the update"
        assert record.most_live_per_instance <= 2, "an Instance had more than its pod and one surge pod"
        assert not record.stray_pods, (
            f"pods outside Instances 0..{INSTANCES - 1}: {sorted(record.stray_pods)}"
        )
        await assert_exactly_the_new_revision(client, cluster, namespace, before)
        print(
            f"update of {INSTANCES} Instances with kills at {kill_moments} s settled {took:.1f} s after the last restart"
        )
    finally:
        for worker in workers:
            worker.kill()
        watcher.stop(within=10)


async def assert_exactly_the_new_revision(
    client: Client, sim: KubeSim, namespace: str, before: dict[int | None, str]
) -> None:
    """One live pod per Instance, each the one its Instance workflow owns, all on the new revision."""
    seen = await asyncio.to_thread(observe_pods, sim, namespace, NAME)
    assert seen.settled_on(IMAGE_2, INSTANCES)
    assert all(pod.uid != before.get(pod.index) for pod in seen.pods), "an old pod survived the update"
    running = [
        execution.id
        async for execution in client.list_workflows(
            "WorkflowType = 'Instance' AND ExecutionStatus = 'Running'"
        )
        if execution.id.startswith(f"instance/{namespace}/")
    ]
    assert sorted(running) == sorted(
        instance_workflow_id(namespace, NAME, "engine", i) for i in range(INSTANCES)
    )

    async def owned(index: int) -> InstanceStatus:
        handle = client.get_workflow_handle(instance_workflow_id(namespace, NAME, "engine", index))
        status: InstanceStatus = await handle.query("status", result_type=InstanceStatus)
        return status

    pods = {pod.index: pod.name for pod in seen.pods}

    def disagreement(status: InstanceStatus) -> str | None:
        if status.running_revision != status.target_revision or not status.serving:
            return f"Instance {status.index} runs {status.running_revision}, target {status.target_revision}"
        if status.pod_names != [pods[status.index]]:
            return f"Instance {status.index} owns {status.pod_names} but kubesim holds {pods[status.index]}"
        return None

    # kubesim settles a moment before each Instance commits its update (it still confirms the old
    # pod is gone), so the workflows get a while to agree; a stuck one fails the test.
    deadline = time.monotonic() + STATUS_AGREES_WITHIN
    while True:
        statuses = await asyncio.gather(*(owned(index) for index in range(INSTANCES)))
        problems = [problem for status in statuses if (problem := disagreement(status))]
        targets = {status.target_revision for status in statuses}
        if not problems and len(targets) == 1:
            break
        assert time.monotonic() < deadline, (
            f"{len(problems)} Instance workflows disagree with kubesim {STATUS_AGREES_WITHIN:.0f} s after it "
            f"settled: {problems[:5]}; target revisions {targets}"
        )
        await asyncio.sleep(1.0)
    description = await client.get_workflow_handle(f"isvc/{namespace}/{NAME}").describe()
    assert description.status == WorkflowExecutionStatus.RUNNING
