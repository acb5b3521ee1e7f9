"""The workflow-side wrappers (`workflows/kube_calls.py`) against the real activities.

A probe workflow calls the wrappers on the time-skipping server with `KubeActivities` bound
to kubesim: results come back as the declared models, summaries reach the history (what the
Temporal UI shows), and a non-retryable failure surfaces at once with its type. A contract
test checks that the names and models both sides use agree.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import pytest
from temporalio import activity, workflow
from temporalio.api.enums.v1 import EventType
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from activities.kube import KubeActivities
from activities.registry import build_activities
from models.kube_ops import (
    ACTIVITY_TYPES,
    ALL_KUBE_ACTIVITIES,
    KUBE_READ_OBJECT,
    CreatePodsInput,
    KubeErrorType,
    ListInstancePodsInput,
    ObjectRef,
    ReadObjectInput,
    ReadObjectResult,
)
from workflows import kube_calls

pytestmark = pytest.mark.kubesim

CREATE_SUMMARY = "create 1 pod for chat-engine-0 (revision 7c9e), incarnation 1"


@workflow.defn(name="KubeCallsProbe")
class KubeCallsProbe:
    @workflow.run
    async def run(self, namespace: str) -> list[str]:
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "chat-engine-0-default-0",
                "labels": {
                    "ome.io/inferenceservice": "chat",
                    "ome.io/component": "engine",
                    "ome.io/instance-index": "0",
                    "ome.io/revision": "7c9e",
                    "ome.io/role": "default",
                    "ome.io/incarnation": "1",
                },
            },
            "spec": {"containers": [{"name": "engine", "image": "ome/engine:v1"}]},
        }
        created = await kube_calls.create_pods(
            CreatePodsInput(namespace=namespace, pods=[pod]), summary=CREATE_SUMMARY
        )
        observed = await kube_calls.list_instance_pods(
            ListInstancePodsInput(namespace=namespace, isvc="chat", component="engine", index=0),
            summary="observe the pods of chat-engine-0",
        )
        missing = ObjectRef(
            api_version="ome.io/v1beta1", kind="ServingRuntime", name="nope", namespace=namespace
        )
        try:
            await kube_calls.read_object(
                ReadObjectInput(ref=missing, missing_ok=False), summary="read ServingRuntime nope"
            )
            failure = "none"
        except ActivityError as error:
            failure = kube_calls.error_type(error) or "untyped"
        return [created.pods[0].outcome, observed.pods[0].name, str(observed.pods[0].incarnation), failure]


async def test_wrappers_run_the_activities_with_summaries(
    workflow_env: WorkflowEnvironment, task_queue: str, kubesim: Any
) -> None:
    kube = KubeActivities(kubesim.api_client())
    with ThreadPoolExecutor(max_workers=4) as executor:
        async with Worker(
            workflow_env.client,
            task_queue=task_queue,
            workflows=[KubeCallsProbe],
            activities=kube.activities(),
            activity_executor=executor,
            # The probe lives in a test module that imports kubernetes; the product's
            # workflows run sandboxed, this one need not.
            workflow_runner=UnsandboxedWorkflowRunner(),
        ):
            handle = await workflow_env.client.start_workflow(
                KubeCallsProbe.run, "default", id=f"probe-{task_queue}", task_queue=task_queue
            )
            result = await handle.result()
    assert result == ["created", "chat-engine-0-default-0", "1", KubeErrorType.NOT_FOUND.value]

    summaries = []
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            summaries.append(json.loads(event.user_metadata.summary.data))
    assert summaries == [CREATE_SUMMARY, "observe the pods of chat-engine-0", "read ServingRuntime nope"]


def test_registered_activities_match_the_contract() -> None:
    registered = {}
    for fn in build_activities(None):
        definition = activity._Definition.must_from_callable(fn)
        registered[definition.name] = definition
    assert set(ALL_KUBE_ACTIVITIES) <= set(registered)
    for name in ALL_KUBE_ACTIVITIES:
        input_type, result_type = ACTIVITY_TYPES[name]
        definition = registered[name]
        assert definition.arg_types == [input_type], name
        assert definition.ret_type is result_type, name


@workflow.defn(name="LocalFallbackProbe")
class LocalFallbackProbe:
    @workflow.run
    async def run(self, namespace: str) -> str:
        ref = ObjectRef(api_version="v1", kind="ConfigMap", name="cm", namespace=namespace)
        result = await kube_calls.read_object(ReadObjectInput(ref=ref), summary="read cm", local=True)
        return str((result.object or {}).get("via"))


async def test_a_local_call_failing_past_its_give_up_goes_on_as_a_regular_activity(
    workflow_env: WorkflowEnvironment, task_queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An API brownout: the local attempts fail (retryable) for `LOCAL_GIVE_UP`; the call is then
    re-issued as a regular activity (one scheduled event), which succeeds."""
    # Local attempts and their give-up run on the worker's wall clock, not the skipped one.
    monkeypatch.setattr(kube_calls, "LOCAL_GIVE_UP", timedelta(seconds=4))
    local_attempts: list[int] = []

    @activity.defn(name=KUBE_READ_OBJECT)
    async def read_object(request: ReadObjectInput) -> ReadObjectResult:
        info = activity.info()
        if info.is_local:
            local_attempts.append(info.attempt)
            raise ApplicationError("503 Service Unavailable", type=KubeErrorType.SERVER_ERROR.value)
        return ReadObjectResult(found=True, object={"via": "regular"})

    async with Worker(
        workflow_env.client,
        task_queue=task_queue,
        workflows=[LocalFallbackProbe],
        activities=[read_object],
        workflow_runner=UnsandboxedWorkflowRunner(),
    ):
        handle = await workflow_env.client.start_workflow(
            LocalFallbackProbe.run, "default", id=f"fallback-{task_queue}", task_queue=task_queue
        )
        assert await handle.result() == "regular"
    assert len(local_attempts) > 1
    scheduled = [
        event
        async for event in handle.fetch_history_events()
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    assert len(scheduled) == 1
