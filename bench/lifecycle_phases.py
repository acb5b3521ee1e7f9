"""The lifecycle bench's phases against the product: bring-up, update, pod failures, delete,
and what each is read by (kubesim's pods and request counters, the Temporal histories).

`bench.lifecycle_bench` runs them in order and prints the figures; each phase here returns
its measurement and leaves the printing to it.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowExecutionStatus

from bench.lifecycle_stack import (
    IMAGE_1,
    IMAGE_2,
    PodSnapshot,
    apply,
    isvc_manifest,
    observe_pods,
    poll_until,
)
from kubesim.handle import KubeSim
from workflows.names import instance_workflow_id, irep_workflow_id, isvc_workflow_id
from workflows.service.workflow import InferenceServiceWorkflow

NAMESPACE = "bench"
NAME = "lifecycle"
IDLE_NAME = "idle"
COMPONENT = "engine"
SAMPLE_SECONDS = 0.1
"""How often the update is sampled for the fewest serving Instances."""
FAILURE_POLL_SECONDS = 0.01
"""Resolution of the pod-failure latency."""
RECREATION_WITHIN = 30.0
"""A kill whose recreation has not started after this long is counted as missed."""


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


async def snapshot(sim: KubeSim, name: str = NAME, namespace: str = NAMESPACE) -> PodSnapshot:
    return await asyncio.to_thread(observe_pods, sim, namespace, name)


async def wait_for(what: str, probe: Callable[[], Any], within: float, every: float = SAMPLE_SECONDS) -> Any:
    return await poll_until(what, probe, within, every)


# --- the product ------------------------------------------------------------------------


async def isvc_ready(client: Client, name: str, instances: int, namespace: str = NAMESPACE) -> bool:
    view = await client.get_workflow_handle(isvc_workflow_id(namespace, name)).query(
        InferenceServiceWorkflow.status
    )
    ready = view.status.condition("Ready")
    engine = view.status.components.get(COMPONENT)
    lifecycle = engine.lifecycle if engine is not None else None
    return (
        ready is not None
        and ready.status == "True"
        and lifecycle is not None
        and lifecycle.ready_replicas == instances
        and lifecycle.current_revision == lifecycle.update_revision
    )


async def bring_up(
    client: Client,
    task_queue: str,
    sim: KubeSim,
    name: str,
    instances: int,
    within: float,
    namespace: str = NAMESPACE,
    at_serving: Callable[[], Any] = lambda: None,
) -> tuple[float, float]:
    """(seconds until kubesim shows N serving Instances, until the status query says Ready);
    `at_serving` is called at the first (the CPU meter's reading there)."""
    started = time.monotonic()
    await apply(client, task_queue, isvc_manifest(namespace, name, instances, IMAGE_1))

    async def settled() -> bool:
        return (await snapshot(sim, name, namespace)).settled_on(IMAGE_1, instances)

    await wait_for(f"{instances} Instances of {namespace}/{name} serving", settled, within)
    serving = time.monotonic() - started
    at_serving()
    await wait_for(f"{namespace}/{name} to report Ready", lambda: isvc_ready(client, name, instances, namespace),
                   within, every=0.25)  # fmt: skip
    return serving, time.monotonic() - started


async def update(
    client: Client, task_queue: str, sim: KubeSim, instances: int, within: float, namespace: str = NAMESPACE
) -> tuple[float, int]:
    """(seconds until every Instance serves the new image with one pod, fewest serving seen)."""
    started = time.monotonic()
    await apply(client, task_queue, isvc_manifest(namespace, NAME, instances, IMAGE_2))
    fewest = instances
    deadline = started + within
    while time.monotonic() < deadline:
        seen = await snapshot(sim, NAME, namespace)
        fewest = min(fewest, len(seen.serving_indexes()))
        if seen.settled_on(IMAGE_2, instances):
            return time.monotonic() - started, fewest
        await asyncio.sleep(SAMPLE_SECONDS)
    raise RuntimeError(f"the update did not finish within {within:.0f} s")


async def idle_bring_up(
    client: Client, task_queue: str, sim: KubeSim, instances: int, within: float
) -> tuple[float, int]:
    """Bring up the idle InferenceService; (seconds, Instances serving) once all serve or at `within`.

    Only kubesim is watched: the RSS figure needs the Instances Ready, not the status projection,
    which at this size trails the pods by minutes. Polled every second (a snapshot of thousands
    of pods costs CPU the bring-up would lose), then, once all but a few serve, as often as the
    N-Instance bring-up (`SAMPLE_SECONDS`): the two times are compared."""
    started = time.monotonic()
    await apply(client, task_queue, isvc_manifest(NAMESPACE, IDLE_NAME, instances, IMAGE_1))
    serving = 0
    while time.monotonic() - started < within:
        seen = await snapshot(sim, IDLE_NAME)
        if seen.settled_on(IMAGE_1, instances):
            return time.monotonic() - started, instances
        serving = len(seen.serving_indexes())
        await asyncio.sleep(SAMPLE_SECONDS if serving >= instances * 0.98 else 1.0)
    return time.monotonic() - started, serving


def instance_objects(isvc: str, namespace: str = NAMESPACE, component: str = COMPONENT) -> re.Pattern[str]:
    """What one Instance of the component makes, as kubesim's `by_object` names it: its headless
    Service `{isvc}-{component}-{index}` and its pods `{...}-{role}-{ordinal}`
    (`models.instance.InstanceSpec.instance_name`, `planning.instance.pods.pod_name`)."""
    return re.compile(rf"{re.escape(namespace)}/{re.escape(isvc)}-{re.escape(component)}-\d+(-[a-z]+-\d+)?")


def per_instance_requests(sim: KubeSim, instances: int, isvc: str = NAME) -> tuple[float, float, str]:
    """Requests per Instance since the last reset: all of them; the Instances' own, those that
    name one Instance's pod or Service (`instance_objects`); and the five busiest (verb, resource).

    The rest is no one Instance's: the leader Leases' renewals (by the clock), the service's
    and the InferenceReplica's objects and their paced status writes, the component Service,
    and the InferenceReplica's list of its pods before its starts."""
    counters = sim.counters()
    requests: dict[tuple[str, str], int] = counters["requests"]
    busiest = sorted(requests.items(), key=lambda item: -item[1])[:5]
    shown = ", ".join(f"{verb} {resource} {count / instances:.2f}" for (verb, resource), count in busiest)
    owned = instance_objects(isvc)
    own = sum(count for (_verb, _resource, name), count in counters["by_object"].items() if owned.fullmatch(name))
    return counters["total"] / instances, own / instances, shown


@dataclass
class PodFailures:
    """What `pod_failures` saw, per Instance killed and recreated: seconds from the kill to its
    recreation's first step and to serving again."""

    to_recreation: dict[int, float] = field(default_factory=dict)
    to_serving: dict[int, float] = field(default_factory=dict)
    killed: set[int] = field(default_factory=set)
    missed: set[int] = field(default_factory=set)
    """Killed Instances whose recreation never started (the container restarted in place)."""

    def slowest(self) -> str:
        """The Instance slowest to serve again, with both its times: where to look first."""
        index = max(self.to_serving, key=self.to_serving.__getitem__)
        return (
            f"Instance {index}: serving again after {self.to_serving[index]:.2f} s, "
            f"its recreation begun after {self.to_recreation[index] * 1000:.0f} ms"
        )


async def pod_failures(sim: KubeSim, instances: int, count: int, seed: int, within: float) -> PodFailures:
    """Kill one Instance's container at a time, and time its recreation and its serving again."""
    seen = PodFailures()
    to_recreation, to_serving, missed = seen.to_recreation, seen.to_serving, seen.missed
    seen.killed = set(random.Random(seed).sample(range(instances), min(count, instances)))
    for index in sorted(seen.killed):
        pods = [p for p in (await snapshot(sim)).live() if p.index == index and p.serving]
        if len(pods) != 1:
            raise RuntimeError(f"Instance {index} has {len(pods)} serving pods before its failure")
        victim = pods[0]
        started = time.monotonic()
        await asyncio.to_thread(sim.kill_pod, NAMESPACE, victim.name)

        async def recreating(uid: str = victim.uid) -> bool:
            current = {p.uid: p for p in (await snapshot(sim)).pods}
            pod = current.get(uid)
            return pod is None or pod.terminating or not pod.serving

        try:
            await wait_for(
                f"Instance {index} to start its recreation",
                recreating,
                RECREATION_WITHIN,
                FAILURE_POLL_SECONDS,
            )
        except TimeoutError:
            # The container restarted in place and the Instance did not recreate it: a finding
            # the figures report (as a count), not a reason to stop the bench.
            missed.add(index)
            continue
        to_recreation[index] = time.monotonic() - started

        async def serving_again(uid: str = victim.uid, index: int = index) -> bool:
            now = await snapshot(sim)
            return any(p.index == index and p.uid != uid for p in now.live()) and index in now.serving_indexes()

        await wait_for(f"Instance {index} to serve again", serving_again, within, FAILURE_POLL_SECONDS)
        to_serving[index] = time.monotonic() - started
    return seen


async def delete(client: Client, sim: KubeSim, within: float, namespace: str = NAMESPACE) -> float:
    started = time.monotonic()
    handle = client.get_workflow_handle(isvc_workflow_id(namespace, NAME))
    await handle.signal("delete")

    async def gone() -> bool:
        status = (await handle.describe()).status
        return status == WorkflowExecutionStatus.COMPLETED and not (await snapshot(sim, NAME, namespace)).pods

    await wait_for("the InferenceService to be deleted", gone, within, every=0.25)
    return time.monotonic() - started


async def events_at_serving(
    client: Client, instances: int, namespace: str = NAMESPACE, name: str = NAME, sample: int | None = None
) -> float:
    """Mean history events of the Instance workflows now (read from each one's mutable state:
    the visibility store's count of a running workflow lags); of `sample` of them, evenly
    spread, where given."""
    limit = asyncio.Semaphore(20)
    step = max(1, instances // sample) if sample else 1

    async def length(index: int) -> int:
        async with limit:
            handle = client.get_workflow_handle(instance_workflow_id(namespace, name, COMPONENT, index))
            described = await handle.describe()
            return int(described.raw_description.workflow_execution_info.history_length)

    lengths = await asyncio.gather(*(length(index) for index in range(0, instances, step)))
    return statistics.mean(lengths)


async def coordinator_events(client: Client, name: str, namespace: str = NAMESPACE) -> tuple[int, int]:
    """(events, runs) of the service's and its InferenceReplica's workflows, every run summed
    (the running run's count as visibility last saw it)."""
    ids = (isvc_workflow_id(namespace, name), irep_workflow_id(namespace, name, COMPONENT))
    events = runs = 0
    async for execution in client.list_workflows(f"WorkflowId IN ('{ids[0]}', '{ids[1]}')"):
        events += execution.history_length
        runs += 1
    return events, runs


async def history_events(client: Client, killed: set[int]) -> dict[str, float]:
    """Events of every run (continue-as-new included) of the bench's workflows, by kind."""
    instance_prefix = f"instance/{NAMESPACE}/{NAME}-engine-"
    per_instance: dict[int, int] = {}
    coordinators = 0
    async for execution in client.list_workflows(
        "WorkflowType IN ('Instance', 'InferenceReplica', 'InferenceService')"
    ):
        if execution.id.startswith(instance_prefix):
            index = int(execution.id.removeprefix(instance_prefix))
            per_instance[index] = per_instance.get(index, 0) + execution.history_length
        elif execution.id in (isvc_workflow_id(NAMESPACE, NAME), irep_workflow_id(NAMESPACE, NAME, COMPONENT)):
            coordinators += execution.history_length
    plain = [events for index, events in per_instance.items() if index not in killed]
    dump = os.environ.get("OME_BENCH_DUMP_HISTORY")
    if dump and plain:
        # One plain Instance's whole history, to read where its events go.
        index = next(index for index in per_instance if index not in killed)
        handle = client.get_workflow_handle(instance_workflow_id(NAMESPACE, NAME, COMPONENT, index))
        history = (await handle.fetch_history()).to_json()
        await asyncio.to_thread(Path(dump).write_text, history)
    restarted = [events for index, events in per_instance.items() if index in killed]
    return {
        "instance": statistics.mean(plain) if plain else 0.0,
        "instance_restarted": statistics.mean(restarted) if restarted else 0.0,
        "coordinators": coordinators / max(len(per_instance), 1),
    }


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered) + 0.5) - 1))]
