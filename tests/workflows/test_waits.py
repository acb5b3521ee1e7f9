"""`workflows.waiting.Waits`: with `keep`, a wake by news leaves the loop's timer running and
the next wait reuses it when it stands for the same thing (issue 17: two history events fewer
per wake, and no timer cancelled as it fires); a safety re-check giving way to a shorter wait
is parked and taken back; anything else replaces it, as without `keep`."""

from __future__ import annotations

from collections import Counter
from typing import Any
from uuid import uuid4

import pytest
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer, Worker

from bench.lifecycle_stack import poll_until
from tests.workflows.waits_workflow import WaitPlan, WaitsWorkflow, Woken

pytestmark = pytest.mark.workflows


async def timer_events(handle: WorkflowHandle[Any, Any]) -> Counter[str]:
    found: Counter[str] = Counter()
    async for event in handle.fetch_history_events():
        for kind in ("timer_started", "timer_canceled", "timer_fired"):
            if event.HasField(f"{kind}_event_attributes"):
                found[kind] += 1
    return found


async def run(env: WorkflowEnvironment, plan: WaitPlan, steps: list[tuple[str, Any]]) -> tuple[Woken, Counter[str]]:
    """Start the loop with `plan`, then for each step send a signal (`news`, `replan`) or skip
    seconds (`sleep`); finish and answer what woke it and its timer events, once its history
    replayed (each path of `Waits` decides the same way again)."""
    queue = f"waits-{uuid4().hex[:8]}"
    async with Worker(env.client, task_queue=queue, workflows=[WaitsWorkflow]):
        handle = await env.client.start_workflow(WaitsWorkflow.run, plan, id=f"waits-{uuid4()}", task_queue=queue)
        await poll_until("the loop's first wait", lambda: handle.query(WaitsWorkflow.armed), within=30, every=0.05)
        for kind, value in steps:
            if kind == "sleep":
                await env.sleep(value)
            elif kind == "news":
                await handle.signal(WaitsWorkflow.news)
            else:
                await handle.signal(WaitsWorkflow.replan, value)
            await handle.query(WaitsWorkflow.woke)  # the signal's task is done
        await handle.signal(WaitsWorkflow.finish)
        woken = await handle.result()
        replayer = Replayer(workflows=[WaitsWorkflow], data_converter=env.client.data_converter)
        await replayer.replay_workflow(await handle.fetch_history())
        return woken, await timer_events(handle)


NEWS_THREE_TIMES = [("news", None), ("news", None), ("news", None)]


@pytest.mark.parametrize(
    ("plan", "steps", "woken", "timers"),
    [
        # Without keep: each wake by news (and the end's) cancels the timer, the next wait starts another.
        (WaitPlan(keep=False), NEWS_THREE_TIMES, Woken(news=3), {"timer_started": 4, "timer_canceled": 4}),
        # Kept: one safety timer however many messages come (the end leaves it unfired).
        (WaitPlan(keep=True), NEWS_THREE_TIMES, Woken(news=3), {"timer_started": 1}),
        # Kept, a caller's deadline: the same deadline is one timer, and it still fires on time.
        (
            WaitPlan(keep=True, safety_seconds=None, until_seconds=600),
            [*NEWS_THREE_TIMES, ("sleep", 700)],
            Woken(news=3, deadline=1),
            {"timer_started": 1, "timer_fired": 1},
        ),
        # Kept: the safety re-check fires `safety` after its timer started, news or not.
        (WaitPlan(keep=True), [("news", None), ("sleep", 310)], Woken(news=1, safety=1), {"timer_started": 2, "timer_fired": 1}),
        # Kept, but the re-check's length changed: the running timer is replaced.
        (
            WaitPlan(keep=True),
            [("replan", WaitPlan(keep=True, safety_seconds=21600))],
            Woken(news=1),
            {"timer_started": 2, "timer_canceled": 1},
        ),
        # Kept, a deadline earlier than the running re-check: the re-check is parked, not
        # cancelled, and the wait after the deadline takes it back (no third timer).
        (
            WaitPlan(keep=True),
            [("replan", WaitPlan(keep=True, until_seconds=60)), ("sleep", 70)],
            Woken(news=1, deadline=1),
            {"timer_started": 2, "timer_fired": 1},
        ),
        # A resting 6-hour re-check while a 5-minute one runs (an Instance's update): parked;
        # Ready again, the short one is cancelled and the long one taken back, firing on its
        # first deadline (no later than asked); the wait after it starts the next.
        (
            WaitPlan(keep=True, safety_seconds=21600),
            [
                ("replan", WaitPlan(keep=True, safety_seconds=300)),
                ("news", None),
                ("replan", WaitPlan(keep=True, safety_seconds=21600)),
                ("sleep", 21600),
            ],
            Woken(news=3, safety=1),
            {"timer_started": 3, "timer_canceled": 1, "timer_fired": 1},
        ),
        # A parked re-check that fires while nothing waits for it wakes no wait.
        (
            WaitPlan(keep=True, safety_seconds=1000),
            [("replan", WaitPlan(keep=True, safety_seconds=None, until_seconds=100)), ("sleep", 150), ("sleep", 1000)],
            Woken(news=1, deadline=1),
            {"timer_started": 2, "timer_fired": 2},
        ),
        # Kept, a deadline due within `near` replaced by a later one: left to fire, not cancelled
        # (the test server rejects a task cancelling a timer that fired meanwhile); its firing
        # wakes no wait, and the later deadline's timer still fires on time.
        (
            WaitPlan(keep=True, safety_seconds=None, until_seconds=100, near_seconds=200),
            [("replan", WaitPlan(keep=True, safety_seconds=None, until_seconds=600)), ("sleep", 150), ("sleep", 500)],
            Woken(news=1, deadline=1),
            {"timer_started": 2, "timer_fired": 2},
        ),
    ],
    ids=[
        "unkept",
        "kept-safety",
        "kept-deadline",
        "kept-safety-fires",
        "safety-length-changed",
        "earlier-deadline-parks-the-re-check",
        "long-re-check-parked-during-a-short-one",
        "parked-re-check-fires-unwatched",
        "near-deadline-left-to-fire",
    ],
)
async def test_kept_timer(
    workflow_env: WorkflowEnvironment, plan: WaitPlan, steps: list[tuple[str, Any]], woken: Woken, timers: dict[str, int]
) -> None:
    seen, events = await run(workflow_env, plan, steps)
    assert seen == woken
    assert dict(events) == timers
