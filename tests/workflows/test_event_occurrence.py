"""An Event recorded by a workflow task that is attempted again (its worker died, or the task
failed) carries the same `occurrence` (`workflows.events.occurrence`), so the activity counts
it once; later recordings of the run get the next ones, also after a replay."""

from __future__ import annotations

from datetime import timedelta

import pytest
from temporalio import activity, workflow
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from models.kube_ops import KUBE_RECORD_EVENT, ObjectRef, RecordEventInput, RecordEventResult
from workflows.events import record_event

pytestmark = pytest.mark.workflows

POD = ObjectRef(api_version="v1", kind="Pod", name="p", namespace="ns")
FIRST_ASK = "test.first_ask"
"""A local activity that answers True the first time it is asked, False after."""


@workflow.defn(name="EventOccurrence")
class EventOccurrence:
    @workflow.run
    async def run(self) -> None:
        await record_event(POD, "First", "in the task that fails once", local=True)
        first_attempt = await workflow.execute_local_activity(
            FIRST_ASK, start_to_close_timeout=timedelta(seconds=5), result_type=bool
        )
        if first_attempt:
            raise RuntimeError("this workflow task fails once, after its local activities ran")
        await workflow.sleep(timedelta(seconds=1))
        await record_event(POD, "Second", "after a timer")
        await record_event(POD, "Third", "in the same task")


async def test_a_task_attempted_again_records_with_the_same_occurrence(
    workflow_env: WorkflowEnvironment, task_queue: str
) -> None:
    seen: list[tuple[str, str | None]] = []
    asked: list[bool] = []

    @activity.defn(name=FIRST_ASK)
    async def first_ask() -> bool:
        asked.append(True)
        return len(asked) == 1

    @activity.defn(name=KUBE_RECORD_EVENT)
    async def fake_record_event(request: RecordEventInput) -> RecordEventResult:
        seen.append((request.reason, request.occurrence))
        return RecordEventResult(name=request.reason, count=1)

    # No cache: every task replays the run from its start with a new workflow object.
    async with Worker(
        workflow_env.client,
        task_queue=task_queue,
        workflows=[EventOccurrence],
        activities=[fake_record_event, first_ask],
        max_cached_workflows=0,
    ):
        handle = await workflow_env.client.start_workflow(
            EventOccurrence.run, id=f"event-occurrence-{task_queue}", task_queue=task_queue
        )
        await handle.result()
    run = handle.result_run_id
    assert seen == [
        ("First", f"{run}/0"),  # the attempt that failed
        ("First", f"{run}/0"),  # its next attempt: the same recording
        ("Second", f"{run}/1"),
        ("Third", f"{run}/2"),
    ]
