"""A test-only workflow around `workflows.waiting.Waits` (tests/workflows/test_waits.py).

A module of its own: the workflow sandbox re-imports the module defining a workflow. The loop
waits as the product's loops do, with the wait's deadline and safety length set by signal,
and records what woke each wait.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from pydantic import BaseModel
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows import waiting


class WaitPlan(BaseModel):
    keep: bool
    safety_seconds: float | None = 300.0
    until_seconds: float | None = None
    """A deadline this many seconds after the workflow started (None: none)."""
    near_seconds: float = 1.0
    """`Waits.near`: a superseded timer due this soon is left to fire."""


class Woken(BaseModel):
    news: int = 0
    safety: int = 0
    deadline: int = 0


@workflow.defn(name="TestWaits")
class WaitsWorkflow:
    def __init__(self) -> None:
        self.seq = 0
        self.done = False
        self.plan: WaitPlan | None = None
        self.woken = Woken()
        self.waiting = False

    @workflow.signal
    def news(self) -> None:
        self.seq += 1

    @workflow.signal
    def replan(self, plan: WaitPlan) -> None:
        self.plan = plan
        self.seq += 1

    @workflow.signal
    def finish(self) -> None:
        self.done = True
        self.seq += 1

    @workflow.query
    def woke(self) -> Woken:
        return self.woken

    @workflow.query
    def armed(self) -> bool:
        """Whether the loop has begun its first wait (a signal before it would go unseen)."""
        return self.waiting

    @workflow.run
    async def run(self, plan: WaitPlan) -> Woken:
        self.plan = plan
        waits = waiting.Waits(keep=plan.keep, near=timedelta(seconds=plan.near_seconds))
        started = workflow.now()
        while not self.done:
            seen = self.seq
            safety = timedelta(seconds=self.plan.safety_seconds) if self.plan.safety_seconds is not None else None
            until: datetime | None = None
            if self.plan.until_seconds is not None:
                until = started + timedelta(seconds=self.plan.until_seconds)
            self.waiting = True
            by_safety = await waits.wait_for_news(lambda seen=seen: self.seq != seen, until, safety)
            if self.done:
                break
            if self.seq != seen:
                self.woken.news += 1
            elif by_safety:
                self.woken.safety += 1
            else:
                self.woken.deadline += 1
                self.plan = self.plan.model_copy(update={"until_seconds": None})
        return self.woken
