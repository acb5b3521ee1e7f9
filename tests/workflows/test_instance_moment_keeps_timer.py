"""A gang Instance's bring-up puts its pods into rotation (a gate write, a local activity), then
waits a moment for the watcher to show the gate (Instance version 14, `instance-moment-keeps-timer`).
That wait keeps the timer the bring-up left running, its readiness deadline, and adds no command.
Runs recorded before cancelled it and started a 5-minute re-check in its place: two events per gang
bring-up, and commands that depended on whether the watcher's news or the write's result reached
the workflow first, which a replay cannot tell apart."""

from __future__ import annotations

import pytest
from temporalio.testing import WorkflowEnvironment

from models.instance import DeleteRequest
from tests.fixtures.temporal import register_search_attributes
from tests.workflows.instance_fake_cluster import FakeCluster
from tests.workflows.instance_harness import Harness, history_lines, ready_at, without_change
from workers.worker import build_worker
from workflows.instance import versions

pytestmark = pytest.mark.workflows

GATE_WRITE = "put chat-engine-1 into rotation (2 pods)"


@pytest.mark.parametrize("recorded_before", [False, True], ids=["now", "runs-recorded-before"])
async def test_the_moment_after_the_gate_write_keeps_the_readiness_timer(
    workflow_env: WorkflowEnvironment, task_queue: str, monkeypatch: pytest.MonkeyPatch, recorded_before: bool
) -> None:
    if recorded_before:
        without_change(monkeypatch, versions.MOMENT_KEEPS_TIMER)
    await register_search_attributes(workflow_env)
    cluster = FakeCluster(client=workflow_env.client)
    harness = Harness(workflow_env, cluster, task_queue)
    async with build_worker(workflow_env.client, task_queue, None, activities=cluster.activities()):
        # A readiness deadline shorter than the 5-minute re-check: the bring-up's timer is it.
        handle = await harness.start(harness.spec(workers=1, instance_ready_timeout_seconds=120))
        await harness.until(handle, ready_at())
        lines = await history_lines(handle)
        gate = lines.index(f"MARKER_RECORDED {GATE_WRITE}")
        ready = lines.index("UPSERT_WORKFLOW_SEARCH_ATTRIBUTES", gate)
        timers = [line for line in lines[:ready] if line.startswith("TIMER_")]
        if recorded_before:
            assert lines[gate + 1 : gate + 3] == ["TIMER_CANCELED", "TIMER_STARTED 300 s"], lines[gate:ready]
            assert timers == ["TIMER_STARTED 120 s", "TIMER_CANCELED", "TIMER_STARTED 300 s"]
        else:
            # From the pods' creation to Ready, one timer: the deadline, still running.
            assert timers == ["TIMER_STARTED 120 s"], lines[:ready]
            # Version 14 takes it without a marker.
            assert not any("patch" in line for line in lines), lines
        await handle.signal("delete", DeleteRequest())
        await handle.result()

