"""What an Instance's operation waits on reaches its InferenceReplica's row (Instance version 10,
`instance-waits-reported`; the rule: tests/unit/test_instance_wait_reports.py).

A ResourceQuota holds the namespace to one pod: a scale-up's new Instances wait for room
(`QuotaExceeded`). Their rows say so, as `omectl rollout tree` prints them (`waiting
QuotaExceeded`); before, a single-pod Instance sent nothing until its pod existed and its row
was a bare `Creating` from the launch record. Once the quota has room, the wait's end is news too.

A quota its controller has not counted (the API server's 403 `status unknown for quota`) holds a
create the same way, shown as `QuotaNotCounted` (Instance version 11,
`instance-quota-not-counted-waits`): before, the create was retried inside its activity call, its
row a bare `Creating`, and a scale-down could not end it until the quota was counted.
"""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.client import Client

from kubesim.handle import KubeSim
from tests.kubesim.helpers import quota_counted
from tests.workflows.service_harness import NAMESPACE, Story, eventually, isvc_manifest, story

pytestmark = pytest.mark.workflows


async def rows(s: Story) -> list[tuple[int, str, str | None]]:
    """(index, phase, what its operation waits on) of each row of the InferenceReplica's status."""
    status = await s.replica_status()
    return [
        (row.index, row.phase, row.operation.waiting if row.operation is not None else None)
        for row in status.instance_statuses
    ]


async def rows_are(s: Story, expected: list[tuple[int, str, str | None]]) -> Any:
    return await rows(s) == expected


async def one_ready_under_a_quota_of_one_pod(s: Story, quota: str, limit: str = "pods") -> None:
    """Instance 0 Ready, then a quota of one pod on the namespace (or of one GPU, what each
    pod requests: `limit="requests.nvidia.com/gpu"`), counted."""
    await s.apply(isvc_manifest(minReplicas=1, maxReplicas=1))
    await eventually(lambda: rows_are(s, [(0, "Ready", None)]), "Instance 0 Ready", within=90)
    s.core.create_namespaced_resource_quota(NAMESPACE, {"metadata": {"name": quota}, "spec": {"hard": {limit: "1"}}})
    await eventually(lambda: quota_counted(s.core, NAMESPACE, quota), "the quota counted")


@pytest.mark.parametrize("limit", ["pods", "requests.nvidia.com/gpu"])
async def test_a_create_waiting_for_quota_shows_in_the_replicas_rows_until_it_has_room(
    dev_client: Client, task_queue: str, kubesim: KubeSim, limit: str
) -> None:
    """Of pods, or of GPUs: the quota a GPU fleet sets."""
    async with story(dev_client, task_queue, kubesim) as s:
        await one_ready_under_a_quota_of_one_pod(s, "one-pod", limit)

        await s.apply(isvc_manifest(minReplicas=3, maxReplicas=3))
        waiting = [(0, "Ready", None), (1, "Creating", "QuotaExceeded"), (2, "Creating", "QuotaExceeded")]
        await eventually(lambda: rows_are(s, waiting), "1 and 2 shown waiting for quota")
        instance = await s.instance(1)
        assert instance.operation is not None and instance.operation.waiting == "QuotaExceeded"

        s.core.patch_namespaced_resource_quota("one-pod", NAMESPACE, {"spec": {"hard": {limit: "3"}}})
        ready = [(0, "Ready", None), (1, "Ready", None), (2, "Ready", None)]
        # The create tries again within `QUOTA_RECHECK` (30 s): quota frees without a pod event.
        await eventually(lambda: rows_are(s, ready), "three Ready, no wait shown", within=90)


async def test_a_create_waiting_for_a_quota_to_be_counted_shows_and_can_be_called_off(
    dev_client: Client, task_queue: str, kubesim: KubeSim
) -> None:
    async with story(dev_client, task_queue, kubesim) as s:
        await one_ready_under_a_quota_of_one_pod(s, "pods")
        # Its use unknown again, as for a quota just created: the API server refuses every pod.
        s.core.patch_namespaced_resource_quota_status("pods", NAMESPACE, [{"op": "remove", "path": "/status/used"}])

        await s.apply(isvc_manifest(minReplicas=3, maxReplicas=3))
        waiting = [(0, "Ready", None), (1, "Creating", "QuotaNotCounted"), (2, "Creating", "QuotaNotCounted")]
        await eventually(lambda: rows_are(s, waiting), "1 and 2 shown waiting for the quota to be counted")
        # A scale-down ends a wait: Instance 2 goes without its create ever getting through.
        await s.apply(isvc_manifest(minReplicas=2, maxReplicas=2))
        await eventually(lambda: rows_are(s, waiting[:2]), "Instance 2 gone while its create waited")
        assert [p.metadata.labels["ome.io/instance-index"] for p in s.pods()] == ["0"], "no pod got through"

        # A new limit has the controller count the quota: the create gets through within `QUOTA_RECHECK`.
        s.core.patch_namespaced_resource_quota("pods", NAMESPACE, {"spec": {"hard": {"pods": "3"}}})
        await eventually(lambda: rows_are(s, [(0, "Ready", None), (1, "Ready", None)]), "two Ready", within=90)


async def test_a_gang_half_made_under_a_quota_asks_only_for_the_rest(
    dev_client: Client, task_queue: str, kubesim: KubeSim
) -> None:
    """A quota with room for one more pod: the new gang Instance's leader is made, its worker
    refused (`QuotaExceeded`). Once the quota has room, the next try asks for the worker alone
    (Instance version 11, `instance-partial-create-kept`). Before, it posted the leader again,
    which the API server charges to the quota before it finds the name taken: the worker was
    refused again until the quota was counted again, and the next try charged it again."""
    gang = {"leader": {}, "worker": {"size": 1}}
    async with story(dev_client, task_queue, kubesim) as s:
        await s.apply(isvc_manifest(minReplicas=1, maxReplicas=2, **gang))
        await eventually(lambda: rows_are(s, [(0, "Ready", None)]), "Instance 0 Ready", within=90)
        s.core.create_namespaced_resource_quota(NAMESPACE, {"metadata": {"name": "three"}, "spec": {"hard": {"pods": "3"}}})
        await eventually(lambda: quota_counted(s.core, NAMESPACE, "three"), "the quota counted")

        await s.apply(isvc_manifest(minReplicas=2, maxReplicas=2, **gang))
        await eventually(lambda: rows_are(s, [(0, "Ready", None), (1, "Creating", "QuotaExceeded")]), "1 waits")
        (leader,) = [p for p in s.pods() if p.metadata.labels["ome.io/instance-index"] == "1"]
        s.core.patch_namespaced_resource_quota("three", NAMESPACE, {"spec": {"hard": {"pods": "4"}}})
        ready = [(0, "Ready", None), (1, "Ready", None)]
        await eventually(lambda: rows_are(s, ready), "Instance 1 Ready once the quota has room", within=90)
        assert leader.metadata.uid in {p.metadata.uid for p in s.pods()}, "the leader made first was kept"
