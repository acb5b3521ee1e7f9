"""A gang Instance's bring-up puts its pods into rotation (a gate write, a local activity), then
waits a moment for the watcher to show the gate (Instance version 14, `instance-moment-keeps-timer`).
That wait keeps the timer the bring-up left running, its readiness deadline, and adds no command.
Runs recorded before cancelled it and started a 5-minute re-check in its place: two events per gang
bring-up, and commands that depended on whether the watcher's news or the write's result reached
the workflow first, which a replay cannot tell apart."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from models.instance import DeleteRequest, InstanceStatus
from tests.fixtures.temporal import register_search_attributes
from tests.workflows.instance_fake_cluster import FakeCluster
from tests.workflows.instance_harness import Harness, history_lines, ready_at, without_change
from workers.worker import build_worker
from workflows.instance import versions

pytestmark = pytest.mark.workflows

GATE_WRITE = "put chat-engine-1 into rotation (2 pods)"


async def ready_in_no_workflow_time(handle: WorkflowHandle[Any, InstanceStatus]) -> None:
    """Query until Ready, letting no workflow time pass: while the gate's news is on its way (wall
    clock), `Harness.until`'s steps would skip the 120 s deadline past."""
    for _ in range(400):
        if ready_at()(await handle.query("status", result_type=InstanceStatus)):
            return
        await asyncio.sleep(0.025)
    raise AssertionError("not Ready within 10 s")


@pytest.mark.parametrize("recorded_before", [False, True], ids=["now", "runs-recorded-before"])
async def test_the_moment_after_the_gate_write_keeps_the_readiness_timer(
    workflow_env: WorkflowEnvironment, task_queue: str, monkeypatch: pytest.MonkeyPatch, recorded_before: bool
) -> None:
    if recorded_before:
        without_change(monkeypatch, versions.MOMENT_KEEPS_TIMER)
    await register_search_attributes(workflow_env)
    # The watcher's news of the gate comes after the write's result, so the moment's wait runs
    # (when the news comes first, the bring-up goes on to Ready without it).
    cluster = FakeCluster(client=workflow_env.client, gate_news_delay=0.3)
    harness = Harness(workflow_env, cluster, task_queue)
    async with build_worker(workflow_env.client, task_queue, None, activities=cluster.activities()):
        # A readiness deadline shorter than the 5-minute re-check: the bring-up's timer is it.
        handle = await harness.start(harness.spec(workers=1, instance_ready_timeout_seconds=120))
        await ready_in_no_workflow_time(handle)
        lines = await history_lines(handle)
        gate = lines.index(f"MARKER_RECORDED {GATE_WRITE}")
        ready = lines.index("UPSERT_WORKFLOW_SEARCH_ATTRIBUTES", gate)
        timers = [line for line in lines[:ready] if line.startswith("TIMER_")]
        if recorded_before:
            after_gate = [line for line in lines[gate:ready] if line.startswith("TIMER_")]
            assert after_gate == ["TIMER_CANCELED", "TIMER_STARTED 300 s"], lines[gate:ready]
            assert timers == ["TIMER_STARTED 120 s", "TIMER_CANCELED", "TIMER_STARTED 300 s"]
        else:
            # From the pods' creation to Ready, one timer: the deadline, still running.
            assert timers == ["TIMER_STARTED 120 s"], "\n".join(lines[:ready])
            # Version 14 takes it without a marker.
            assert not any("patch" in line for line in lines), lines
        await handle.signal("delete", DeleteRequest())
        await handle.result()

