"""The Rollout workflow on the time-skipping server, its parent stood in for: the plan it
pins, the allowances it reports as counts arrive, the sequence's soak on workflow time,
failures, supersession and parking (spec: the rollout groups page; reference §4, §6)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from typing import Any
from uuid import uuid4

import pytest
import pytest_asyncio
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from tests.fixtures.temporal import register_search_attributes
from tests.workflows.instance_fake_cluster import FakeCluster
from tests.workflows.rollout_parent import FakeRolloutParent
from workers.worker import build_worker
from workflows.names import rollout_workflow_id
from workflows.rollout.messages import ComponentCounts, RolloutInput, RolloutReport, RolloutView

pytestmark = pytest.mark.workflows

SEQUENCE = {"groups": [{"components": ["decoder"], "soak": "10m"}, {"components": ["engine"]}]}
BLUE_GREEN = {"groups": [{"components": ["engine", "decoder"]}]}


class Run:
    def __init__(self, env: WorkflowEnvironment, cluster: FakeCluster, task_queue: str) -> None:
        self.env, self.cluster, self.task_queue = env, cluster, task_queue
        self.namespace = f"ns-{uuid4().hex[:8]}"
        self.parent: WorkflowHandle[Any, Any] | None = None
        self.handle: WorkflowHandle[Any, RolloutView] | None = None

    async def start(self, rollout: dict[str, Any], replicas: dict[str, int], run: int = 2) -> None:
        client = self.env.client
        self.parent = await client.start_workflow(
            "FakeRolloutParent", id=f"isvc/{self.namespace}/chat", task_queue=self.task_queue
        )
        self.handle = await client.start_workflow(
            "Rollout",
            RolloutInput(
                namespace=self.namespace,
                isvc="chat",
                run=run,
                rollout=rollout,
                targets={name: f"{name}-new" for name in replicas},
                previous={name: f"{name}-old" for name in replicas},
                replicas=replicas,
                parent_workflow_id=self.parent.id,
            ),
            id=rollout_workflow_id(self.namespace, "chat", run),
            task_queue=self.task_queue,
            result_type=RolloutView,
        )

    async def counts(self, component: str, updated: int, serving_new: int, replicas: int = 1, failed: int = 0) -> None:
        assert self.handle is not None
        counts = ComponentCounts(
            component=component, revision=f"{component}-new", replicas=replicas, updated=updated,
            updated_serving=serving_new, serving=replicas, failed=failed,
        )
        await self.handle.signal("progress", counts)

    async def until(self, test: Callable[[RolloutReport], bool], step: float = 1.0) -> RolloutReport:
        assert self.parent is not None
        last = None
        for _ in range(200):
            reports = await self.parent.query("reports", result_type=list[RolloutReport])
            if reports and test(reports[-1]):
                return reports[-1]
            last = reports[-1] if reports else None
            await self.env.sleep(step)
        raise AssertionError(f"never reported; last: {last}")


@pytest_asyncio.fixture(loop_scope="session")
async def run(workflow_env: WorkflowEnvironment, task_queue: str) -> AsyncIterator[Run]:
    await register_search_attributes(workflow_env)
    cluster = FakeCluster(client=workflow_env.client)
    async with build_worker(
        workflow_env.client, task_queue, None, activities=cluster.activities(), extra_workflows=[FakeRolloutParent]
    ):
        yield Run(workflow_env, cluster, task_queue)


def hold(report: RolloutReport, component: str) -> tuple[int, str | None, str | None]:
    allowance = report.allowances[component]
    return allowance.limit, allowance.gate, allowance.reason


async def test_a_sequence_moves_the_decoder_then_the_engine_after_the_soak(run: Run) -> None:
    await run.start(SEQUENCE, {"decoder": 1, "engine": 1})
    first = await run.until(lambda r: "engine" in r.allowances)
    assert hold(first, "decoder") == (1, None, None)
    assert hold(first, "engine") == (0, "Sequential", "Sequential waiting on decoder")
    assert first.plan_digest is not None and first.plan_digest.startswith("rp1:")
    assert first.group_digests == ["rp1:cca45ec1fb0f", "rp1:cca45ec1fb0f"]

    await run.counts("decoder", updated=1, serving_new=1)
    soak = await run.until(lambda r: r.allowances["engine"].reason != "Sequential waiting on decoder")
    assert hold(soak, "engine") == (0, "Sequential", "Sequential.Soak: engine waiting out the 10m0s soak after decoder")
    # Nine minutes on: still soaking. The soak ends on the workflow's own timer.
    await run.env.sleep(timedelta(minutes=9).total_seconds())
    assert hold(await run.until(lambda r: True), "engine")[1] == "Sequential"
    released = await run.until(lambda r: r.allowances["engine"].gate is None, step=30)
    assert hold(released, "engine") == (1, None, None)

    await run.counts("engine", updated=1, serving_new=1)
    assert run.handle is not None
    result = await run.handle.result()
    assert result.outcome == "Completed" and result.reported == "Succeeded"
    assert [row.component for row in result.rows] == ["decoder", "engine"]
    assert {row.strategy for row in result.rows} == {"Sequential"}


async def test_a_failed_instance_fails_the_group_once_and_the_others_go_on(run: Run) -> None:
    await run.start(BLUE_GREEN, {"engine": 4, "decoder": 2})
    await run.until(lambda r: "decoder" in r.allowances)
    await run.counts("engine", updated=1, serving_new=0, replicas=4, failed=1)
    failed = await run.until(lambda r: r.group_phases == ["Failed"])
    # The decoder is not stopped: it keeps its wave-1 allowance.
    assert failed.allowances["decoder"].limit == 1
    await run.counts("decoder", updated=1, serving_new=1, replicas=2)
    # The report that shows the decoder's counts: the failed engine does not hold it back.
    later = await run.until(lambda r: any(row.component == "decoder" and row.ready == "1/2" for row in r.rows))
    assert later.allowances["decoder"].limit == 2 and later.group_phases == ["Failed"]
    assert run.cluster.events.count(("CoordinationGroupFailed", "rollout run 2: group 0 (engine, decoder) failed: a failed Instance in engine; the other components go on")) == 1


async def test_a_newer_run_supersedes_this_one(run: Run) -> None:
    await run.start(BLUE_GREEN, {"engine": 1, "decoder": 1})
    await run.until(lambda r: "engine" in r.allowances)
    assert run.handle is not None
    await run.handle.signal("supersede", 3)
    result = await run.handle.result()
    assert result.outcome == "Superseded"


async def test_a_plan_that_does_not_resolve_parks_until_spec_rollout_is_fixed(run: Run) -> None:
    await run.start({"groups": [{"components": ["engine"], "policyRef": {"name": "safe"}}]}, {"engine": 1})
    parked = await run.until(lambda r: r.parked_reason is not None)
    assert parked.parked_reason == "PolicyNotFound" and parked.allowances == {}
    assert "RolloutPlanParked" in run.cluster.reasons()
    assert run.handle is not None
    await run.handle.signal("respec", {"groups": [{"components": ["engine"], "blueGreen": {}}]})
    pinned = await run.until(lambda r: r.parked_reason is None)
    assert pinned.plan_digest is not None and hold(pinned, "engine") == (1, None, None)
    await run.counts("engine", updated=1, serving_new=1)
    assert (await run.handle.result()).outcome == "Completed"
