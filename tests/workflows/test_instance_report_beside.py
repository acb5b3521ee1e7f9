"""The loop's report after a step goes out beside the next step (`versions.REPORT_BESIDE_NEXT_STEP`,
`workflows.instance.reports`): a pod failure's recreation does not wait on the report's
delivery. On the bench a parent InferenceReplica between two runs of a continue-as-new took
such a signal 0.5-3 s late, and the recreation waited that long behind it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from temporalio import activity
from temporalio.testing import WorkflowEnvironment

from activities.workflow_signals import SignalActivities
from models.instance import DeleteRequest
from models.signal_ops import SIGNAL_WORKFLOW, SignalWorkflowInput, SignalWorkflowResult
from tests.workflows.instance_fake_cluster import FakeCluster
from tests.workflows.instance_harness import ready_at, reporting_to_a_fake_parent, without_change
from workflows.instance import versions

pytestmark = pytest.mark.workflows

SLOW_DELIVERY_SECONDS = 1.5
"""How long each report takes to deliver once the parent turns slow (real time: a local
activity holds the workflow task open, so the test server does not skip it)."""


class SlowParentLine:
    """The real report activity, slowed once `slow` is set; for each report delivered then,
    the phase it carried and how many pods the cluster had created by the time it arrived."""

    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster
        self.slow = False
        self.delivered: list[tuple[str, int]] = []
        self.real = SignalActivities()

    def activities(self) -> list[Any]:
        @activity.defn(name=SIGNAL_WORKFLOW)
        async def signal_workflow(request: SignalWorkflowInput) -> SignalWorkflowResult:
            if self.slow:
                await asyncio.sleep(SLOW_DELIVERY_SECONDS)
            result = await self.real.signal_workflow(request)
            if self.slow:
                self.delivered.append((str(request.payload["phase"]), len(self.cluster.created)))
            return result

        return [signal_workflow]


@pytest.mark.parametrize("beside", [True, False], ids=["report-beside", "report-first"])
async def test_a_killed_pods_recreation_does_not_wait_on_a_slow_report(
    workflow_env: WorkflowEnvironment, task_queue: str, monkeypatch: pytest.MonkeyPatch, beside: bool
) -> None:
    if not beside:  # the path of runs recorded before the change
        without_change(monkeypatch, versions.REPORT_BESIDE_NEXT_STEP)
    cluster = FakeCluster(client=workflow_env.client)
    line = SlowParentLine(cluster)
    async with reporting_to_a_fake_parent(workflow_env, task_queue, cluster, line.activities()) as (harness, parent):
        handle = await harness.start(harness.spec(parent_workflow_id=parent.id))
        await harness.until(handle, ready_at())
        assert len(cluster.created) == 1
        line.slow = True
        await cluster.kill(next(iter(cluster.pods)))
        await harness.until(handle, lambda s: len(cluster.created) == 2 and ready_at()(s), step=1.0)
        line.slow = False
        await handle.signal("delete", DeleteRequest())
        await parent.result()
    _phase, created_by_then = line.delivered[0]
    if beside:
        # The first report after the kill went out once the new pod was made.
        assert created_by_then == 2, line.delivered
    else:
        # The report went first, and the recreation waited for it.
        assert created_by_then == 1, line.delivered
