"""`make up` as a user meets it: the stack answers the CLI and the UI, stops cleanly on Ctrl-C,
and a second start resumes the same state (a running workflow, kubesim's objects); with
Prometheus installed, it runs one that scrapes kubesim's simulated engines and the worker.

The workflow here is test-only and runs on a test worker in this process against the stack's
server, so the test depends on the stack's machinery, not on any product workflow.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any
from uuid import uuid4

import kubernetes.client

from tests.e2e.notebook import NOTEBOOK, NotebookWorkflow
from tests.e2e.running_stack import RunningStack
from tests.fixtures.prometheus import (
    by_label,
    prometheus_missing_reason,
    query_prometheus,
    require_prometheus,
)
from workers.config import KubeSettings, kube_api_client
from workers.worker import build_worker
from workflows.search_attributes import ALL as SEARCH_ATTRIBUTES


def ui_status(url: str, within: float = 60.0) -> int:
    """HTTP status of the UI's front page, retrying while the server still refuses connections."""
    deadline = time.monotonic() + within
    while True:
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return int(response.status)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def workflow_status(stack: RunningStack, workflow_id: str) -> str:
    described = stack.temporal_json("workflow", "describe", "--workflow-id", workflow_id)
    return str(described["workflowExecutionInfo"]["status"])


def stop_order(log: str) -> list[str]:
    """Names of the children in the order the stack reported them stopped."""
    return re.findall(r"^([\w-]+) stopped \(exit code -?\d+\)$", log, flags=re.MULTILINE)


def expected_stop_order() -> list[str]:
    """Reverse start order (two controllers and two watchers); Prometheus runs only where it is installed."""
    prometheus = [] if prometheus_missing_reason() else ["prometheus"]
    return ["controller-2", "controller", "watcher-2", "watcher", "worker", *prometheus, "webhook", "kubesim", "temporal"]


def worker_environment(log: str) -> dict[str, str]:
    """The environment the stack gave its worker, read from /proc by the pid the worker logs."""
    match = re.search(r"\[worker\] .* worker (\d+)@\S+ polling task queue", log)
    assert match, log
    raw = Path(f"/proc/{match.group(1)}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item)


def core_api(kubeconfig: Path) -> kubernetes.client.CoreV1Api:
    return kubernetes.client.CoreV1Api(kube_api_client(KubeSettings(kubeconfig=kubeconfig)))


async def test_stack_serves_stops_cleanly_and_resumes_its_state(tmp_path: Path) -> None:
    stack = RunningStack(tmp_path / "data", tmp_path / "stack.log")
    task_queue = f"tq-{uuid4()}"
    workflow_id = f"notebook-{uuid4()}"
    # Blocking waits run off the loop: the session loop serves the test worker.
    await asyncio.to_thread(stack.start)
    try:
        # The two promises the README makes first: the CLI answers and the UI serves.
        stack.temporal("workflow", "list")
        assert ui_status(stack.ui_url) == 200

        client = await stack.client()
        async with build_worker(client, task_queue, None, extra_workflows=[NotebookWorkflow], activities=[]):
            # The CLI blocks, and the worker needs this loop to answer: run the CLI off the loop.
            await asyncio.to_thread(
                stack.temporal, "workflow", "start", "--type", NOTEBOOK,
                "--task-queue", task_queue, "--workflow-id", workflow_id,
            )  # fmt: skip
            await asyncio.to_thread(
                stack.temporal, "workflow", "signal", "--workflow-id", workflow_id,
                "--name", "note", "--input", json.dumps("before restart"),
            )  # fmt: skip
            queried = await asyncio.to_thread(
                stack.temporal_json, "workflow", "query", "--workflow-id", workflow_id, "--name", "notes"
            )
            assert queried["queryResult"] == [["before restart"]]

        core_api(stack.kubeconfig).create_namespaced_config_map(
            "default",
            kubernetes.client.V1ConfigMap(
                metadata=kubernetes.client.V1ObjectMeta(name="survives-restart"), data={"kept": "yes"}
            ),
        )
    finally:
        first_exit = await asyncio.to_thread(stack.stop)

    log = stack.log()
    assert first_exit == 0, log
    # Reverse start order: nothing loses the process it talks to while it still works.
    assert stop_order(log) == expected_stop_order(), log
    assert (stack.data_dir / "temporal.db").is_file()
    assert (stack.data_dir / "kubesim.json").is_file()

    await asyncio.to_thread(stack.start)
    try:
        assert workflow_status(stack, workflow_id) == "WORKFLOW_EXECUTION_STATUS_RUNNING"
        kept = core_api(stack.kubeconfig).read_namespaced_config_map("survives-restart", "default")
        assert kept.data == {"kept": "yes"}

        client = await stack.client()
        async with build_worker(client, task_queue, None, extra_workflows=[NotebookWorkflow], activities=[]):
            await asyncio.to_thread(
                stack.temporal, "workflow", "signal", "--workflow-id", workflow_id,
                "--name", "note", "--input", json.dumps("after restart"),
            )  # fmt: skip
            await asyncio.to_thread(
                stack.temporal, "workflow", "signal", "--workflow-id", workflow_id, "--name", "close"
            )
            # The note from before the restart is still there: the history survived, not just the ID.
            notes = await client.get_workflow_handle(workflow_id).result()
        assert notes == ["before restart", "after restart"]
    finally:
        second_exit = await asyncio.to_thread(stack.stop)
    assert second_exit == 0, stack.log()


def test_the_session_stack_serves_kubesim_and_the_search_attributes(stack: RunningStack) -> None:
    # zones=3,nodes-per-zone=4 (OME_STACK__KUBESIM_TOPOLOGY's default) is twelve nodes.
    nodes = core_api(stack.kubeconfig).list_node().items
    assert len(nodes) == 12
    listed = stack.temporal("operator", "search-attribute", "list").stdout
    for key in SEARCH_ATTRIBUTES:
        assert re.search(rf"^\s*{key.name}\s+Keyword\s*$", listed, flags=re.MULTILINE), listed


def test_the_session_stack_runs_prometheus_on_kubesims_engines_and_the_worker(stack: RunningStack) -> None:
    require_prometheus()
    assert f"Prometheus:         {stack.prometheus_url} (scrapes" in stack.log()
    # The worker finds it for canary analysis, and serves the metrics it scrapes.
    environment = worker_environment(stack.log())
    assert environment["OME_PROMETHEUS__URL"] == stack.prometheus_url
    assert environment["OME_PROMETHEUS__WORKER_METRICS_ADDRESS"] == f"127.0.0.1:{stack.worker_metrics_port}"
    # A pod put into rotation as the Instance workflow does it gets requests that Prometheus sees.
    core = core_api(stack.kubeconfig)
    namespace = f"traffic-{uuid4().hex[:8]}"
    core.create_namespace(
        kubernetes.client.V1Namespace(metadata=kubernetes.client.V1ObjectMeta(name=namespace))
    )
    labels = {"ome.io/inferenceservice": "chat", "ome.io/component": "engine", "ome.io/revision": "abc123"}
    core.create_namespaced_pod(namespace, {
        "metadata": {"name": "chat-engine", "labels": labels},
        "spec": {"containers": [{"name": "engine", "image": "vllm:0.6"}],
                 "readinessGates": [{"conditionType": "ome.io/serving"}]},
    })  # fmt: skip
    deadline = time.monotonic() + 60
    while not _containers_ready(core.read_namespaced_pod("chat-engine", namespace)):
        assert time.monotonic() < deadline, "the pod's containers were not ready within 60 s"
        time.sleep(0.5)
    core.patch_namespaced_pod_status(
        "chat-engine", namespace, {"status": {"conditions": [{"type": "ome.io/serving", "status": "True"}]}}
    )
    query = f'ome_inference_requests_total{{namespace="{namespace}",code="200"}}'
    found = poll_prometheus(stack, query, lambda result: bool(result) and float(result[0]["value"][1]) > 0)
    assert found[0]["metric"]["revision_hash"] == "abc123" and found[0]["metric"]["job"] == "kubesim"
    # Each target's first scrape comes at its own offset within the 5 s interval.
    poll_prometheus(
        stack, "up", lambda result: by_label(result, "job") == {"kubesim": 1, "worker": 1, "controller": 1, "prometheus": 1}
    )


def poll_prometheus(
    stack: RunningStack, query: str, accept: Callable[[list[dict[str, Any]]], bool], within: float = 90.0
) -> list[dict[str, Any]]:
    deadline = time.monotonic() + within
    while not accept(found := query_prometheus(stack.prometheus_url, query)):
        assert time.monotonic() < deadline, (
            f"Prometheus did not answer {query} as expected within {within:.0f} s: {found}"
        )
        time.sleep(1)
    return found


def _containers_ready(pod: kubernetes.client.V1Pod) -> bool:
    conditions = pod.status.conditions or []
    return any(c.type == "ContainersReady" and c.status == "True" for c in conditions)


def test_a_crashed_worker_stops_the_stack_with_the_reason(tmp_path: Path) -> None:
    stack = RunningStack(tmp_path / "data", tmp_path / "stack.log")
    stack.start()
    try:
        match = re.search(r"\[worker\] .* worker (\d+)@\S+ polling task queue", stack.log())
        assert match, stack.log()
        os.kill(int(match.group(1)), signal.SIGKILL)
        code = stack.wait_exit()
    finally:
        stack.stop()
    log = stack.log()
    assert code == 1, log
    assert "worker exited unexpectedly with code -9; stopping the stack" in log
    assert stop_order(log) == expected_stop_order(), log
