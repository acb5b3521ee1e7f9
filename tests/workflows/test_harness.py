"""The test harness itself: both Temporal fixtures, the worker factory, the converter and the
pod relay.

Every workflow test leans on these promises: pydantic models cross the wire as models, timers
skip on the test server, the dev server suggests continue-as-new early, and the relay standing
in for the watcher tells an Instance of every pod it made, however short-lived.
"""

from __future__ import annotations

from datetime import timedelta

import kubernetes
import pytest
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.client import WorkflowExecutionStatus
from temporalio.testing import WorkflowEnvironment

from kubesim.handle import KubeSim
from tests.fixtures.temporal import SUGGEST_CONTINUE_AS_NEW_AFTER_EVENTS
from tests.kubesim.activity_objects import instance_pod
from tests.workflows.harness_workflows import CountUntilSuggestedWorkflow, Nap, NapWorkflow, Woke, noop
from tests.workflows.service_harness import PodRelay
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


async def test_the_pod_relay_reports_a_pod_created_and_gone_between_two_polls(
    kubesim: KubeSim, workflow_env: WorkflowEnvironment
) -> None:
    """The relay stands in for the watcher, which owes a summary to an Instance one of whose pods
    it saw: a pod that lived less than one poll still reaches its Instance, as gone. Before, an
    Instance told to delete while its pod's creation was in flight waited for its five-minute
    re-list in every test whose pods were that short-lived."""
    relay = PodRelay(workflow_env.client, kubesim)
    core = kubernetes.client.CoreV1Api(kubesim.api_client())
    try:
        core.create_namespace({"metadata": {"name": "ns"}})
        core.create_namespaced_pod("ns", instance_pod("ns", index=4))
        core.delete_namespaced_pod("chat-engine-4-default-0", "ns", grace_period_seconds=0)
        first = relay.snapshot()
        assert first[("ns", "chat", "engine", 4)].pods == ()
        assert ("ns", "chat", "engine", 4) not in relay.snapshot(), "reported from one poll only"
    finally:
        await relay.stop()
