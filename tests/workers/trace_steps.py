"""A test-only workflow of a few activities in a row, for the tracing interceptor's tests.

Its own module because the workflow sandbox re-imports the module that defines a workflow.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import activity, workflow

STEPS = "TraceTestSteps"


@activity.defn(name="TraceTestStep")
async def step(number: int) -> int:
    return number


@workflow.defn(name=STEPS)
class StepsWorkflow:
    @workflow.run
    async def run(self, count: int) -> int:
        for number in range(count):
            await workflow.execute_activity(step, number, start_to_close_timeout=timedelta(seconds=10))
        return count
