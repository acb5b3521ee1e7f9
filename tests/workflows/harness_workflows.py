"""Test-only workflows that exercise the harness (tests/workflows/test_harness.py).

A module of their own: the workflow sandbox re-imports the module defining a workflow, and a
test module that imports the worker (and so the kubernetes client) would be refused.
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel
from temporalio import activity, workflow


class Nap(BaseModel):
    hours: int
    label: str


class Woke(BaseModel):
    label: str
    slept: timedelta


@workflow.defn(name="HarnessNap")
class NapWorkflow:
    """Sleeps for hours: only a time-skipping server finishes it within a test."""

    @workflow.run
    async def run(self, nap: Nap) -> Woke:
        started = workflow.now()
        await workflow.sleep(timedelta(hours=nap.hours))
        return Woke(label=nap.label, slept=workflow.now() - started)


@activity.defn(name="HarnessNoop")
async def noop() -> None:
    """Adds six events to the caller's history in milliseconds (a dev-server timer takes ~1 s)."""


@workflow.defn(name="HarnessCountUntilSuggested")
class CountUntilSuggestedWorkflow:
    """Adds history with quick activities until the server suggests continue-as-new."""

    @workflow.run
    async def run(self, limit: int) -> int:
        for _ in range(limit):
            if workflow.info().is_continue_as_new_suggested():
                return workflow.info().get_current_history_length()
            await workflow.execute_activity(noop, start_to_close_timeout=timedelta(seconds=30))
        return -1
