"""The workflow-side wrappers (`workflows/kube_calls.py`) against the real activities.

A probe workflow calls the wrappers on the time-skipping server with `KubeActivities` bound
to kubesim: results come back as the declared models, summaries reach the history (what the
Temporal UI shows), and a non-retryable failure surfaces at once with its type. A contract
test checks that the names and models both sides use agree.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from temporalio import activity, workflow
from temporalio.api.enums.v1 import EventType
from temporalio.exceptions import ActivityError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from activities.kube import KubeActivities
from activities.registry import build_activities
from models.kube_ops import (
    ACTIVITY_TYPES,
    ALL_KUBE_ACTIVITIES,
    CreatePodsInput,
    KubeErrorType,
    ListInstancePodsInput,
    ObjectRef,
    ReadObjectInput,
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
