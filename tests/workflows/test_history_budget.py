"""`workflows.history_budget.hands_over` counts the bytes from the run's start: an
InferenceReplica of 2,000 Instances starts with ~1.4 MB of state, and counting its whole history
had it continue as new at every rest."""

from __future__ import annotations

import json
from pathlib import Path
from uuid import uuid4

import pytest
from temporalio.client import WorkflowHandle, WorkflowHistory
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer, Worker

from bench.lifecycle_stack import poll_until
from tests.workflows.budget_workflow import BudgetProbe
from workflows import history_budget

pytestmark = pytest.mark.workflows

BUDGET = 50_000
BEFORE_GROWTH = Path(__file__).parent / "histories" / "budget_probe_before_growth.json"
"""The probe's case 2 recorded under the old rule: told [True, True], a `probe-hands-over-early`
marker and no `history-budget-counts-growth` one."""


async def answered(handle: WorkflowHandle[BudgetProbe, list[bool]], count: int) -> bool:
    return await handle.query(BudgetProbe.answered) >= count


async def answers(env: WorkflowEnvironment, state_bytes: int, pokes: list[int]) -> list[bool]:
    """Start the probe with `state_bytes` of state, poke it with payloads of the given sizes,
    and answer what `hands_over` said at each; its history replays."""
    queue = f"budget-{uuid4().hex[:8]}"
    async with Worker(env.client, task_queue=queue, workflows=[BudgetProbe]):
        handle = await env.client.start_workflow(
            BudgetProbe.run, args=["s" * state_bytes, len(pokes)], id=f"budget-{uuid4()}", task_queue=queue
        )
        for asked, size in enumerate(pokes):
            # One poke per workflow task: each answer sees only the pokes before it.
            await poll_until("the previous answer", lambda asked=asked: answered(handle, asked), within=30, every=0.05)
            await handle.signal(BudgetProbe.poke, "p" * size)
        result = await handle.result()
    history = await handle.fetch_history()
    await Replayer(workflows=[BudgetProbe]).replay_workflow(history)
    return result


@pytest.mark.parametrize(
    ("case", "state_bytes", "pokes", "expected"),
    [
        ("a small run below the budget", 100, [100], [False]),
        ("a run that starts above the budget: not at once", BUDGET + 10_000, [100, 100], [False, False]),
        ("... but once it grew by the budget", BUDGET + 10_000, [100, BUDGET + 1_000], [False, True]),
        ("a small run that grew past it", 100, [BUDGET + 1_000], [True]),
    ],
)
async def test_hands_over_counts_the_bytes_from_the_run_s_start(
    workflow_env: WorkflowEnvironment,
    monkeypatch: pytest.MonkeyPatch,
    case: str,
    state_bytes: int,
    pokes: list[int],
    expected: list[bool],
) -> None:
    monkeypatch.setattr(history_budget, "BYTES", BUDGET)
    assert await answers(workflow_env, state_bytes, pokes) == expected, case


async def test_a_run_recorded_before_the_bytes_counted_from_its_start_replays_as_it_went(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Recorded with the rule before `GROWTH` (the whole history's bytes): that run, above the
    budget from its start, was told to hand over at once and at every ask; it replays so."""
    monkeypatch.setattr(history_budget, "BYTES", BUDGET)
    recorded = WorkflowHistory.from_json("budget-before-growth", json.loads(BEFORE_GROWTH.read_text()))
    replayed = await Replayer(workflows=[BudgetProbe]).replay_workflow(recorded)
    assert replayed.replay_failure is None
    patches = [
        event.marker_recorded_event_attributes.details["patch-data"].payloads[0].data
        for event in recorded.events
        if event.HasField("marker_recorded_event_attributes")
        and "patch-data" in event.marker_recorded_event_attributes.details
    ]
    assert len(patches) == 1 and b"probe-hands-over-early" in patches[0], patches
