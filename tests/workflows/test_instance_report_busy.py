"""A report its parent's server refuses as busy is answered at once and sent again shortly
(`versions.REPORT_BUSY_LATER`, `workflows.instance.reports`). The server refuses signals to a
parent InferenceReplica whose continue-as-new is being tried again, for as long as the retried
task replays its history (1-2 s on the bench); the report, a local activity, held the Instance's
workflow task open that long, and the news behind it (a killed pod's) waited: a recreation began
1.29 s after the kill."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from temporalio import activity
from temporalio.testing import WorkflowEnvironment

from activities.workflow_signals import SignalActivities
from models.instance import DeleteRequest, RestartPolicy
from models.signal_ops import SIGNAL_WORKFLOW, SignalWorkflowInput, SignalWorkflowResult
from tests.workflows.instance_fake_cluster import FakeCluster
from tests.workflows.instance_harness import ready_at, reporting_to_a_fake_parent, without_change
from workflows.instance import versions

pytestmark = pytest.mark.workflows

BUSY_SECONDS = 2.0
"""How long the parent stays busy once the pod is killed (real time: a local activity's waits
are not skipped)."""


class BusyParentLine:
    """The real report activity, in front of a parent the server calls busy for `BUSY_SECONDS`
    from `busy_from`: a send that gives up (`busy_within_seconds`) is answered busy after its
    bound, one that does not waits the busy time out, as the activity's retries do."""

    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster
        self.busy_until = 0.0
        self.busy_answers = 0
        self.real = SignalActivities()

    def busy_from_now(self) -> None:
        self.busy_until = asyncio.get_running_loop().time() + BUSY_SECONDS

    def activities(self) -> list[Any]:
        @activity.defn(name=SIGNAL_WORKFLOW)
        async def signal_workflow(request: SignalWorkflowInput) -> SignalWorkflowResult:
            left = self.busy_until - asyncio.get_running_loop().time()
            if left > 0:
                within = request.busy_within_seconds
                if within is not None and within < left:
                    await asyncio.sleep(within)
                    self.busy_answers += 1
                    return SignalWorkflowResult(delivered=False, busy=True, reason="busy: closing")
                await asyncio.sleep(left)
            return await self.real.signal_workflow(request)

        return [signal_workflow]


@pytest.mark.parametrize("busy_later", [True, False], ids=["answered-busy", "tried-on"])
async def test_a_busy_parent_holds_neither_the_recreation_nor_the_last_report(
    workflow_env: WorkflowEnvironment, task_queue: str, monkeypatch: pytest.MonkeyPatch, busy_later: bool
) -> None:
    if not busy_later:  # the path of runs recorded before the change
        without_change(monkeypatch, versions.REPORT_BUSY_LATER)
    cluster = FakeCluster(client=workflow_env.client)
    line = BusyParentLine(cluster)
    loop = asyncio.get_running_loop()
    async with reporting_to_a_fake_parent(workflow_env, task_queue, cluster, line.activities()) as (harness, parent):
        handle = await harness.start(
            harness.spec(parent_workflow_id=parent.id, restart_policy=RestartPolicy.RECREATE_INSTANCE_ON_POD_RESTART)
        )
        await harness.until(handle, ready_at())
        reports_before = len(await parent.query("phases"))
        line.busy_from_now()
        killed_at = loop.time()
        # The container restarts: the Instance reports it, then retires the pod and makes a new one.
        await cluster.crash(next(iter(cluster.pods)))
        while len(cluster.created) < 2 and loop.time() - killed_at < 10:
            await workflow_env.sleep(0.1)  # the Instance's own timers are skipped; the busy time is not
        recreated_after = loop.time() - killed_at
        await harness.until(handle, ready_at(incarnation=2), step=1.0)
        # Once the parent takes signals again, it hears the Instance Ready on its new pod with
        # no other news to bring the report: the Instance sends it again by itself.
        await asyncio.sleep(max(0.0, line.busy_until - loop.time()))
        for _ in range(10):
            phases = await parent.query("phases")
            if phases[-1] == "Ready" and len(phases) > reports_before:
                break
            await workflow_env.sleep(1)
        heard = (await parent.query("phases"))[reports_before:]
        await handle.signal("delete", DeleteRequest())
        await parent.result()
    assert heard and heard[-1] == "Ready", heard
    if busy_later:
        assert line.busy_answers >= 1
        assert recreated_after < 1.0, f"the recreation waited {recreated_after:.2f} s on the busy parent"
    else:
        # The report tried on while the parent was busy, and the recreation waited behind it.
        assert line.busy_answers == 0
        assert recreated_after >= BUSY_SECONDS - 0.2, recreated_after
