"""Idle cost bench: what N Ready Instances that nobody touches cost Temporal and Kubernetes.

    .venv/bin/python -m bench.idle_cost [--actions 20,200] [--idle 2000] [--window 300] [--quick]

(a) Temporal actions per idle Ready Instance per hour, on the time-skipping server: an
    InferenceService of N single-pod Instances on kubesim (instant readiness, the real
    activities and the real pod watcher in this process) goes Ready; then every workflow's
    history (InferenceService, InferenceReplica, each Instance, across continue-as-new) is
    counted before and after `env.sleep(3600)`. Actions are the events Temporal bills for:
    activities scheduled, timers started, signals received and sent (each side counts, so
    the figure errs high), child workflows started and local activity markers.
(b) Kubernetes requests per second while M Ready Instances idle, in real time on a real dev
    server with the product's worker and watcher processes: kubesim's request counter over
    `window` seconds, after the bring-up has settled.

`bench/lifecycle_bench.py` calls `idle_actions` and `idle_requests`; figures are printed,
never asserted (`tests/workflows/test_idle_cost.py` asserts the bound).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from uuid import uuid4

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from bench.lifecycle_stack import (
    IMAGE_1,
    apply,
    instant_kubesim,
    isvc_manifest,
    observe_pods,
    poll_until,
    prepare_namespace,
    topology_for,
    watcher_process,
    worker_process,
)
from kubesim.handle import KubeSim
from workers.watch.pods import PodWatcher, TemporalSignalSink
from workers.worker import build_worker
from workflows.names import instance_workflow_id, irep_workflow_id, isvc_workflow_id

NAMESPACE = "idle"
NAME = "idle"
COMPONENT = "engine"
HOUR = 3600.0

ACTION_EVENTS = {
    EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED: "activity",
    EventType.EVENT_TYPE_TIMER_STARTED: "timer",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED: "signal received",
    EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED: "signal sent",
    EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED: "child start",
}
LOCAL_ACTIVITY_MARKER = "core_local_activity"
SLEEP_STEP_SECONDS = 300.0


@dataclass
class IdleActions:
    instances: int
    seconds: float
    by_kind: dict[str, int]
    by_workflow: dict[str, int]
    """Actions per workflow type: Instance, InferenceReplica, InferenceService."""

    @property
    def total(self) -> int:
        return sum(self.by_kind.values())

    @property
    def per_instance_hour(self) -> float:
        return self.total / self.instances * (HOUR / self.seconds)

    def line(self) -> str:
        kinds = ", ".join(f"{kind} {count}" for kind, count in sorted(self.by_kind.items()))
        owners = ", ".join(f"{owner} {count}" for owner, count in sorted(self.by_workflow.items()))
        return (
            f"{self.instances} idle Ready Instances, {self.seconds / 60:.0f} simulated min: "
            f"{self.per_instance_hour:.2f} actions / Instance / hour ({self.total} in all: {kinds}; {owners})"
        )


def workflow_ids(instances: int, namespace: str = NAMESPACE, name: str = NAME) -> dict[str, str]:
    """Every workflow of the service: id -> type."""
    ids = {isvc_workflow_id(namespace, name): "InferenceService"}
    ids[irep_workflow_id(namespace, name, COMPONENT)] = "InferenceReplica"
    for index in range(instances):
        ids[instance_workflow_id(namespace, name, COMPONENT, index)] = "Instance"
    return ids


async def history_actions(client: Client, workflow_id: str, after: tuple[str, int] | None) -> tuple[tuple[str, int], dict[str, int]]:
    """Actions in the history of `workflow_id` past `after` ((run id, last event id) of an
    earlier look), following continue-as-new; returns where it stands now and the counts."""
    counts: dict[str, int] = {}
    run_id, last = after if after is not None else (None, 0)
    while True:
        handle = client.get_workflow_handle(workflow_id, run_id=run_id)
        history = await handle.fetch_history()
        run_id = run_id or history.run_id
        next_run: str | None = None
        for event in history.events:
            if event.event_id <= last:
                continue
            kind = ACTION_EVENTS.get(event.event_type)
            if kind is None and event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED:
                if event.marker_recorded_event_attributes.marker_name == LOCAL_ACTIVITY_MARKER:
                    kind = "local activity"
            if kind is not None:
                counts[kind] = counts.get(kind, 0) + 1
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
                next_run = event.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
        last_id = history.events[-1].event_id if history.events else last
        if next_run is None:
            return (run_id, last_id), counts
        run_id, last = next_run, 0


async def count_actions(
    client: Client, ids: dict[str, str], marks: dict[str, tuple[str, int]] | None
) -> tuple[dict[str, tuple[str, int]], dict[str, int], dict[str, int]]:
    """(marks, actions by kind, actions by workflow type) since `marks` (None: since start)."""
    new_marks: dict[str, tuple[str, int]] = {}
    by_kind: dict[str, int] = {}
    by_workflow: dict[str, int] = {}
    for workflow_id, kind_of_workflow in ids.items():
        mark, counts = await history_actions(client, workflow_id, (marks or {}).get(workflow_id))
        new_marks[workflow_id] = mark
        for kind, count in counts.items():
            by_kind[kind] = by_kind.get(kind, 0) + count
            by_workflow[kind_of_workflow] = by_workflow.get(kind_of_workflow, 0) + count
    return new_marks, by_kind, by_workflow


async def service_ready(client: Client, sim: KubeSim, instances: int, namespace: str = NAMESPACE, name: str = NAME) -> bool:
    """Every Instance serves in kubesim and reports Ready to its InferenceReplica."""
    if not observe_pods(sim, namespace, name).settled_on(IMAGE_1, instances):
        return False
    from workflows.replica.workflow import InferenceReplicaWorkflow

    status = await client.get_workflow_handle(irep_workflow_id(namespace, name, COMPONENT)).query(
        InferenceReplicaWorkflow.status
    )
    return status.ready_replicas == instances and status.updated_replicas == instances


@contextlib.asynccontextmanager
async def in_process_watcher(client: Client, sim: KubeSim) -> AsyncIterator[PodWatcher]:
    """The product's pod watcher, as `python -m workers.watcher` runs it, in this process."""
    watcher = PodWatcher(sim.api_client(), TemporalSignalSink(client))
    await watcher.start()
    try:
        yield watcher
    finally:
        await watcher.stop()


async def measure_idle_actions(
    env: WorkflowEnvironment, sim: KubeSim, instances: int, *, idle_seconds: float = HOUR,
    within: float = 600.0, namespace: str = NAMESPACE,
) -> IdleActions:  # fmt: skip
    """On a time-skipping `env` with a running kubesim: bring up `instances` Instances, let
    them go Ready, then count every workflow's actions over `idle_seconds` of skipped time."""
    client = env.client
    task_queue = f"idle-{uuid4().hex[:8]}"
    prepare_namespace(sim, namespace)
    manifest = isvc_manifest(namespace, NAME, instances, IMAGE_1)
    async with build_worker(client, task_queue, sim.api_client()), in_process_watcher(client, sim) as watcher:
        await apply(client, task_queue, manifest)
        await poll_until(
            f"{instances} Instances Ready", lambda: service_ready(client, sim, instances, namespace), within, 0.5
        )
        ids = workflow_ids(instances, namespace)
        # Whatever the bring-up left in flight (the last reports, status writes, the progress the
        # watcher still holds back for a moment of real time) settles first.
        await poll_until("the watcher to send what it held back", watcher.quiet, within, 0.2)
        await env.sleep(60)
        marks, _, _ = await count_actions(client, ids, None)
        # In steps: one skip of an hour must otherwise wait out, in one RPC, every real-time
        # activity the hour's timers start (200 Instances re-listing every 5 minutes, before).
        slept = 0.0
        while slept < idle_seconds:
            step = min(SLEEP_STEP_SECONDS, idle_seconds - slept)
            await env.sleep(step)
            slept += step
        _, by_kind, by_workflow = await count_actions(client, ids, marks)
        for workflow_id in ids:
            with contextlib.suppress(Exception):
                await client.get_workflow_handle(workflow_id).terminate("idle bench done")
    return IdleActions(instances, idle_seconds, by_kind, by_workflow)


async def idle_actions(instances: int, test_server: str | None = None) -> IdleActions:
    """(a) on a fresh time-skipping server and kubesim of its own."""
    from tests.fixtures.temporal import register_search_attributes, start_time_skipping

    env = await start_time_skipping(test_server)
    sim = instant_kubesim(topology_for(instances))
    try:
        await register_search_attributes(env)
        return await measure_idle_actions(env, sim, instances)
    finally:
        sim.stop()
        await env.shutdown()


@dataclass
class IdleRequests:
    instances: int
    ready: int
    window: float
    requests: int
    busiest: str

    @property
    def per_second(self) -> float:
        return self.requests / self.window

    def line(self) -> str:
        return (
            f"{self.ready}/{self.instances} idle Ready Instances over {self.window:.0f} s: "
            f"{self.per_second:.3f} Kubernetes requests/s ({self.requests} requests; {self.busiest})"
        )


async def idle_requests(
    client: Client, sim: KubeSim, task_queue: str, instances: int, window: float, within: float,
    namespace: str = NAMESPACE, settle: float = 15.0,
) -> IdleRequests:  # fmt: skip
    """(b) with a worker and watcher already serving `task_queue` against `sim`: bring up
    `instances` Instances, wait `settle` seconds once they serve, then count kubesim's
    requests (worker and watcher, every verb) over `window` seconds of real time."""
    prepare_namespace(sim, namespace)
    await apply(client, task_queue, isvc_manifest(namespace, NAME, instances, IMAGE_1))
    started = time.monotonic()
    ready = 0
    while time.monotonic() - started < within:
        seen = observe_pods(sim, namespace, NAME)
        ready = len(seen.serving_indexes())
        if seen.settled_on(IMAGE_1, instances):
            break
        await asyncio.sleep(1.0)
    await asyncio.sleep(settle)
    counted = await count_requests(sim, window)
    return IdleRequests(instances, ready, window, counted.total, counted.busiest(5))


@dataclass
class RequestCount:
    """kubesim's requests over a window: the total and (verb, resource) -> count."""

    total: int
    by_kind: dict[tuple[str, str], int]

    def of(self, resource: str) -> int:
        return sum(n for (_, kind), n in self.by_kind.items() if kind == resource)

    def busiest(self, count: int) -> str:
        top = sorted(self.by_kind.items(), key=lambda item: -item[1])[:count]
        return ", ".join(f"{verb} {resource} {n}" for (verb, resource), n in top) or "none"


async def count_requests(sim: KubeSim, window: float) -> RequestCount:
    """Every request kubesim answers (worker and watcher, every verb) over `window` seconds."""
    sim.reset_counters()
    await asyncio.sleep(window)
    counters = sim.counters()
    return RequestCount(int(counters["total"]), dict(counters["requests"]))


async def requests_on_own_stack(instances: int, window: float, within: float, root: Path) -> IdleRequests:
    """(b) on a dev server, kubesim, worker and watcher processes of its own."""
    from bench.lifecycle_bench import start_dev_server

    env = await start_dev_server(root)
    address = env.client.service_client.config.target_host
    sim = instant_kubesim(topology_for(instances))
    task_queue = f"idle-{uuid4().hex[:8]}"
    worker = worker_process(address, task_queue, sim.kubeconfig_path, root / "worker.log")
    watcher = watcher_process(address, task_queue, sim.kubeconfig_path, root / "watcher.log")
    try:
        worker.start()
        watcher.start()
        return await idle_requests(env.client, sim, task_queue, instances, window, within)
    finally:
        for process in (watcher, worker):
            process.stop(within=15)
        sim.stop()
        await env.shutdown()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.idle_cost", description=__doc__.split("\n\n")[0])
    parser.add_argument("--actions", default="20,200", help="service sizes for (a), comma-separated")
    parser.add_argument("--idle", type=int, default=2000, help="idle Ready Instances for (b)")
    parser.add_argument("--window", type=float, default=300.0, help="seconds (b) counts requests")
    parser.add_argument("--within", type=float, default=900.0, help="seconds a bring-up may take")
    parser.add_argument("--skip-requests", action="store_true", help="only (a)")
    parser.add_argument("--quick", action="store_true", help="(b) with 100 Instances over 30 s")
    args = parser.parse_args(argv)
    if args.quick:
        args.idle, args.window = 100, 30.0
    return args


async def run(args: argparse.Namespace) -> list[str]:
    lines: list[str] = []
    for size in (int(part) for part in args.actions.split(",") if part.strip()):
        result = await idle_actions(size)
        lines.append(f"(a) {result.line()}")
        print(lines[-1], flush=True)
    if not args.skip_requests:
        with tempfile.TemporaryDirectory(prefix="idle-cost-") as tmp:
            requests = await requests_on_own_stack(args.idle, args.window, args.within, Path(tmp))
        lines.append(f"(b) {requests.line()}")
        print(lines[-1], flush=True)
    return lines


def main(argv: list[str] | None = None) -> None:
    asyncio.run(run(parse_args(argv)))


if __name__ == "__main__":
    main()
