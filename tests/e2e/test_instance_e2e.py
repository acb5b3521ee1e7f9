"""The Instance workflow end to end, driven like a user drives it.

1. The local stack (dev server, kubesim, worker, watcher as separate processes): an Instance
   started with the `temporal` CLI comes up; a pod killed through kubesim's control API makes
   the watcher signal the Instance, which recreates all its pods with a new incarnation.
2. The worker SIGKILLed in the middle of creating and of updating an Instance: after a
   restart it finishes with exactly the right pods, none duplicated, none orphaned.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from uuid import uuid4

import kubernetes
import pytest
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from kubesim.handle import KubeSim
from models.instance import DeleteRequest, InstancePhase, InstanceSpec, InstanceStatus, UpdateRequest
from tests.e2e.running_stack import REPO_ROOT, RunningStack
from workers.config import ENV_PREFIX
from workers.watch.pods import PodWatcher, TemporalSignalSink
from workflows.names import TASK_QUEUE, instance_workflow_id

pytestmark = pytest.mark.e2e
P = InstancePhase


def instance_spec(namespace: str, image: str, workers: int) -> InstanceSpec:
    # A one-second grace: the stack's kubesim runs real-time pod shutdowns.
    pod = {"containers": [{"name": "engine", "image": image}], "terminationGracePeriodSeconds": 1}
    return InstanceSpec(
        namespace=namespace,
        isvc="chat",
        component="engine",
        index=0,
        revision=f"rev-{image.replace(':', '-').replace('/', '-')}",
        leader_pod_spec=pod,
        worker_pod_spec=pod if workers else None,
        worker_count=workers,
        drain_seconds=1.0,
    )


def wait(what: str, probe: Callable[[], Any], within: float = 90.0) -> Any:
    deadline = time.monotonic() + within
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = probe()
        except (AssertionError, KeyError, ValueError) as error:
            last = error
        if last and not isinstance(last, Exception):
            return last
        time.sleep(0.3)
    raise AssertionError(f"timed out after {within:.0f}s waiting for {what}; last saw {last!r}")


def cli_status(stack: RunningStack, workflow_id: str) -> dict[str, Any]:
    """The Instance's `status` query through the CLI, as the README tells users to read it."""
    answer = stack.temporal_json("workflow", "query", "--workflow-id", workflow_id, "--name", "status")
    result = answer["queryResult"] if isinstance(answer, dict) and "queryResult" in answer else answer
    status = result[0] if isinstance(result, list) else result
    assert isinstance(status, dict)
    return status


def field(status: dict[str, Any], snake: str) -> Any:
    """Read a status field whatever the converter's key style (snake or camelCase)."""
    camel = snake.split("_")[0] + "".join(part.title() for part in snake.split("_")[1:])
    return status.get(snake, status.get(camel))


def core_api(kubeconfig: Path) -> Any:
    return kubernetes.client.CoreV1Api(kubernetes.config.new_client_from_config(config_file=str(kubeconfig)))


def live_pod_uids(core: Any, namespace: str) -> dict[str, str]:
    pods = core.list_namespaced_pod(namespace).items
    return {p.metadata.name: p.metadata.uid for p in pods if p.metadata.deletion_timestamp is None}


def test_killed_pod_recreates_the_instance_through_cli_and_watcher(stack: RunningStack) -> None:
    core = core_api(stack.kubeconfig)
    namespace = f"e2e-{uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": namespace}})
    spec = instance_spec(namespace, "engine:1", workers=1)
    workflow_id = instance_workflow_id(namespace, "chat", "engine", 0)
    stack.temporal(
        "workflow", "start", "--type", "Instance", "--task-queue", TASK_QUEUE, "--workflow-id", workflow_id,
        "--input", json.dumps(spec.model_dump(mode="json")),
    )  # fmt: skip
    wait("the Instance to be Ready", lambda: field(cli_status(stack, workflow_id), "phase") == "Ready")
    before = live_pod_uids(core, namespace)
    assert sorted(before) == ["chat-engine-0-leader-0", "chat-engine-0-worker-0"]

    request = urllib.request.Request(
        f"http://127.0.0.1:{stack.kubesim_port}/sim/pods/{namespace}/chat-engine-0-worker-0/kill",
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200

    def recreated() -> bool:
        status = cli_status(stack, workflow_id)
        return (
            field(status, "incarnation") == 2
            and field(status, "phase") == "Ready"
            and field(status, "serving")
        )

    wait("a new incarnation, Ready and serving", recreated)
    after = live_pod_uids(core, namespace)
    assert sorted(after) == sorted(before) and all(after[name] != before[name] for name in before)

    stack.temporal("workflow", "signal", "--workflow-id", workflow_id, "--name", "delete", "--input", "{}")
    wait(
        "the Instance workflow to complete",
        lambda: (
            stack.temporal_json("workflow", "describe", "--workflow-id", workflow_id)[
                "workflowExecutionInfo"
            ]["status"]
            == "WORKFLOW_EXECUTION_STATUS_COMPLETED"
        ),
    )
    assert live_pod_uids(core, namespace) == {}


# --- the worker SIGKILLed mid-operation ---------------------------------------------------


@asynccontextmanager
async def worker_process(
    dev_server: WorkflowEnvironment, task_queue: str, kubeconfig: str, log: Path
) -> AsyncIterator[asyncio.subprocess.Process]:
    env = {name: value for name, value in os.environ.items() if not name.startswith(ENV_PREFIX)}
    env |= {
        f"{ENV_PREFIX}TEMPORAL__ADDRESS": dev_server.client.service_client.config.target_host,
        f"{ENV_PREFIX}TEMPORAL__TASK_QUEUE": task_queue,
        f"{ENV_PREFIX}KUBE__KUBECONFIG": kubeconfig,
        "PYTHONUNBUFFERED": "1",
    }
    with log.open("ab") as out:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "workers", cwd=REPO_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        yield process
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def eventually(what: str, probe: Callable[[], Any], within: float = 150.0) -> Any:
    deadline = time.monotonic() + within
    last: Any = None
    while time.monotonic() < deadline:
        last = probe()
        if asyncio.iscoroutine(last):
            last = await last
        if last:
            return last
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out after {within:.0f}s waiting for {what}; last saw {last!r}")


async def status_of(handle: WorkflowHandle[Any, InstanceStatus]) -> InstanceStatus:
    return await handle.query("status", result_type=InstanceStatus)


async def test_sigkilled_worker_mid_create_and_mid_update_leaves_exactly_the_right_pods(
    dev_server: WorkflowEnvironment, kubesim: KubeSim, task_queue: str, tmp_path: Path
) -> None:
    client = dev_server.client
    core = kubernetes.client.CoreV1Api(kubesim.api_client())
    namespace = f"kill-{uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": namespace}})
    # Slow enough that the kill lands mid-operation, fast enough for the test budget.
    kubesim.set_image_behavior("engine:slow", pull_seconds=1.5, ready_seconds=1.0)
    kubesim.set_image_behavior("engine:slow2", pull_seconds=1.5, ready_seconds=1.0)
    watcher = PodWatcher(kubesim.api_client(), TemporalSignalSink(client))
    await watcher.start()
    log = tmp_path / "worker.log"
    try:
        async with worker_process(dev_server, task_queue, kubesim.kubeconfig_path, log) as first:
            spec = instance_spec(namespace, "engine:slow", workers=3)
            spec = spec.model_copy(update={"index": 0})
            handle = await client.start_workflow(
                "Instance", spec, id=instance_workflow_id(namespace, "chat", "engine", 0),
                task_queue=task_queue, result_type=InstanceStatus,
            )  # fmt: skip
            # Killed after the pods were created and before they are ready: the restarted worker
            # must neither create them twice nor lose track of them. (A kill inside the create
            # activity itself costs its 30 s heartbeat timeout; the activity tests cover that.)
            await eventually("all four pods to exist", lambda: len(live_pod_uids(core, namespace)) == 4)
            assert (await status_of(handle)).phase == P.CREATING
            first.send_signal(signal.SIGKILL)
            await first.wait()
        async with worker_process(dev_server, task_queue, kubesim.kubeconfig_path, log):
            status = await eventually(
                "the Instance to be Ready after the restart",
                lambda: _ready(handle, incarnation=1),
            )
            pods = live_pod_uids(core, namespace)
            assert sorted(pods) == [
                "chat-engine-0-leader-0",
                "chat-engine-0-worker-0",
                "chat-engine-0-worker-1",
                "chat-engine-0-worker-2",
            ], log.read_text(errors="replace")[-3000:]
            assert sorted(status.pod_names) == sorted(pods)
            labels = [p.metadata.labels for p in core.list_namespaced_pod(namespace).items]
            assert {label["ome.io/incarnation"] for label in labels} == {"1"}, (
                "a pod of a second attempt leaked"
            )
            await handle.signal("delete", DeleteRequest(drain_seconds=0.0))
            await eventually("the Instance to be deleted", lambda: _deleted(handle))

        # Single-pod SurgeThenDrain, killed once the surge pod exists beside the old one.
        single = instance_spec(namespace, "engine:slow", workers=0).model_copy(update={"index": 2})
        async with worker_process(dev_server, task_queue, kubesim.kubeconfig_path, log) as second:
            handle = await client.start_workflow(
                "Instance", single, id=instance_workflow_id(namespace, "chat", "engine", 2),
                task_queue=task_queue, result_type=InstanceStatus,
            )  # fmt: skip
            await eventually("the single pod to serve", lambda: _ready(handle, incarnation=1))
            target = instance_spec(namespace, "engine:slow2", workers=0).model_copy(update={"index": 2})
            await handle.signal("update", UpdateRequest(spec=target))
            await eventually(
                "the surge pod to exist", lambda: "chat-engine-2-default-1" in live_pod_uids(core, namespace)
            )
            second.send_signal(signal.SIGKILL)
            await second.wait()
        async with worker_process(dev_server, task_queue, kubesim.kubeconfig_path, log):
            status = await eventually(
                "the update to finish after the restart",
                lambda: _on_revision(handle, target.revision),
            )
            assert sorted(live_pod_uids(core, namespace)) == ["chat-engine-2-default-1"]
            assert status.active_ordinal == 1
            await handle.signal("delete", DeleteRequest(drain_seconds=0.0))
            await eventually("the Instance to be deleted", lambda: _deleted(handle))
        assert live_pod_uids(core, namespace) == {}
    finally:
        await watcher.stop()


async def _ready(handle: WorkflowHandle[Any, InstanceStatus], incarnation: int) -> InstanceStatus | None:
    try:
        status = await status_of(handle)
    except Exception:  # noqa: BLE001 - no worker answers queries while it restarts
        return None
    return (
        status if status.phase == P.READY and status.serving and status.incarnation == incarnation else None
    )


async def _on_revision(handle: WorkflowHandle[Any, InstanceStatus], revision: str) -> InstanceStatus | None:
    try:
        status = await status_of(handle)
    except Exception:  # noqa: BLE001 - no worker answers queries while it restarts
        return None
    return (
        status if status.phase == P.READY and status.running_revision == revision and status.serving else None
    )


async def _deleted(handle: WorkflowHandle[Any, InstanceStatus]) -> bool:
    description = await handle.describe()
    return description.status is not None and description.status.name == "COMPLETED"
