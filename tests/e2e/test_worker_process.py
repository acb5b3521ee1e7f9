"""The worker process (`workers.worker.run`, what `python -m workers` runs) against a dev server:
on SIGTERM it stops polling, keeps the in-flight activity running until it finishes, reports its
result, then exits 0 (what a pod's termination grace period relies on); and it serves the SDK's
metrics for Prometheus when asked to."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from uuid import uuid4

from temporalio.api.enums.v1 import EventType, PendingActivityState
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from tests.e2e.held_activity import HeldWorkflow
from tests.e2e.running_stack import REPO_ROOT, free_ports
from workers.config import ENV_PREFIX

# The worker's own loop with the test's workflow added: exactly what `python -m workers` runs,
# plus one workflow type.
WORKER_PROGRAM = """
import asyncio, logging
from tests.e2e.held_activity import HeldWorkflow, hold_until_released
from workers.worker import run
logging.basicConfig(level=logging.INFO)
asyncio.run(run(extra_workflows=[HeldWorkflow], activities=[hold_until_released]))
"""

# The worker builds its Kubernetes client at start but these tests call no Kubernetes activity.
UNUSED_KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:1"}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
users: [{name: u, user: {}}]
"""


@dataclass
class WorkerProcess:
    process: asyncio.subprocess.Process
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@asynccontextmanager
async def worker_process(
    dev_server: WorkflowEnvironment, task_queue: str, tmp_path: Path, **settings: str
) -> AsyncIterator[WorkerProcess]:
    """The worker as a process of its own, configured only through the environment."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(UNUSED_KUBECONFIG)
    env = {name: value for name, value in os.environ.items() if not name.startswith(ENV_PREFIX)}
    env |= {
        f"{ENV_PREFIX}TEMPORAL__ADDRESS": dev_server.client.service_client.config.target_host,
        f"{ENV_PREFIX}TEMPORAL__TASK_QUEUE": task_queue,
        f"{ENV_PREFIX}KUBE__KUBECONFIG": str(kubeconfig),
        "PYTHONUNBUFFERED": "1",
    }
    env |= settings
    log_path = tmp_path / "worker.log"
    with log_path.open("wb") as log:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-c", WORKER_PROGRAM, cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
        )
    worker = WorkerProcess(process, log_path)
    try:
        yield worker
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def wait_for(what: str, check: Callable[[], bool | Awaitable[bool]], within: float = 60.0) -> None:
    deadline = time.monotonic() + within
    while True:
        result = check()
        if not isinstance(result, bool):
            result = await result
        if result:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within:.0f} s waiting for {what}")
        await asyncio.sleep(0.1)


async def activity_started(handle: WorkflowHandle[HeldWorkflow, str]) -> bool:
    pending = (await handle.describe()).raw_description.pending_activities
    return any(activity.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED for activity in pending)


async def test_sigterm_lets_the_in_flight_activity_finish(
    dev_server: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    release = tmp_path / "release"
    async with worker_process(dev_server, task_queue, tmp_path) as worker:
        handle = await dev_server.client.start_workflow(
            HeldWorkflow.run, str(release), id=f"held-{uuid4()}", task_queue=task_queue
        )
        await wait_for("the activity to start on the worker", lambda: activity_started(handle))

        worker.process.send_signal(signal.SIGTERM)
        await wait_for("the worker to log the stop signal", lambda: "stop signal received" in worker.log())
        # Shutting down, yet still running: the activity holds it.
        assert worker.process.returncode is None, worker.log()

        release.touch()
        code = await asyncio.wait_for(worker.process.wait(), 60)
        assert code == 0, worker.log()

    history = await handle.fetch_history()
    completed = [e for e in history.events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED]
    assert len(completed) == 1, (
        "the in-flight activity's result must reach the server before the worker exits"
    )
    failed_or_timed_out = [
        e
        for e in history.events
        if e.event_type
        in (EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED, EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT)
    ]
    assert failed_or_timed_out == []
    await handle.terminate("test finished: no worker is left to complete it")


async def test_the_worker_serves_sdk_metrics_when_asked(
    dev_server: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    (port,) = free_ports(1)
    release = tmp_path / "release"
    release.touch()  # the activity returns at once
    metrics_setting = {f"{ENV_PREFIX}PROMETHEUS__WORKER_METRICS_ADDRESS": f"127.0.0.1:{port}"}
    async with worker_process(dev_server, task_queue, tmp_path, **metrics_setting) as worker:
        assert (
            await dev_server.client.execute_workflow(
                HeldWorkflow.run, str(release), id=f"held-{uuid4()}", task_queue=task_queue
            )
            == "finished"
        )

        def scrape() -> str:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
                return str(response.read().decode())

        metrics = await asyncio.to_thread(scrape)
        assert f'task_queue="{task_queue}"' in metrics, metrics[:2000]
        assert "temporal_activity_execution_latency" in metrics, metrics[:2000]
        assert f"serving SDK metrics at http://127.0.0.1:{port}/metrics" in worker.log()
