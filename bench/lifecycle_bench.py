"""Lifecycle bench: InferenceService bring-up and update next to the floor of its design.

    .venv/bin/python -m bench.lifecycle_bench [--instances 200] [--idle-instances 2000]
                                              [--failures 40] [--seed 7] [--quick]

Starts its own Temporal dev server (the venv's `temporal` binary, SQLite in WAL mode in a
temporary directory) and kubesim in this process with instant readiness, then the product's
worker and watcher as their own processes, exactly as `make up` runs them. In that one run,
on that one server, it measures and prints:

1. the floor: one parent workflow starting N child workflows that each run one no-op
   activity (`bench/floor_workflows.py`, in a worker process of its own), and for comparison
   the same children started one per workflow task, and with no parent at all. Each time is a
   ratio to the floor measured next to it (just before the bring-up, again just before the
   update, and before the 2-worker run): the floor rises over a run, as the server's store
   fills (5.4 s at the start of one run, 8.4 s after its delete);
2. bring-up: `apply` of an InferenceService of N single-pod Instances until kubesim shows
   N Instances serving (pod Ready and `ome.io/serving` True), and until the workflow's
   `status` says Ready;
3. update: `apply` of a new runner image (SurgeThenDrain, maxSurge 25%) until every Instance
   serves on it with one pod, with the fewest serving Instances sampled every 100 ms;
4. Kubernetes API requests per Instance created and per Instance updated (kubesim's
   counters, which count the worker's and the watcher's requests; the bench's own reads
   bypass the API), in all and the Instances' own (the requests naming an Instance's pod or Service);
5. pod failures: containers killed one at a time; the time from the kill to the first
   kubesim-visible step of the Instance's recreation (its pod taken out of rotation or
   deleted), and to serving again;
6. deletion, then Temporal history events per Instance lifecycle (create, update, delete);
7. worker RSS with M idle Ready Instances of a second InferenceService, their bring-up time
   and the floor's with M children, with its parent and without (whether the server itself is
   linear; `--no-floor-at-scale` skips both);
8. the CPU seconds of the floor and of both bring-ups, by process (`bench/cpu_meter.py`), and
   per Instance at M against N: which part grew faster than the fleet.

Figures are printed, never asserted: the bench is for reading, the tests are for failing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import uuid4

from temporalio.client import Client, WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from bench.cpu_meter import CpuMeter, CpuUse, pid_running, process_seconds, thread_seconds
from bench.floor_workflows import FLOOR_CHILD, FLOOR_PARENT, READY_LINE, FloorInput
from bench.goals import (
    EVENTS_PER_LIFECYCLE,
    EVENTS_TO_SERVING,
    IDLE_ACTIONS_PER_INSTANCE_HOUR,
    IDLE_REQUESTS_PER_SECOND,
    RECREATION_P99_SECONDS,
    REQUESTS_PER_CREATE,
    REQUESTS_PER_UPDATE,
    WORKER_RSS_MIB,
    Goals,
)
from bench.idle_cost import count_requests, idle_actions
from bench.lifecycle_args import parse_args
from bench.lifecycle_phases import (
    FAILURE_POLL_SECONDS,
    IDLE_NAME,
    NAME,
    NAMESPACE,
    RECREATION_WITHIN,
    SAMPLE_SECONDS,
    bring_up,
    coordinator_events,
    delete,
    events_at_serving,
    history_events,
    idle_bring_up,
    isvc_ready,
    log,
    per_instance_requests,
    percentile,
    pod_failures,
    snapshot,
    update,
    wait_for,
)
from bench.lifecycle_stack import (
    ProductProcess,
    instant_kubesim,
    prepare_namespace,
    topology_for,
    watcher_process,
    worker_processes,
)
from kubesim.handle import KubeSim
from workers.bytecode import compile_packages
from workers.client import DATA_CONVERTER
from workers.config import ENV_PREFIX
from workers.devserver import database_flags, temporal_binary
from workflows.search_attributes import ALL as SEARCH_ATTRIBUTES

OWN_NOTE = "requests naming an Instance's pod or headless Service (lifecycle_phases.instance_objects)"
PARENTLESS_STARTS_IN_FLIGHT = 50
"""Start calls the parentless floor has open at once (`start_children`)."""
PARENTLESS_WAITS_IN_FLIGHT = 500
"""Result long-polls the parentless floor has open at once: the dev server refuses more than
its per-namespace limit of concurrent polls (`namespace concurrent poller limit exceeded`), which
2,000 open at once passed on a slow machine."""
IDLE_SETTLE_SECONDS = 10.0
"""Quiet time before reading the worker's RSS, so it is the idle figure, not a peak."""


@dataclass
class Figures:
    rows: list[tuple[str, str, str]] = field(default_factory=list)

    def add(self, name: str, value: str, meaning: str = "") -> None:
        self.rows.append((name, value, meaning))
        print(f"  {name}: {value}", flush=True)

    def table(self) -> str:
        width = max(len(name) for name, _, _ in self.rows)
        value_width = max(len(value) for _, value, _ in self.rows)
        lines = [f"{name:<{width}}  {value:>{value_width}}  {meaning}" for name, value, meaning in self.rows]
        return "\n".join(lines)


# --- the floor --------------------------------------------------------------------------


async def measure_floor(
    client: Client, address: str, instances: int, logs: Path, env: Mapping[str, str],
    one_start_per_task: bool = False, parentless: bool = False,
) -> tuple[float, float]:  # fmt: skip
    """(seconds for the parent and its N children to finish, history events per child). `env`:
    the workers' settings; the floor runs its workflows the way they do (`--unsandboxed`).
    `parentless`: no parent, the N children are started by this client (`start_children`)."""
    task_queue = f"floor-{uuid4().hex[:8]}"
    floor = ProductProcess(
        "bench.floor_workflows", address=address, task_queue=task_queue, kubeconfig="", log=logs / "floor.log",
        ready_pattern=READY_LINE, args=["--address", address, "--task-queue", task_queue], env_extra=env,
    )  # fmt: skip
    floor.start()
    prefix = f"floor-{uuid4().hex[:8]}"
    try:
        started = time.monotonic()
        if parentless:
            await start_children(client, instances, prefix, task_queue)
        else:
            await client.execute_workflow(
                FLOOR_PARENT, FloorInput(children=instances, id_prefix=prefix, one_start_per_task=one_start_per_task),
                id=prefix, task_queue=task_queue, result_type=int,
            )  # fmt: skip
        seconds = time.monotonic() - started
    finally:
        floor.stop(within=15)
    events = 0
    async for execution in client.list_workflows(f"WorkflowType IN ('{FLOOR_PARENT}', '{FLOOR_CHILD}')"):
        if execution.id.startswith(prefix):
            events += execution.history_length
    return seconds, events / instances


async def start_children(client: Client, instances: int, prefix: str, task_queue: str) -> None:
    """The floor's N children without their parent: started by this client, at most
    `PARENTLESS_STARTS_IN_FLIGHT` starts at a time, and waited for. What the server does for
    N workflows with no parent's lock and no parent's history to write: whether its own time
    grows in proportion to N."""
    gate = asyncio.Semaphore(PARENTLESS_STARTS_IN_FLIGHT)

    async def start(index: int) -> WorkflowHandle[Any, int]:
        async with gate:
            return await client.start_workflow(
                FLOOR_CHILD, index, id=f"{prefix}-{index}", task_queue=task_queue, result_type=int
            )

    waits = asyncio.Semaphore(PARENTLESS_WAITS_IN_FLIGHT)

    async def finished(handle: WorkflowHandle[Any, int]) -> None:
        async with waits:
            await handle.result()

    handles = await asyncio.gather(*(start(index) for index in range(instances)))
    await asyncio.gather(*(finished(handle) for handle in handles))


# --- the run ----------------------------------------------------------------------------


async def start_dev_server(root: Path) -> WorkflowEnvironment:
    return await WorkflowEnvironment.start_local(
        data_converter=DATA_CONVERTER,
        dev_server_existing_path=str(temporal_binary()),
        search_attributes=SEARCH_ATTRIBUTES,
        dev_server_extra_args=database_flags(root / "temporal.db"),
        dev_server_log_level="error",
    )


@contextmanager
def stopped_after(processes: list[ProductProcess]) -> Iterator[None]:
    """Stop `processes` (the list as it is at the end, last started first); on a failure, print
    their last output first."""
    try:
        yield
    except BaseException:
        for process in processes:
            print(f"--- last output of {process.log}:\n{process.tail(3000)}", file=sys.stderr)
        raise
    finally:
        for process in reversed(processes):
            process.stop(within=15)


def workers_label(count: int) -> str:
    return f"{count} worker{'s' if count != 1 else ''}"


async def other_workers(
    count: int,
    client: Client,
    address: str,
    sim: KubeSim,
    root: Path,
    args: argparse.Namespace,
    reference: set[tuple[str, int | None, str, str]],
    figures: Figures,
    goals: Goals,
) -> None:
    """Bring-up and update of the same InferenceService with `count` worker processes on a task
    queue of their own, in a namespace of its own (so the pod names are the same), then its
    end state against the first run's (`reference`), then its deletion. The floor is measured
    again first: the machine drifts over a run, and each ratio is to the floor next to it."""
    n, label = args.instances, workers_label(count)
    floor_seconds, _ = await measure_floor(client, address, n, root, worker_env(args))
    figures.add(
        f"floor, before the {label} run", f"{floor_seconds:.2f} s", "the ratios below are to this floor"
    )
    namespace = f"{NAMESPACE}-w{count}"
    task_queue = f"bench-{uuid4().hex[:8]}"
    logs = root / f"w{count}"
    logs.mkdir()
    processes = worker_processes(count, address, task_queue, sim.kubeconfig_path, logs, worker_env(args))
    processes.append(watcher_process(address, task_queue, sim.kubeconfig_path, logs / "watcher.log"))
    with stopped_after(processes):
        for process in processes:
            process.start()
        prepare_namespace(sim, namespace)
        log(f"bring-up with {label}: {n} Instances")
        up_serving, up_ready = await bring_up(client, task_queue, sim, NAME, n, args.timeout, namespace)
        figures.add(
            f"bring-up, {label}: N serving", f"{up_serving:.2f} s", f"{up_serving / floor_seconds:.2f}x floor"
        )
        figures.add(
            f"bring-up, {label}: status Ready", f"{up_ready:.2f} s", f"{up_ready / floor_seconds:.2f}x floor"
        )
        goals.floor_ratio(f"bring-up {n}, {label}", up_serving, floor_seconds)
        log(f"update with {label}: {n} Instances to a new image")
        update_seconds, fewest = await update(client, task_queue, sim, n, args.timeout, namespace)
        figures.add(f"update, {label}: all on new image", f"{update_seconds:.2f} s",
                    f"{update_seconds / floor_seconds:.2f}x floor")  # fmt: skip
        figures.add(f"update, {label}: fewest serving", f"{fewest}", f"of {n}")
        goals.floor_ratio(f"update {n}, {label}", update_seconds, floor_seconds)
        await wait_for(f"{namespace}/{NAME} to report Ready", lambda: isvc_ready(client, NAME, n, namespace),
                       args.timeout, every=0.25)  # fmt: skip
        seen = (await snapshot(sim, NAME, namespace)).end_state()
        # Pods without a revision label would agree without saying anything.
        differences = sorted(seen ^ reference) + sorted(pod for pod in seen | reference if not pod[2])
        figures.add(f"end state, {label} vs {workers_label(args.workers[0])}", "same" if not differences else "DIFFERENT",
                    f"{len(seen)} pods: name, index, revision, image" + (f"; differ: {differences[:4]}" if differences else ""))  # fmt: skip
        goals.same(f"end state after the update, {label} vs {workers_label(args.workers[0])}", not differences,
                   f"{len(seen)} pods by name, index, revision, image; every Instance serving on the new image")  # fmt: skip
        await delete(client, sim, args.timeout, namespace)


def worker_env(args: argparse.Namespace) -> dict[str, str]:
    """The settings the bench gives the worker processes (and the floor's)."""
    return {f"{ENV_PREFIX}WORKER__SANDBOX": "false"} if args.unsandboxed else {}


async def run(args: argparse.Namespace, root: Path) -> tuple[Figures, Goals]:
    n, idle = args.instances, args.idle_instances
    first, *others = args.workers
    figures, goals = Figures(), Goals()
    log(f"starting the dev server and kubesim ({topology_for(max(n * 2, idle))})")
    env = await start_dev_server(root)
    client = env.client
    address = client.service_client.config.target_host
    sim = instant_kubesim(topology_for(max(n * 2, idle)))
    processes: list[ProductProcess] = []
    try:
        with stopped_after(processes):
            # The floors for comparison first: the one the ratios are to is measured next to the
            # bring-up (the floor rises over a run, so one taken earlier reads low).
            serial_seconds, _ = await measure_floor(client, address, n, root, worker_env(args), one_start_per_task=True)
            figures.add("floor, one child start per task", f"{serial_seconds:.2f} s", "for comparison only")
            log(f"floor, no parent: {n} children started by the bench's client")
            parentless, _ = await measure_floor(client, address, n, root, worker_env(args), parentless=True)
            figures.add("floor, no parent", f"{parentless:.2f} s", "the N children started by the bench's client")
            log(f"floor: one parent starting {n} children, each one no-op activity")
            floor_meter = server_meter(root)
            floor_meter.start()
            floor_seconds, floor_events = await measure_floor(client, address, n, root, worker_env(args))
            floor_cpu = floor_meter.stop()
            figures.add(
                "floor: parent + N children", f"{floor_seconds:.2f} s", f"N={n}, all started in one task"
            )
            figures.add("  CPU", floor_cpu.line())

            task_queue = f"bench-{uuid4().hex[:8]}"
            workers = worker_processes(first, address, task_queue, sim.kubeconfig_path, root, worker_env(args))
            watcher = watcher_process(address, task_queue, sim.kubeconfig_path, root / "watcher.log")
            processes += [*workers, watcher]
            for process in processes:
                process.start()
            prepare_namespace(sim, NAMESPACE)
            label = workers_label(first)

            log(f"bring-up: {n} Instances, {label}")
            sim.reset_counters()
            meter = stack_meter(root, workers, watcher, sim)
            meter.start()
            serving_reads: list[CpuUse] = []
            up_serving, up_ready = await bring_up(client, task_queue, sim, NAME, n, args.timeout,
                                                  at_serving=lambda: serving_reads.append(meter.so_far()))  # fmt: skip
            up_cpu, serving_cpu = meter.stop(), serving_reads[0]
            created, created_own, created_top = per_instance_requests(sim, n)
            figures.add(
                "bring-up: N serving (kubesim)",
                f"{up_serving:.2f} s",
                f"{up_serving / floor_seconds:.2f}x floor",
            )
            figures.add(
                "bring-up: status Ready", f"{up_ready:.2f} s", f"{up_ready / floor_seconds:.2f}x floor"
            )
            figures.add("bring-up: CPU", serving_cpu.line(), "until N served (kubesim)")
            figures.add("  until Ready", up_cpu.line(), "until the status said Ready")
            goals.floor_ratio(f"bring-up {n}, {label}", up_serving, floor_seconds)
            at_serving = await events_at_serving(client, n)
            figures.add("history events / Instance at Ready", f"{at_serving:.1f}",
                        "Instance workflow from its start, read once the status says Ready")  # fmt: skip
            goals.at_most("history events, start to serving, per Instance", at_serving, EVENTS_TO_SERVING)

            update_floor, _ = await measure_floor(client, address, n, root, worker_env(args))
            figures.add("floor, before the update", f"{update_floor:.2f} s", "the update's ratio is to this floor")
            log(f"update: {n} Instances to a new image, SurgeThenDrain maxSurge 25%, {label}")
            sim.reset_counters()
            update_seconds, fewest = await update(client, task_queue, sim, n, args.timeout)
            updated, updated_own, updated_top = per_instance_requests(sim, n)
            figures.add(
                "update: all on new image",
                f"{update_seconds:.2f} s",
                f"{update_seconds / update_floor:.2f}x floor ({update_seconds / floor_seconds:.2f}x the bring-up's)",
            )
            figures.add(
                "update: fewest serving", f"{fewest}", f"of {n}, sampled every {SAMPLE_SECONDS * 1000:.0f} ms"
            )
            figures.add("API requests / Instance created", f"{created:.2f}", created_top)
            figures.add("  the Instances' own", f"{created_own:.2f}", OWN_NOTE)
            figures.add("API requests / Instance updated", f"{updated:.2f}", updated_top)
            figures.add("  the Instances' own", f"{updated_own:.2f}", OWN_NOTE)
            goals.floor_ratio(f"update {n}, {label}", update_seconds, update_floor)
            goals.at_most("Kubernetes requests / Instance created, its own", created_own, REQUESTS_PER_CREATE)
            goals.at_most("Kubernetes requests / Instance updated, its own", updated_own, REQUESTS_PER_UPDATE)

            log(f"pod failures: {args.failures} containers killed one at a time")
            # Every Instance must have finished its update first: a kill during the update's
            # last step is a different scenario from a failure of a Ready Instance.
            await wait_for(
                f"{NAME} to report Ready", lambda: isvc_ready(client, NAME, n), args.timeout, every=0.25
            )
            # What the runs with other worker counts must end with: taken before any pod fails.
            reference = (await snapshot(sim)).end_state()
            failures = await pod_failures(sim, n, args.failures, args.seed, args.timeout)
            recreation, serving = list(failures.to_recreation.values()), list(failures.to_serving.values())
            killed, missed = failures.killed, failures.missed
            if recreation:
                figures.add("pod failure -> recreation p50", f"{statistics.median(recreation) * 1000:.0f} ms",
                            f"{len(recreation)} kills, polled every {FAILURE_POLL_SECONDS * 1000:.0f} ms")  # fmt: skip
                figures.add("pod failure -> recreation p99", f"{percentile(recreation, 0.99) * 1000:.0f} ms")
                figures.add("pod failure -> serving again p50", f"{statistics.median(serving) * 1000:.0f} ms")
                figures.add("pod failure -> serving again p99", f"{percentile(serving, 0.99) * 1000:.0f} ms",
                            failures.slowest())  # fmt: skip
                goals.below(
                    "pod failure -> recreation p99",
                    percentile(recreation, 0.99),
                    RECREATION_P99_SECONDS,
                    " s",
                )
            else:
                goals.not_measured("pod failure -> recreation p99", "no kill was followed by a recreation")
            figures.add("pod failure -> no recreation", f"{len(missed)}",
                        f"kills not followed by a recreation within {RECREATION_WITHIN:.0f} s: {sorted(missed)}")  # fmt: skip

            log(f"delete: {n} Instances")
            delete_seconds = await delete(client, sim, args.timeout)
            figures.add("delete: all gone, workflow done", f"{delete_seconds:.2f} s")
            again, _ = await measure_floor(client, address, n, root, worker_env(args))
            figures.add("floor, repeated after the delete", f"{again:.2f} s", "how much the machine drifted")
            events = await history_events(client, killed)
            figures.add("history events / Instance lifecycle", f"{events['instance']:.0f}",
                        "Instance workflow: create, update, delete (runs summed over continue-as-new)")  # fmt: skip
            figures.add("  same, with one pod-failure restart", f"{events['instance_restarted']:.0f}",
                        f"the {len(killed)} Instances whose container was killed")  # fmt: skip
            figures.add(
                "  + InferenceReplica/Service share", f"{events['coordinators']:.1f}", "their events / N"
            )
            figures.add("floor history events / child", f"{floor_events:.1f}", "parent's included")
            goals.at_most(
                "history events / create-update-delete lifecycle", events["instance"], EVENTS_PER_LIFECYCLE
            )

            if others:
                # Stopped while the other counts run: the first run's watcher would signal their
                # Instances too and hold the watcher's Lease, leaving their watcher a standby.
                for process in reversed(processes):
                    process.stop(within=15)
                for count in others:
                    await other_workers(count, client, address, sim, root, args, reference, figures, goals)
                for process in processes:
                    process.start()

            if idle <= 0:
                for what in (
                    "idle Kubernetes requests/s",
                    "idle Temporal actions / Instance / hour",
                    "worker RSS",
                ):
                    goals.not_measured(what, "--idle-instances 0")
                return figures, goals
            log(
                f"idle: {idle} Ready Instances of a second InferenceService (waiting up to {args.idle_within:.0f} s)"
            )
            meter.start()
            idle_seconds, idle_ready = await idle_bring_up(client, task_queue, sim, idle, args.idle_within)
            idle_cpu = meter.stop()
            if idle_ready == idle:
                figures.add(
                    f"bring-up of {idle} (kubesim)",
                    f"{idle_seconds:.1f} s",
                    f"{idle_seconds / idle * 1000:.0f} ms per Instance",
                )
                add_cpu_growth(figures, f"bring-up of {idle}", idle_cpu, serving_cpu, idle / n)
                goals.scale(n, up_serving, idle, idle_seconds)
                # Whether an Instance costs more when it is one of many: its own events, and
                # its share of the coordinators' (compare the N-Instance figures above).
                at_scale = await events_at_serving(client, idle, name=IDLE_NAME, sample=200)
                figures.add(f"history events / Instance at serving, {idle}", f"{at_scale:.1f}",
                            "200 of them, evenly spread")  # fmt: skip
                events, runs = await coordinator_events(client, IDLE_NAME)
                figures.add(f"  + InferenceReplica/Service share, {idle}", f"{events / idle:.1f}",
                            f"their events / N, {runs} runs")  # fmt: skip
                if args.floor_at_scale:
                    # Whether the server itself is linear: the floor's design at the large size.
                    log(f"floor: one parent starting {idle} children, each one no-op activity")
                    floor_meter.start()
                    large_floor, _ = await measure_floor(client, address, idle, root, worker_env(args))
                    add_cpu_growth(figures, f"floor of {idle}", floor_meter.stop(), floor_cpu, idle / n)
                    figures.add(f"floor: parent + {idle} children", f"{large_floor:.1f} s",
                                f"{large_floor / floor_seconds:.1f}x the floor of {n}")  # fmt: skip
                    figures.add(f"  bring-up of {idle} vs this floor", f"{idle_seconds / large_floor:.2f}x",
                                f"the bring-up of {n} was {up_serving / floor_seconds:.2f}x its floor")  # fmt: skip
                    # And with no parent at all: the server's own growth from N to M workflows.
                    log(f"floor, no parent: {idle} children started by the bench's client")
                    large_parentless, _ = await measure_floor(
                        client, address, idle, root, worker_env(args), parentless=True
                    )
                    figures.add(f"floor, no parent, {idle}", f"{large_parentless:.1f} s",
                                f"{large_parentless / parentless:.1f}x the no-parent floor of {n}")  # fmt: skip
            else:
                figures.add(f"bring-up of {idle} (kubesim)", f"> {idle_seconds:.0f} s",
                            f"only {idle_ready} serving when the bench stopped waiting")  # fmt: skip
                goals.not_measured(
                    f"bring-up {idle} vs {n}", f"only {idle_ready} of {idle} served within --idle-within"
                )
            await asyncio.sleep(IDLE_SETTLE_SECONDS)
            for index, worker in enumerate(workers):
                rss, peak = worker.rss_kib()
                which = "worker" if first == 1 else f"worker {index + 1} of {first}"
                figures.add(
                    f"{which} RSS, {idle_ready} idle Ready",
                    f"{rss / 1024:.0f} MiB",
                    f"peak {peak / 1024:.0f} MiB",
                )
                goals.at_most(f"{which} RSS, {idle_ready} idle Ready", rss / 1024, WORKER_RSS_MIB, " MiB")
            watcher_rss, _ = watcher.rss_kib()
            figures.add(f"watcher RSS, {idle_ready} idle Ready", f"{watcher_rss / 1024:.0f} MiB")

            await measure_idle_cost(sim, idle_ready, args, figures, goals)
    finally:
        sim.stop()
        await env.shutdown()
    return figures, goals


def server_meter(root: Path) -> CpuMeter:
    """The machine and the run's dev server (found by its database's path)."""
    server = pid_running("start-dev", str(root / "temporal.db"))
    return CpuMeter({"server": lambda: process_seconds(server) if server is not None else 0.0})


def stack_meter(root: Path, workers: list[ProductProcess], watcher: ProductProcess, sim: KubeSim) -> CpuMeter:
    """The machine and each of the run's parts: the dev server, the worker(s), the watcher,
    kubesim's thread and the rest of this process (the bench's own client and polls)."""
    kubesim = sim.thread_id
    assert kubesim is not None, "kubesim is not started"
    return CpuMeter(
        {
            **server_meter(root).sources,
            "worker": lambda: sum(process_seconds(worker.pid) for worker in workers),
            "watcher": lambda: process_seconds(watcher.pid),
            "kubesim": lambda: thread_seconds(kubesim),
            "bench": lambda: process_seconds(os.getpid()) - thread_seconds(kubesim),
        }
    )


PRODUCT = ("worker", "watcher")
"""The stack's parts that are the product (`stack_meter`'s names)."""


def add_cpu_growth(figures: Figures, phase: str, large: CpuUse, small: CpuUse, factor: float) -> None:
    """A large phase's CPU, and per Instance against the small one's: where the time grew."""
    figures.add(f"  {phase}: CPU", large.line())
    figures.add(
        f"  {phase}: CPU per Instance", large.growth(small, factor), f"against {factor:.0f}x fewer; 1x is linear"
    )
    if small.of(*PRODUCT) > 0:
        figures.add(f"  {phase}: the product's own CPU per Instance",
                    f"{large.of(*PRODUCT) / small.of(*PRODUCT) / factor:.2f}x",
                    "the worker(s) and the watcher together; kubesim and the dev server stand for a cluster's "
                    "control plane and a Temporal cluster")  # fmt: skip


LEASES = "leases"


async def measure_idle_cost(sim: KubeSim, idle_ready: int, args: argparse.Namespace, figures: Figures,
                            goals: Goals) -> None:  # fmt: skip
    """The idle Instances are Ready and the stack settled: Kubernetes requests per second over
    `--idle-window` of real time (kubesim's counter: worker and watcher, every verb, watches
    opened included; the watcher's Lease renewals shown apart), then Temporal actions per idle
    Instance per hour over a simulated hour on the time-skipping server (`bench.idle_cost`)."""
    log(f"idle: counting Kubernetes requests for {args.idle_window:.0f} s")
    counted = await count_requests(sim, args.idle_window)
    figures.add(f"idle Kubernetes requests/s, {idle_ready} Ready", f"{counted.total / args.idle_window:.3f}",
                f"{counted.total} in {args.idle_window:.0f} s, {counted.of(LEASES)} of them the watcher's Lease; "
                f"{counted.busiest(4)}")  # fmt: skip
    goals.at_most("idle Kubernetes requests/s (total)", counted.total / args.idle_window, IDLE_REQUESTS_PER_SECOND)
    for size in args.idle_actions:
        log(f"idle: Temporal actions of {size} Ready Instances over a simulated hour (time-skipping server)")
        try:
            actions = await idle_actions(size)
        except Exception as error:  # noqa: BLE001 - the figures measured so far must still print
            figures.add(f"idle Temporal actions / Instance / hour, {size}", "failed", str(error)[:200])
            goals.not_measured(f"idle Temporal actions / Instance / hour, {size} Instances", str(error)[:200])
            continue
        figures.add(f"idle Temporal actions / Instance / hour, {size}", f"{actions.per_instance_hour:.2f}",
                    actions.line())  # fmt: skip
        goals.at_most(f"idle Temporal actions / Instance / hour, {size} Instances",
                      actions.per_instance_hour, IDLE_ACTIONS_PER_INSTANCE_HOUR)  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv, (__doc__ or "").split("\n\n")[0])
    # As `make up` leaves the checkout: the sandbox would otherwise compile the workflow modules
    # for every run it starts (PYTHONDONTWRITEBYTECODE); the floor's module gets the same.
    compile_packages(extra=("bench",))
    if args.keep:
        kept = Path(tempfile.mkdtemp(prefix="lifecycle-bench-"))
        print(f"the run's directory, kept: {kept}", flush=True)
        figures, goals = asyncio.run(run(args, kept))
    else:
        with tempfile.TemporaryDirectory(prefix="lifecycle-bench-") as tmp:
            figures, goals = asyncio.run(run(args, Path(tmp)))
    workers = ", ".join(workers_label(count) for count in args.workers)
    print(
        f"\nlifecycle bench: {args.instances} Instances, {args.idle_instances} idle, {workers}, "
        f"kubesim instant readiness, workflows {'unsandboxed' if args.unsandboxed else 'in the SDK sandbox'}"
    )
    print(figures.table())
    print("\nissue 17 goals:")
    print(goals.text())


if __name__ == "__main__":
    main()
