"""An Instance whose headless Service a full `services` quota refuses (Instance version 13,
`instance-service-retried`): it goes on without it (its pods serve through the component's
Service) and says so once, then tries the Service again, 30 s after and doubling to every
5 minutes, until the quota has room; an event says when it is made. Runs recorded before went
on without the Service for the rest of the run: no DNS name for a leader, and no listing to tell
"available" by (spec reference §9)."""

from __future__ import annotations

import pytest
from temporalio.testing import WorkflowEnvironment

from models.instance import DeleteRequest
from tests.fixtures.temporal import register_search_attributes
from tests.workflows.instance_fake_cluster import FakeCluster
from tests.workflows.instance_harness import Harness, ready_at, without_change
from workers.worker import build_worker
from workflows.instance import versions

pytestmark = pytest.mark.workflows

SERVICE = "Service/chat-engine-1"


@pytest.mark.parametrize("recorded_before", [False, True], ids=["now", "runs-recorded-before"])
async def test_a_headless_service_a_full_quota_refused_is_made_once_the_quota_has_room(
    workflow_env: WorkflowEnvironment, task_queue: str, monkeypatch: pytest.MonkeyPatch, recorded_before: bool
) -> None:
    if recorded_before:
        without_change(monkeypatch, versions.SERVICE_RETRIED)
    await register_search_attributes(workflow_env)
    cluster = FakeCluster(client=workflow_env.client, services_quota=0)
    harness = Harness(workflow_env, cluster, task_queue)
    async with build_worker(workflow_env.client, task_queue, None, activities=cluster.activities()):
        handle = await harness.start(harness.spec())
        await harness.until(handle, ready_at())
        assert SERVICE not in cluster.objects
        [refused] = [message for reason, message in cluster.events if reason == "HeadlessServiceFailed"]
        assert 'services "chat-engine-1" is forbidden: exceeded quota: svc' in refused
        # Tried again at 30, 60, 120, 240 s ... while the quota is full, said once.
        await workflow_env.sleep(460)
        assert SERVICE not in cluster.objects
        assert [reason for reason, _ in cluster.events].count("HeadlessServiceFailed") == 1
        cluster.services_quota = 1
        for _ in range(8):  # at most the 5 minutes between tries
            await workflow_env.sleep(60)
            if SERVICE in cluster.objects:
                break
        if recorded_before:
            assert SERVICE not in cluster.objects and "HeadlessServiceCreated" not in cluster.reasons()
            assert not refused.endswith("tried again until the quota has room")
        else:
            assert SERVICE in cluster.objects
            assert refused.endswith("; tried again until the quota has room")
            [made] = [message for reason, message in cluster.events if reason == "HeadlessServiceCreated"]
            assert made == "headless Service chat-engine-1 created: the quota has room"
            # Made once: no more tries.
            applies = len(cluster.events)
            await workflow_env.sleep(900)
            assert len(cluster.events) == applies
        await handle.signal("delete", DeleteRequest())
        await handle.result()
        assert SERVICE not in cluster.objects
