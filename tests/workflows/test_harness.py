"""The test harness itself: both Temporal fixtures, the worker factory and the converter.

Every workflow test leans on these promises: pydantic models cross the wire as models, timers
skip on the test server, and the dev server suggests continue-as-new early.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.client import WorkflowExecutionStatus
from temporalio.testing import WorkflowEnvironment

from tests.fixtures.temporal import SUGGEST_CONTINUE_AS_NEW_AFTER_EVENTS
from tests.workflows.harness_workflows import CountUntilSuggestedWorkflow, Nap, NapWorkflow, Woke, noop
from workers.worker import build_worker
from workflows.search_attributes import ALL as SEARCH_ATTRIBUTES

pytestmark = pytest.mark.workflows


async def test_time_skipping_env_runs_pydantic_models_through_the_product_worker(
    workflow_env: WorkflowEnvironment, task_queue: str
) -> None:
    async with build_worker(
        workflow_env.client, task_queue, kube_api_client=None, extra_workflows=[NapWorkflow], activities=[]
    ):
        woke = await workflow_env.client.execute_workflow(
            NapWorkflow.run,
            Nap(hours=30, label="long"),
            id=f"nap-{task_queue}",
            task_queue=task_queue,
            execution_timeout=timedelta(hours=48),
        )
    # The result is decoded into the model, not a dict: the pydantic converter is in place.
    assert isinstance(woke, Woke)
    assert woke.label == "long"
    # Thirty hours passed on the workflow's clock (plus the milliseconds real tasks took).
    assert timedelta(hours=30) <= woke.slept < timedelta(hours=30, minutes=1)


async def test_dev_server_suggests_continue_as_new_early(
    dev_server: WorkflowEnvironment, task_queue: str
) -> None:
    async with build_worker(
        dev_server.client,
        task_queue,
        kube_api_client=None,
        extra_workflows=[CountUntilSuggestedWorkflow],
        activities=[noop],
    ):
        handle = await dev_server.client.start_workflow(
            CountUntilSuggestedWorkflow.run, 1000, id=f"count-{task_queue}", task_queue=task_queue
        )
        length = await handle.result()
    assert SUGGEST_CONTINUE_AS_NEW_AFTER_EVENTS <= length < SUGGEST_CONTINUE_AS_NEW_AFTER_EVENTS + 20
    assert (await handle.describe()).status == WorkflowExecutionStatus.COMPLETED


async def test_dev_server_registers_the_product_search_attributes(dev_server: WorkflowEnvironment) -> None:
    listed = await dev_server.client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=dev_server.client.namespace)
    )
    assert {key.name for key in SEARCH_ATTRIBUTES} <= set(listed.custom_attributes)
