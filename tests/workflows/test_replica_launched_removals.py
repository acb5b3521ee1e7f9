"""Instances the InferenceReplica told to delete before they were ever heard from are removed
once (`replica-launched-removals`; the rule: tests/unit/test_replica_launched_removals.py).

An admission webhook holds the namespace's pod creations and deletions a few seconds each. A
scale-up's new Instances then wait on their pod's creation with nothing to report (their parent
counts them from its launch records); the scale-down that follows tells them to delete, and
their deletion waits on their pod's, so they stay unheard of while the remaining Instance's pod
restarts and the InferenceReplica plans again. Runs from before counted
them as live `Creating` Instances then, told them to delete a second time, and kept their
indexes reserved for good: the next scale-up started Instances 3 and 4 instead of 1 and 2.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from temporalio.client import Client

from kubesim.handle import KubeSim
from tests.kubesim.webhooks import WebhookServer, hold_writes, pod_writes
from tests.workflows.service_harness import NAMESPACE, Story, eventually, isvc_manifest, story
from tests.workflows.test_replica_deletes_counted import instance, signals
from tests.workflows.test_replica_teardown import live_pods

pytestmark = pytest.mark.workflows

HOLD_SECONDS = 4.0
"""How long the webhook holds each pod creation and deletion: long enough for Instance 0's pod to
restart and the InferenceReplica to plan again while Instances 1 and 2 are unheard of."""


@pytest.fixture(scope="module")
def hook_server() -> Iterator[WebhookServer]:
    server = WebhookServer().start()
    yield server
    server.stop()


async def rows(s: Story) -> list[tuple[int, str]]:
    return [(row.index, row.phase) for row in (await s.replica_status()).instance_statuses]


async def rows_are(s: Story, expected: list[tuple[int, str]]) -> bool:
    return await rows(s) == expected


async def rows_become(s: Story, expected: list[tuple[int, str]], what: str, within: float = 60.0) -> None:
    """Wait for the InferenceReplica's rows to be `expected`; fail with the rows last seen and
    the pods, which say which step held it."""
    try:
        await eventually(lambda: rows_are(s, expected), what, within=within)
    except AssertionError as error:
        pods = [(p.metadata.name, p.status.phase, p.metadata.deletion_timestamp is not None) for p in s.pods()]
        seen = await rows(s)
        lines = [f"{error}: rows {seen}, pods {pods}"]
        for index, _ in seen:
            handle = instance(s, index)
            lines.append(f"Instance {index}: {(await handle.describe()).status}")
            for event in (await handle.fetch_history()).events:
                lines.append(f"  {event.event_id} {event.event_time.ToDatetime():%H:%M:%S.%f} {event.WhichOneof('attributes')}")
        raise AssertionError("\n".join(lines)) from None


def pod_indexes(s: Story) -> list[int]:
    return sorted(int(p.metadata.labels["ome.io/instance-index"]) for p in live_pods(s))


async def test_instances_told_to_delete_before_their_first_report_are_removed_once(
    dev_client: Client, task_queue: str, kubesim: KubeSim, hook_server: WebhookServer
) -> None:
    begun = datetime.now(UTC)
    async with story(dev_client, task_queue, kubesim, {"drain_seconds": 0.0}) as s:
        await s.apply(isvc_manifest(minReplicas=1, maxReplicas=1))
        await rows_become(s, [(0, "Ready")], "Instance 0 Ready", within=90)

        release = hold_writes(kubesim, hook_server, "pods", NAMESPACE, pod_writes("CREATE", "DELETE"), HOLD_SECONDS)
        await s.apply(isvc_manifest(minReplicas=3, maxReplicas=3))
        # Unheard of: from the launch records.
        await rows_become(s, [(0, "Ready"), (1, "Creating"), (2, "Creating")], "1 and 2 started")
        await s.apply(isvc_manifest(minReplicas=1, maxReplicas=1))
        await rows_become(s, [(0, "Ready"), (1, "Deleting"), (2, "Deleting")], "1 and 2 Deleting")
        # Instance 0's pod restarts while their pods' creation, then deletion, is held: its
        # reports make the InferenceReplica plan again (twice) with 1 and 2 unheard of.
        (pod,) = [p.metadata.name for p in live_pods(s) if p.metadata.labels["ome.io/instance-index"] == "0"]
        kubesim.kill_pod(NAMESPACE, pod)
        await rows_become(s, [(0, "Ready")], "1 and 2 gone, 0 Ready again", within=60)

        for index in (1, 2):
            asked: list[Any] = await signals(s, instance(s, index), "delete", begun)
            assert [a["reason"] for a in asked] == ["ScaleDown"], f"Instance {index} told to delete once"

        # Their indexes are free again: the next scale-up starts Instances 1 and 2.
        release()
        await s.apply(isvc_manifest(minReplicas=3, maxReplicas=3))
        await rows_become(s, [(0, "Ready"), (1, "Ready"), (2, "Ready")], "three Ready", within=90)
        assert pod_indexes(s) == [0, 1, 2]
