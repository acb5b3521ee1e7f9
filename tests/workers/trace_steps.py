"""A test-only workflow of a few activities in a row, for the tracing interceptor's tests.

Its own module because the workflow sandbox re-imports the module that defines a workflow.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import activity, workflow

with workflow.unsafe.imports_passed_through():
    from workflows import tracing

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


PARENT = "TraceTestParent"


@workflow.defn(name=PARENT)
class ParentWorkflow:
    """Starts a `StepsWorkflow` child, then continues as new once: three runs, three traces."""

    @workflow.run
    async def run(self, continued: bool) -> int:
        if continued:
            return await workflow.execute_activity(step, 1, start_to_close_timeout=timedelta(seconds=10))
        await workflow.execute_child_workflow(StepsWorkflow.run, 1, id=f"{workflow.info().workflow_id}/child")
        workflow.continue_as_new(True)


OPERATIONS = "TraceTestOperations"


@workflow.defn(name=OPERATIONS)
class OperationsWorkflow:
    """A long-lived run's shape: a step outside any operation, then two operations of two steps."""

    def __init__(self) -> None:
        self.operation: str | None = None

    @workflow.run
    async def run(self, count: int) -> int:
        tracing.follow_operations(lambda: self.operation)
        await workflow.execute_activity(step, 0, start_to_close_timeout=timedelta(seconds=10))
        for number in range(1, count + 1):
            self.operation = f"update-{number}"
            tracing.operation_began(self.operation, "Update")
            for _ in range(2):
                await workflow.execute_activity(step, number, start_to_close_timeout=timedelta(seconds=10))
            self.operation = None
        return count


SIGNALLED = "TraceTestSignalled"


@workflow.defn(name=SIGNALLED)
class SignalledWorkflow:
    """Waits for one `go` signal: the watcher's and the controller's kind of message."""

    def __init__(self) -> None:
        self.went = False

    @workflow.signal(name="go")
    def go(self) -> None:
        self.went = True

    @workflow.run
    async def run(self) -> bool:
        await workflow.wait_condition(lambda: self.went)
        return self.went
