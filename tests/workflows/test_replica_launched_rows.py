"""An Instance the InferenceReplica has started but not heard from is shown, counted and later
replaced by its own report (the rule itself: tests/unit/test_replica_launched_rows.py).

A single-pod Instance sends no report while it is only `Creating` (`launched_by_parent`): its
parent counts it from its launch record. The InferenceReplica's status (and with it the
`ome_instances` metric, which counts `instanceStatuses` rows by phase) must still list it.
"""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.client import Client

from kubesim.handle import KubeSim
from tests.workflows.service_harness import IMAGE_1, Story, engine_ready, eventually, isvc_manifest, story

pytestmark = pytest.mark.workflows

PULL_SECONDS = 6.0
"""Long enough to read the status while both Instances pull their image."""


async def counting_its_pod(s: Story, index: int) -> Any:
    """The Instance's own status once it counts its one pod, else None."""
    instance = await s.instance(index)
    return instance if instance.total_pods == 1 else None


async def rows(s: Story) -> list[tuple[int, str, int]]:
    """(index, phase, pods) of each row of the InferenceReplica's status."""
    status = await s.replica_status()
    return [(row.index, row.phase, row.pods.total) for row in status.instance_statuses]


async def test_instances_not_heard_from_are_listed_creating_until_their_report(
    dev_client: Client, task_queue: str, kubesim: KubeSim
) -> None:
    kubesim.set_image_behavior(IMAGE_1, pull_seconds=PULL_SECONDS)
    async with story(dev_client, task_queue, kubesim) as s:
        await s.apply(isvc_manifest())
        # Both pods exist and pull. An Instance that has not reported is listed from its
        # launch record (no pods); one whose pod-created report came is listed from it.
        await eventually(lambda: len(s.pods()) == 2, "both engine pods created")
        listed = await rows(s)
        assert [(index, phase) for index, phase, _ in listed] == [(0, "Creating"), (1, "Creating")]
        assert all(pods in (0, 1) for _, _, pods in listed)
        status = await s.replica_status()
        assert status.ready_replicas == 0
        for index in (0, 1):
            # The pod exists once the create's request returns; the Instance takes the answer
            # at its next activation, and a query can come first.
            instance = await eventually(
                lambda index=index: counting_its_pod(s, index), f"Instance {index} to count its pod", PULL_SECONDS / 2
            )
            assert instance.phase.value == "Creating"

        await eventually(lambda: engine_ready(s), "two Ready engine Instances", within=PULL_SECONDS + 60)
        assert await rows(s) == [(0, "Ready", 1), (1, "Ready", 1)]
