"""An Instance whose headless Service a full `services` quota refuses (Instance version 13,
`instance-service-retried`): it goes on without it (its pods serve through the component's
Service) and says so once, then tries the Service again, 30 s after and doubling to every
5 minutes, until the quota has room; an event says when it is made. Runs recorded before went
on without the Service for the rest of the run: no DNS name for a leader, and no listing to tell
"available" by (spec reference §9). From version 14 (`instance-service-retried-in-bring-up`) the
tries go on during the bring-up too."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from models.instance import DeleteRequest, InstanceStatus
from tests.fixtures.temporal import register_search_attributes
from tests.replay.test_replay import replayer
from tests.workflows.instance_fake_cluster import FakeCluster
from tests.workflows.instance_harness import Harness, history_lines, ready_at, without_change
from workers.worker import build_worker
from workflows.instance import versions
from workflows.registry import WORKFLOWS

pytestmark = pytest.mark.workflows

SERVICE = "Service/chat-engine-1"


@asynccontextmanager
async def ready_without_service(
    workflow_env: WorkflowEnvironment, task_queue: str
) -> AsyncIterator[tuple[FakeCluster, WorkflowHandle[Any, InstanceStatus]]]:
    """A single-pod Instance whose headless Service a full quota refused, Ready, its worker running."""
    await register_search_attributes(workflow_env)
    cluster = FakeCluster(client=workflow_env.client, services_quota=0)
    harness = Harness(workflow_env, cluster, task_queue)
    async with build_worker(workflow_env.client, task_queue, None, activities=cluster.activities()):
        handle = await harness.start(harness.spec())
        await harness.until(handle, ready_at())
        yield cluster, handle


@pytest.mark.parametrize("recorded_before", [False, True], ids=["now", "runs-recorded-before"])
async def test_a_headless_service_a_full_quota_refused_is_made_once_the_quota_has_room(
    workflow_env: WorkflowEnvironment, task_queue: str, monkeypatch: pytest.MonkeyPatch, recorded_before: bool
) -> None:
    if recorded_before:
        without_change(monkeypatch, versions.SERVICE_RETRIED)
    async with ready_without_service(workflow_env, task_queue) as (cluster, handle):
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


@pytest.mark.parametrize("recorded_before", [False, True], ids=["now", "runs-recorded-before"])
async def test_the_service_is_tried_again_while_the_pods_come_up(
    workflow_env: WorkflowEnvironment, task_queue: str, monkeypatch: pytest.MonkeyPatch, recorded_before: bool
) -> None:
    """A leader's workers find it by the headless Service's name: from version 14 the Service is
    tried again during the bring-up too (`instance-service-retried-in-bring-up`), not only once
    the Instance is Ready; runs recorded before waited for the bring-up's end."""
    if recorded_before:
        without_change(monkeypatch, versions.SERVICE_RETRIED_IN_BRING_UP)
    await register_search_attributes(workflow_env)
    cluster = FakeCluster(client=workflow_env.client, services_quota=0)
    starting = [True]

    def not_ready_while_starting(cluster: FakeCluster) -> None:
        for pod in cluster.pods.values():
            pod.containers_ready = pod.containers_ready and not starting[0]

    cluster.on_change = not_ready_while_starting
    harness = Harness(workflow_env, cluster, task_queue)
    async with build_worker(workflow_env.client, task_queue, None, activities=cluster.activities()):
        handle = await harness.start(harness.spec(workers=1))
        await harness.until(handle, lambda s: s.operation is not None and len(cluster.pods) == 2, step=1)
        cluster.services_quota = 1
        for _ in range(8):  # the tries at 30, 60, 120 s ...: past 5 minutes
            await workflow_env.sleep(60)
            if SERVICE in cluster.objects:
                break
        status = await harness.until(handle, lambda s: True)
        assert status.phase == "Creating" and not status.serving
        assert (SERVICE in cluster.objects) is not recorded_before
        starting[0] = False
        for pod in cluster.pods.values():
            pod.containers_ready = True
        await cluster.notify_pod(next(iter(cluster.pods.values())).manifest)
        await harness.until(handle, ready_at())
        if recorded_before:  # made at the loop's first pass once Ready (its time has come)
            await harness.until(handle, lambda s: SERVICE in cluster.objects)
        await handle.signal("delete", DeleteRequest())
        await handle.result()


@pytest.mark.parametrize("run", range(8))
async def test_a_recorded_bring_up_replays_whichever_of_news_and_result_came_first(
    workflow_env: WorkflowEnvironment, task_queue: str, run: int
) -> None:
    """The fake cluster's gate write signals the Instance from inside the local activity, so the
    watcher's news and the write's result race; under load the worker now and then hands the
    result to the workflow in the task after the news, though its marker is in the task before,
    and the replay hands it over first. With a timer of the bring-up's own running (here the
    refused Service's retry at 30 s), the moment's wait must add no command, or such a history
    fails to replay. Without `instance-moment-keeps-timer`, 3 to 6 of these 8 runs did not replay
    under `pytest -n 2`."""
    async with ready_without_service(workflow_env, task_queue) as (_, handle):
        await handle.signal("delete", DeleteRequest())
        await handle.result()
    lines = await history_lines(handle)
    assert "MARKER_RECORDED put chat-engine-1 into rotation (1 pods)" in lines
    result = await replayer(list(WORKFLOWS)).replay_workflow(await handle.fetch_history(), raise_on_replay_failure=False)
    assert result.replay_failure is None, f"run {run}: {result.replay_failure}\n" + "\n".join(lines)
