"""An InferenceReplica counts the Instances it tells to delete from its own request
(`ReplicaState.requested_deletes`, `replica-counted-deletes`): each Instance it scales down
reports once, when it is gone (`instance-deletion-counted`), while the InferenceReplica's own
status shows it `Deleting` and out of rotation from the moment it asked; the Instance's
deletion counts its clock from that same moment, so both name one drain deadline."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from temporalio.client import Client, WorkflowHandle

from kubesim.handle import KubeSim
from tests.workflows.service_harness import NAMESPACE, Story, eventually, isvc_manifest, story
from tests.workflows.test_replica_teardown import live_pods, pin, unpin
from workflows.names import instance_workflow_id

pytestmark = pytest.mark.workflows

READY_TIMEOUT = 120.0


async def signals(s: Story, handle: WorkflowHandle[Any, Any], name: str, since: datetime) -> list[dict[str, Any]]:
    """The payloads of every `name` signal `handle`'s workflow took, over all its runs started
    `since` (the dev server is shared: earlier tests ran workflows of the same ids), in order."""
    found: list[dict[str, Any]] = []
    runs = [run async for run in s.client.list_workflows(f"WorkflowId = '{handle.id}'") if run.start_time >= since]
    for run in sorted(runs, key=lambda r: r.start_time):
        history = s.client.get_workflow_handle(handle.id, run_id=run.run_id)
        async for event in history.fetch_history_events():
            if event.HasField("workflow_execution_signaled_event_attributes"):
                signaled = event.workflow_execution_signaled_event_attributes
                if signaled.signal_name == name:
                    found.append(json.loads(signaled.input.payloads[0].data))
    return found


def instance(s: Story, index: int) -> WorkflowHandle[Any, Any]:
    return s.client.get_workflow_handle(instance_workflow_id(NAMESPACE, s.name, "engine", index))


def moment(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


async def rows_where(s: Story, test: Callable[[Any], bool]) -> dict[int, Any] | None:
    rows = {row.index: row for row in (await s.replica_status()).instance_statuses}
    return rows if test(rows) else None


async def deleting_pods(s: Story, index: int) -> Any:
    """Instance `index`'s Delete operation once it waits for its pods to go; None before."""
    operation = (await s.instance(index)).operation
    return operation if operation is not None and operation.step == "DeletePods" else None


async def test_a_scale_down_is_one_report_per_instance_and_the_replica_shows_the_drain_from_its_request(
    dev_client: Client, task_queue: str, kubesim: KubeSim
) -> None:
    cluster = {"drain_seconds": 1.0, "instance_ready_timeout_seconds": READY_TIMEOUT}
    begun = datetime.now(UTC)
    async with story(dev_client, task_queue, kubesim, cluster) as s:
        await s.apply(isvc_manifest(minReplicas=3, maxReplicas=3))
        await eventually(lambda: rows_where(s, lambda r: len(r) == 3 and all(x.phase == "Ready" for x in r.values())),
                         "three Ready Instances", within=90)  # fmt: skip
        # Instance 2's pod kept Terminating once deleted, as another controller's finalizer would.
        (pod,) = [p.metadata.name for p in live_pods(s) if p.metadata.labels["ome.io/instance-index"] == "2"]
        pin(s, pod)
        await s.apply(isvc_manifest(minReplicas=1, maxReplicas=1))

        # The delete the InferenceReplica sent says when it counts it from.
        (asked,) = await eventually(lambda: signals(s, instance(s, 2), "delete", begun), "the delete at Instance 2")
        since = moment(asked["countedSince"])
        assert asked["reason"] == "ScaleDown"
        deadline = since + timedelta(seconds=READY_TIMEOUT)

        # The Instance waits for its pod with its deletion's clock started at the request (not
        # when it took the signal): the one drain deadline both sides name.
        waiting = await eventually(lambda: deleting_pods(s, 2), "Instance 2 waiting for its pod to go")
        assert (waiting.started_at, waiting.deadline) == (since, deadline)

        # The InferenceReplica shows it as it asked: Deleting, out of rotation, its pod counted,
        # its Delete operation from the request (an Instance's own report would name `delete-<n>`).
        rows = await eventually(lambda: rows_where(s, lambda r: 2 in r), "Instance 2's row")
        row = rows[2]
        assert (row.phase, row.pods.total, row.pods.serving) == ("Deleting", 1, 0), row
        assert row.operation is not None, row
        assert (row.operation.id, row.operation.type, row.operation.started_at, row.operation.deadline) == (
            "delete", "Delete", since, deadline,
        ), row  # fmt: skip
        assert rows[0].phase == "Ready" and rows[0].pods.serving == 1
        unpin(s, pod)

        await eventually(lambda: rows_where(s, lambda r: sorted(r) == [0]), "only Instance 0 left", within=60)
        reports = await signals(s, s.irep(), "instance_changed", begun)
        for index in (1, 2):
            after_ready = [r for r in reports if r["index"] == index and r["phase"] == "Deleting"]
            # One report of the deletion, its end; the start (out of rotation, draining) is counted.
            assert [r["deleted"] for r in after_ready] == [True], after_ready
