"""An update that reaches an Instance still Creating (or Restarting), whose pod serves already.

A single-pod Instance creates its pod with the `ome.io/serving` gate True: the pod joins the
Service as soon as it is ready, before the workflow has heard so. When the update arrives in the
same workflow task as the news that the pod is ready (the worker was away, as in
tests/e2e/test_chaos_worker_kill.py), the Instance serves already: it becomes Ready at the revision
it was created at, and the update goes by its way, a surge on the other ordinal, so it never
serves nothing. Runs recorded before rebuilt the serving pod on its stable names.
"""

from __future__ import annotations

import pytest
from temporalio.testing import WorkflowEnvironment

from models.instance import DeleteRequest, InstancePhase, RestartRequest, UpdateRequest
from tests.fixtures.temporal import register_search_attributes
from tests.workflows.instance_fake_cluster import FakeCluster
from tests.workflows.instance_harness import Harness, ready_at, without_change
from workers.worker import build_worker
from workflows.instance import versions

pytestmark = pytest.mark.workflows

P = InstancePhase
FIRST, SURGE = "chat-engine-1-default-0", "chat-engine-1-default-1"


@pytest.mark.parametrize("recorded_before", [False, True], ids=["now", "runs-recorded-before"])
@pytest.mark.parametrize("attempt", ["create", "restart"])
async def test_an_update_that_finds_the_new_pod_serving_surges_instead_of_rebuilding(
    workflow_env: WorkflowEnvironment,
    task_queue: str,
    monkeypatch: pytest.MonkeyPatch,
    attempt: str,
    recorded_before: bool,
) -> None:
    if recorded_before:
        without_change(monkeypatch, versions.READY_BEFORE_UPDATE)
    await register_search_attributes(workflow_env)
    cluster = FakeCluster(client=workflow_env.client, gate_at_create=True)
    starting = [attempt == "create"]

    def not_ready_while_starting(cluster: FakeCluster) -> None:
        for pod in cluster.pods.values():
            pod.containers_ready = pod.containers_ready and not starting[0]

    cluster.on_change = not_ready_while_starting
    harness = Harness(workflow_env, cluster, task_queue)
    # No sticky cache: the test server would send the next task to the stopped worker's sticky
    # queue for a while, as a real server does only after an unclean stop.
    async with build_worker(
        workflow_env.client, task_queue, None, activities=cluster.activities(), max_cached_workflows=0
    ):
        handle = await harness.start(harness.spec())
        if attempt == "restart":
            await harness.until(handle, ready_at())
            starting[0] = True
            await handle.signal("restart", RestartRequest(reason="operator"))
        status = await harness.until(
            handle, lambda s: s.operation is not None and s.operation.step == "CreatePods" and FIRST in cluster.pods, step=1
        )
        assert status.operation is not None and status.operation.type == attempt.title()
        assert not status.serving
    # The worker is away: the pod turns ready (its gate is True since its create, so it serves),
    # and the update arrives; the next workflow task hears both at once.
    starting[0] = False
    cluster.pods[FIRST].containers_ready = True
    await cluster.notify_pod(cluster.pods[FIRST].manifest)
    await handle.signal("update", UpdateRequest(spec=harness.spec("engine:2")))
    serving: list[int] = []
    cluster.on_change = lambda c: serving.append(
        sum(1 for pod in c.pods.values() if pod.serving and pod.containers_ready)
    )
    async with build_worker(workflow_env.client, task_queue, None, activities=cluster.activities()):
        status = await harness.until(handle, lambda s: s.phase == P.READY and s.running_revision == "rev-engine-2")
        log = cluster.serving_log
        if recorded_before:
            # The serving pod was rebuilt on its name at the new revision: nothing served meanwhile.
            assert status.active_ordinal == 0 and cluster.created[-2:] == [FIRST, FIRST]
            assert min(serving) == 0
        else:
            assert status.active_ordinal == 1 and sorted(cluster.pods) == [SURGE]
            assert cluster.created[-2:] == [FIRST, SURGE] and cluster.deleted[-1:] == [FIRST]
            # The attempt's pod leaves rotation only after the surge pod joins it.
            assert log[-2:] == [(SURGE, True), (FIRST, False)], log
            assert serving and min(serving) >= 1, serving
        await handle.signal("delete", DeleteRequest())
        await handle.result()
