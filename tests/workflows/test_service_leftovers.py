"""Leftover pods and the list before a create (issue 17: three requests per Instance created).

A pass of the InferenceReplica that starts Instances lists the component's pods once; a new
Instance whose index had none creates its pods without a list of its own. An index that
holds a pod from before (here a stray on the single-pod surge ordinal, which the create's
409 would never meet) still gets the list, and its create removes the stray first. A list that
fails leaves every new Instance to list for itself, as before the change.
"""

from __future__ import annotations

import json

import pytest
from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError

from activities.kube import KubeActivities
from kubesim.handle import KubeSim
from models.kube_ops import KUBE_LIST_COMPONENT_PODS, ComponentPods, ListComponentPodsInput
from tests.workflows.service_harness import (
    NAME,
    NAMESPACE,
    Story,
    engine_ready,
    eventually,
    isvc_manifest,
    story,
    stray_pod,
)
from workflows.names import instance_workflow_id

pytestmark = pytest.mark.workflows

STRAY = f"{NAME}-engine-1-default-1"


async def kube_calls_before_create(s: Story, index: int) -> list[str]:
    """The Kubernetes activities Instance `index` ran up to its first pod create, in order."""
    handle = s.client.get_workflow_handle(instance_workflow_id(NAMESPACE, NAME, "engine", index))
    calls: list[str] = []
    async for event in handle.fetch_history_events():
        if event.HasField("marker_recorded_event_attributes"):
            marker = event.marker_recorded_event_attributes
            if marker.marker_name != "core_local_activity":
                continue
            kind = json.loads(marker.details["data"].payloads[0].data)["activity_type"]
        elif event.HasField("activity_task_scheduled_event_attributes"):
            kind = event.activity_task_scheduled_event_attributes.activity_type.name
        else:
            continue
        if kind.startswith("kube."):
            calls.append(kind)
        if kind == "kube.create_pods":
            return calls
    raise AssertionError(f"Instance {index} never created its pods: {calls}")


def in_first_task(calls: list[str], together: int) -> list[set[str] | str]:
    """`calls` with the first `together` as one set: the first workflow task runs them at once
    (`asyncio.gather`), and their markers are recorded in the order they end."""
    return [set(calls[:together]), *calls[together:]]


async def test_only_an_index_with_pods_from_before_lists_them_before_its_create(
    dev_client: Client, task_queue: str, kubesim: KubeSim
) -> None:
    async with story(dev_client, task_queue, kubesim) as s:
        s.core.create_namespaced_pod(NAMESPACE, stray_pod(1))
        await s.apply(isvc_manifest())
        await eventually(lambda: engine_ready(s), "two Ready engine Instances")

        assert await kube_calls_before_create(s, 0) == ["kube.apply_object", "kube.create_pods"]
        # The Service and the list go out together (one workflow task): either may end first.
        assert in_first_task(await kube_calls_before_create(s, 1), 2) == [
            {"kube.apply_object", "kube.list_instance_pods"},
            "kube.set_serving_condition",
            "kube.delete_pods",
            "kube.create_pods",
        ]

        def live() -> list[str]:
            return sorted(p.metadata.name for p in s.pods() if p.metadata.deletion_timestamp is None)

        await eventually(lambda: STRAY not in live(), "the stray pod of Instance 1 deleted")
        assert live() == [f"{NAME}-engine-0-default-0", f"{NAME}-engine-1-default-0"]


async def test_the_list_before_starts_names_the_starting_instances(
    dev_client: Client, task_queue: str, kubesim: KubeSim
) -> None:
    """The list before a pass's starts asks for the starting Instances' pods only, so a batched
    bring-up of a big component costs each pass its batch, not every pod started so far: a pod
    of an index that is not starting (here 3, beyond the 2 replicas) is not in the answer."""
    async with story(dev_client, task_queue, kubesim) as s:
        s.core.create_namespaced_pod(NAMESPACE, stray_pod(1))
        s.core.create_namespaced_pod(NAMESPACE, stray_pod(3))
        await s.apply(isvc_manifest())
        await eventually(lambda: engine_ready(s), "two Ready engine Instances")

        answers = []
        async for event in s.irep().fetch_history_events():
            marker = event.marker_recorded_event_attributes
            if event.HasField("marker_recorded_event_attributes") and marker.marker_name == "core_local_activity":
                if json.loads(marker.details["data"].payloads[0].data)["activity_type"] == KUBE_LIST_COMPONENT_PODS:
                    answers.append(json.loads(marker.details["result"].payloads[0].data))
        assert [index for index, _ in answers[0]["digests"]] == [1], answers


async def test_a_failed_list_before_starts_leaves_each_instance_to_list_for_itself(
    dev_client: Client, task_queue: str, kubesim: KubeSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The InferenceReplica's list before its starts fails (here at once, as past its 10 s give-up):
    the starts go out unmarked, so each new Instance lists its own pods before its create, and
    the service comes up all the same."""

    @activity.defn(name=KUBE_LIST_COMPONENT_PODS)
    def list_fails(self: KubeActivities, request: ListComponentPodsInput) -> ComponentPods:
        raise ApplicationError("the API server is unreachable (injected by the test)", non_retryable=True)

    monkeypatch.setattr(KubeActivities, "list_component_pods", list_fails)
    async with story(dev_client, task_queue, kubesim) as s:
        await s.apply(isvc_manifest())
        await eventually(lambda: engine_ready(s), "two Ready engine Instances")

        for index in (0, 1):
            assert in_first_task(await kube_calls_before_create(s, index), 2) == [
                {"kube.apply_object", "kube.list_instance_pods"},
                "kube.create_pods",
            ], f"Instance {index}"
        failed = [
            json.loads(event.marker_recorded_event_attributes.details["data"].payloads[0].data)["activity_type"]
            async for event in s.irep().fetch_history_events()
            if event.HasField("marker_recorded_event_attributes")
            and event.marker_recorded_event_attributes.HasField("failure")
        ]
        assert KUBE_LIST_COMPONENT_PODS in failed, failed
