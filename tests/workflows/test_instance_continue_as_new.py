"""A long-lived Instance continues as new without losing its state or a pending request.

The dev server here suggests continue-as-new after a couple hundred history events (see
tests/fixtures/temporal.py), so a burst of watcher signals walks the path in seconds.
"""

from __future__ import annotations

import asyncio
import time
from uuid import uuid4

import pytest
from temporalio.testing import WorkflowEnvironment

from models.instance import DeleteRequest, InstancePhase, InstanceStatus, RestartRequest
from tests.workflows.instance_fake_cluster import FakeCluster
from tests.workflows.instance_harness import make_spec
from workers.worker import build_worker
from workflows.names import instance_workflow_id

pytestmark = pytest.mark.workflows


async def wait_status(handle: object, test: object, within: float = 60.0) -> InstanceStatus:
    deadline = time.monotonic() + within
    while True:
        status = await handle.query("status", result_type=InstanceStatus)  # type: ignore[attr-defined]
        if test(status):  # type: ignore[operator]
            return status
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached within {within:.0f}s; last status: {status}")
        await asyncio.sleep(0.1)


async def test_continue_as_new_keeps_state_and_pending_signals(
    dev_server: WorkflowEnvironment, task_queue: str
) -> None:
    client = dev_server.client
    cluster = FakeCluster(client=client)
    namespace = f"can-{uuid4().hex[:8]}"
    spec = make_spec(workers=1, namespace=namespace, drain_seconds=0.0)
    async with build_worker(client, task_queue, None, activities=cluster.activities()):
        handle = await client.start_workflow(
            "Instance",
            spec,
            id=instance_workflow_id(namespace, "chat", "engine", 1),
            task_queue=task_queue,
            result_type=InstanceStatus,
        )
        first_run = (await handle.describe()).run_id
        # Follow the workflow id, not the first run: the run changes at continue-as-new.
        handle = client.get_workflow_handle(handle.id, result_type=InstanceStatus)
        await wait_status(handle, lambda s: s.phase == InstancePhase.READY and s.serving)
        summary = cluster.summary(namespace, "chat", "engine", 1)
        # Each signal adds history; the server soon suggests continuing as new.
        for _ in range(150):
            await handle.signal("pods_changed", summary)
        # A request sent right around the hand-over must still be served.
        await handle.signal("restart", RestartRequest(reason="after-continue-as-new"))
        status = await wait_status(
            handle, lambda s: s.incarnation == 2 and s.phase == InstancePhase.READY and s.serving
        )
        assert (await handle.describe()).run_id != first_run, "the Instance never continued as new"
        assert status.running_revision == spec.revision and status.ready_since is not None
        assert {pod.labels["ome.io/incarnation"] for pod in cluster.pods.values()} == {"2"}
        await handle.signal("delete", DeleteRequest())
        final = await handle.result()
        assert final.deleted and cluster.pods == {}
