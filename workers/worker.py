"""The worker process: registers every workflow and activity and polls the product's task queue.

Besides the main worker (the control plane's API), it runs one worker per reachable workload
cluster (reference §16) on `cluster_task_queue(task_queue, name)` (`ome-lifecycle@worker-a`),
with the same workflows and activities built around that cluster's `ApiClient`: a workflow
started on `ome-lifecycle@worker-a` (and its children, which inherit the queue) acts on
worker-a. `workers.clusters.ClusterDirectory` finds the clusters every refresh interval;
`cluster_workers` starts a worker for each new reachable one, restarts it when its client
changes (a new kubeconfig) and stops it gracefully when the cluster goes or becomes
unreachable (`cluster_workers`, a `workers.clusters.PerCluster`). With no WorkloadCluster (or no CRD) only the main worker runs.

`python -m workers` runs it. On SIGTERM or SIGINT it stops polling, lets in-flight activities
finish for `GRACEFUL_SHUTDOWN` (those still running after that are cancelled, which a
heartbeating activity sees at its next heartbeat), then exits 0; Temporal retries whatever did
not finish on the next worker.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import socket
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from datetime import timedelta
from typing import Any

from pydantic import ValidationError
from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker
from temporalio.worker.workflow_sandbox import SandboxRestrictions

from activities.registry import build_activities
from models.canary_analysis import CanarySettingsResult
from models.migration import MigrationAudit
from models.routing_ops import RoutingSettingsResult
from workers.bytecode import uncompiled_workflow_modules
from workers.client import connect, exit_process, metrics_runtime
from workers.clusters import ClusterDirectory, PerCluster
from workers.config import (
    ACTIVITY_THREADS,
    MAX_CONCURRENT_ACTIVITIES,
    MAX_CONCURRENT_LOCAL_ACTIVITIES,
    Settings,
    SettingsError,
    WorkerSettings,
    kube_api_client,
)
from workers.sandbox_runner import ContextCachingSandboxRunner
from workflows.names import cluster_task_queue
from workflows.registry import WORKFLOWS

logger = logging.getLogger(__name__)

GRACEFUL_SHUTDOWN = timedelta(seconds=30)
"""Time in-flight activities get to finish after a stop signal. Kubernetes waits 30 s between
SIGTERM and SIGKILL by default, so a pod-hosted worker uses all of it."""

# Pure modules that workflows import: passing them through the sandbox loads them once per
# process instead of once per workflow run, and keeps one identity for each pydantic class so
# the data converter and workflow code agree on types.
_SANDBOX_PASSTHROUGH = ("models", "planning")


def build_worker(
    client: Client,
    task_queue: str,
    kube_api_client: Any,
    *,
    activity_executor: Executor | None = None,
    graceful_shutdown_timeout: timedelta = GRACEFUL_SHUTDOWN,
    extra_workflows: Sequence[type[Any]] = (),
    activities: Sequence[Callable[..., Any]] | None = None,
    max_cached_workflows: int = WorkerSettings().max_cached_workflows,
    sandbox: bool = WorkerSettings().sandbox,
    canary: CanarySettingsResult | None = None,
    migration_audit: MigrationAudit | None = MigrationAudit(),
    routing: RoutingSettingsResult | None = None,
    gateway_transport: Any = None,
) -> Worker:
    """A worker with every registered workflow and activity, ready for `async with` or `run()`.

    Tests call this against the time-skipping environment with a fresh task queue, adding
    test-only workflows with `extra_workflows` (one named like a product workflow replaces it),
    or replacing the real activities with mocks registered under the same names with `activities`. Without an `activity_executor` a thread
    pool of `ACTIVITY_THREADS` threads is created; its idle threads end with the process.
    """
    # A test double registered under a product workflow's name (a `Migration` that only
    # deletes pods) takes that workflow's place.
    doubled = {_workflow_name(extra) for extra in extra_workflows}
    workflows = [w for w in WORKFLOWS if _workflow_name(w) not in doubled]
    executor = activity_executor or ThreadPoolExecutor(
        max_workers=ACTIVITY_THREADS, thread_name_prefix="activity"
    )
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[*workflows, *extra_workflows],
        activities=build_activities(kube_api_client, canary, migration_audit, routing, gateway_transport) if activities is None else activities,
        activity_executor=executor,
        max_concurrent_activities=MAX_CONCURRENT_ACTIVITIES,
        max_concurrent_local_activities=MAX_CONCURRENT_LOCAL_ACTIVITIES,
        max_cached_workflows=max_cached_workflows,
        workflow_runner=ContextCachingSandboxRunner(
            restrictions=SandboxRestrictions.default.with_passthrough_modules(*_SANDBOX_PASSTHROUGH)
        )
        if sandbox
        else UnsandboxedWorkflowRunner(),
        graceful_shutdown_timeout=graceful_shutdown_timeout,
    )


def _workflow_name(cls: type[Any]) -> str | None:
    definition = getattr(cls, "__temporal_workflow_definition", None)
    return getattr(definition, "name", None)


def _stop_on_signals(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)


async def run(
    settings: Settings | None = None,
    *,
    extra_workflows: Sequence[type[Any]] = (),
    activities: Sequence[Callable[..., Any]] | None = None,
) -> None:
    """Run the worker until SIGTERM or SIGINT, then shut down gracefully.

    `extra_workflows` and `activities` are passed to `build_worker`, so a test can run this very
    loop with a workflow of its own.
    """
    settings = settings or Settings()
    tune_gc(settings.worker.gc_young_threshold)
    stop = asyncio.Event()
    _stop_on_signals(stop)
    # Local settings first: a wrong kubeconfig path should not wait behind a network timeout.
    api_client = kube_api_client(settings)
    try:
        client = await connect(
            settings.temporal,
            otel=settings.otel,
            role="worker",
            runtime=metrics_runtime(settings.prometheus.worker_metrics_address),
        )
        await _poll_until_stopped(client, settings, api_client, stop, extra_workflows, activities)
    finally:
        # The client's connection pool holds threads; closing it here, not at interpreter exit,
        # keeps the exit clean when the worker gives up early.
        api_client.close()  # type: ignore[no-untyped-call]
    logger.info("worker stopped")


def tune_gc(young_threshold: int) -> None:
    """Collect the young generation every `young_threshold` allocations, and leave what the
    worker holds at start out of the old generation's walks; 0 leaves the collector as it is."""
    if young_threshold <= 0:
        return
    _, middle, old = gc.get_threshold()
    gc.set_threshold(young_threshold, middle, old)
    gc.collect()
    gc.freeze()


def cluster_workers(task_queue: str, make: Callable[[str, Any, Executor], Worker]) -> PerCluster[Worker]:
    """One worker per reachable workload cluster on `cluster_task_queue(task_queue, name)`,
    built by `make(queue, cluster's ApiClient, executor)`; each has its own activity threads."""
    executors: dict[str, ThreadPoolExecutor] = {}
    tasks: dict[str, asyncio.Task[None]] = {}

    async def start(name: str, api_client: Any) -> Worker:
        queue = cluster_task_queue(task_queue, name)
        executors[name] = ThreadPoolExecutor(
            max_workers=ACTIVITY_THREADS, thread_name_prefix=f"activity-{name}"
        )
        worker = make(queue, api_client, executors[name])
        tasks[name] = asyncio.create_task(worker.run(), name=f"worker-{name}")
        logger.info("polling task queue %r for workload cluster %s", queue, name)
        return worker

    async def stop(name: str, worker: Worker) -> None:
        logger.info("stopping the worker of workload cluster %s (graceful)", name)
        try:
            await worker.shutdown()
            await tasks.pop(name)
        finally:
            executors.pop(name).shutdown(wait=False)

    return PerCluster(start, stop)


async def _poll_until_stopped(
    client: Client,
    settings: Settings,
    api_client: Any,
    stop: asyncio.Event,
    extra_workflows: Sequence[type[Any]],
    activities: Sequence[Callable[..., Any]] | None,
) -> None:
    canary = CanarySettingsResult(
        analysis=settings.canary.analysis_config(settings.prometheus.url),
        default_ready_timeout=settings.canary.default_ready_timeout or None,
    )
    migration_audit = settings.migration.audit()
    routing = settings.routing.result()

    def make(task_queue: str, kube: Any, executor: Executor) -> Worker:
        return build_worker(
            client,
            task_queue,
            kube,
            activity_executor=executor,
            extra_workflows=extra_workflows,
            activities=activities,
            max_cached_workflows=settings.worker.max_cached_workflows,
            sandbox=settings.worker.sandbox,
            canary=canary,
            migration_audit=migration_audit,
            routing=routing,
        )

    directory = ClusterDirectory(
        api_client,
        connection_grace_seconds=settings.clusters.connection_grace_seconds,
        refresh_interval_seconds=settings.clusters.refresh_interval_seconds,
    )
    per_cluster = cluster_workers(settings.temporal.task_queue, make)

    async def after_pass(found: ClusterDirectory) -> None:
        await per_cluster.reconcile(found.clients())

    if settings.worker.sandbox and (stale := uncompiled_workflow_modules()):
        logger.warning(
            "%d workflow modules have no up-to-date bytecode (e.g. %s): the sandbox compiles them "
            "for every workflow run it starts; run `make bytecode` (python -m workers.bytecode)",
            len(stale), stale[0],
        )
    with ThreadPoolExecutor(max_workers=ACTIVITY_THREADS, thread_name_prefix="activity") as pool:
        worker = make(settings.temporal.task_queue, api_client, pool)
        async with worker:
            logger.info(
                "worker %s@%s polling task queue %r on %s (namespace %r) with %d workflow types",
                os.getpid(),
                socket.gethostname(),
                settings.temporal.task_queue,
                settings.temporal.address,
                settings.temporal.namespace,
                len(WORKFLOWS) + len(extra_workflows),
            )
            if settings.prometheus.worker_metrics_address:
                logger.info(
                    "serving SDK metrics at http://%s/metrics", settings.prometheus.worker_metrics_address
                )
            clusters = asyncio.create_task(directory.run(stop, after_pass), name="workload-clusters")
            try:
                await stop.wait()
                logger.info(
                    "stop signal received: no new tasks; in-flight activities get %.0f s to finish",
                    GRACEFUL_SHUTDOWN.total_seconds(),
                )
                await clusters
            finally:
                clusters.cancel()
                await per_cluster.stop_all()
                directory.close()
        # Leaving `async with` ran worker.shutdown(), which waited for the activities.


async def _run_then_exit() -> None:
    await run()
    # Exit from inside the loop: `asyncio.run`'s own teardown (cancelling what is left, closing
    # the loop) is where the SDK's runtime threads can still crash the interpreter.
    exit_process(0)


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        asyncio.run(_run_then_exit())
    except (SettingsError, ValidationError, ConnectionError) as error:
        # A setting to fix, not a bug: its message says which and how, a traceback would bury it.
        logger.error("the worker cannot start: %s", error)
        exit_process(2)
    exit_process(0)
