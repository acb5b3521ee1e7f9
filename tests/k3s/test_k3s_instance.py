"""The Instance workflow on Temporal's time-skipping server, with the real activities and the
watcher acting on k3s: a single-pod Instance comes up Ready and serving, its pod is deleted
behind its back (as `kubectl delete pod` would), and the Instance brings a new pod up.

The test only queries while k3s works in real time, so the test server never skips time
under a pod that is about to become Ready (ARCHITECTURE.md, "Tests").
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from kubernetes.client import ApiClient, CoreV1Api, V1DeleteOptions
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from models.instance import DeleteRequest, InstancePhase, InstanceSpec, InstanceStatus
from tests.fixtures.temporal import register_search_attributes
from tests.k3s.helpers import WAIT_SECONDS, api_client, conditions, fresh_namespace, instance_spec, read_pod
from workers.watch.pods import PodWatcher, TemporalSignalSink
from workers.worker import build_worker
from workflows.names import instance_workflow_id

pytestmark = pytest.mark.k3s

Handle = WorkflowHandle[Any, InstanceStatus]


@pytest.fixture(scope="module")
def client(k3s_kubeconfig: Path) -> ApiClient:
    return api_client(k3s_kubeconfig)


@pytest.fixture
def namespace(client: ApiClient) -> Iterator[str]:
    with fresh_namespace(client, "inst") as name:
        yield name


@pytest_asyncio.fixture
async def running(
    workflow_env: WorkflowEnvironment, client: ApiClient, task_queue: str
) -> AsyncIterator[None]:
    """A worker with every workflow and the real activities, and the watcher, both on k3s."""
    await register_search_attributes(workflow_env)
    watcher = PodWatcher(client, TemporalSignalSink(workflow_env.client))
    await watcher.start()
    try:
        async with build_worker(workflow_env.client, task_queue, client):
            yield
    finally:
        await watcher.stop()


async def start(env: WorkflowEnvironment, spec: InstanceSpec, task_queue: str) -> Handle:
    return await env.client.start_workflow(
        "Instance",
        spec,
        id=instance_workflow_id(spec.namespace, spec.isvc, spec.component, spec.index),
        task_queue=task_queue,
        result_type=InstanceStatus,
    )


async def until(handle: Handle, test: Callable[[InstanceStatus], bool], what: str) -> InstanceStatus:
    """Query until `test` holds, in real time (a query never makes the test server skip time)."""
    deadline = time.monotonic() + WAIT_SECONDS
    status: InstanceStatus = await handle.query("status", result_type=InstanceStatus)
    while not test(status):
        if time.monotonic() > deadline:
            raise AssertionError(
                f"the Instance did not reach {what} within {WAIT_SECONDS:.0f}s; last status: {status}"
            )
        await asyncio.sleep(0.5)
        status = await handle.query("status", result_type=InstanceStatus)
    return status


def serving(status: InstanceStatus) -> bool:
    return status.phase == InstancePhase.READY and status.serving


async def test_deleted_pod_is_recreated(
    workflow_env: WorkflowEnvironment, client: ApiClient, namespace: str, task_queue: str, running: None
) -> None:
    spec = instance_spec(namespace)
    handle = await start(workflow_env, spec, task_queue)
    status = await until(handle, serving, "Ready and serving")
    (name,) = status.pod_names
    first = read_pod(client, namespace, name)
    assert first is not None
    assert conditions(first).get("ome.io/serving") == "True", "the workflow put the pod in rotation"
    assert first["metadata"]["labels"]["ome.io/instance-index"] == "0"

    core = CoreV1Api(client)
    await asyncio.to_thread(
        core.delete_namespaced_pod, name, namespace, body=V1DeleteOptions(grace_period_seconds=0)
    )

    def replaced(status: InstanceStatus) -> bool:
        # Only a pod the workflow created after the deletion counts, whichever ordinal it took.
        pods = [read_pod(client, namespace, pod_name) for pod_name in status.pod_names]
        return serving(status) and all(
            pod and pod["metadata"]["uid"] != first["metadata"]["uid"] for pod in pods
        )

    recovered = await until(handle, replaced, "Ready again on a new pod")
    (second_name,) = recovered.pod_names
    second = read_pod(client, namespace, second_name)
    assert second is not None and conditions(second).get("Ready") == "True"

    await handle.signal("delete", DeleteRequest())
    final = await until(handle, lambda s: s.deleted, "deleted")
    assert final.deleted
