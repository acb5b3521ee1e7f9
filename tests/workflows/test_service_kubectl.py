"""The InferenceService workflow's side of the kubectl way in (issue 15): one owner per field.

The spec is the user's whichever way it came in: an `apply` through the `temporal` CLI is
written to the object as `kubectl apply` would write it; a relayed object generation
(`ApplyOrigin`) is applied once, late relays change nothing; the workflow never overwrites a
spec written after the generation it knows; the product's finalizer holds the object until the
workflow has torn everything down; `runtime_changed` re-reads the runtime. The controller that
sends these is tested in tests/workers; here the relays are sent by hand, as it sends them.
"""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

import pytest
from temporalio.client import Client

from kubesim.handle import KubeSim
from planning.service.relay import ISVC_FINALIZER, LAST_APPLIED, manifest_digest, relayed_manifest
from tests.workflows.service_harness import (
    IMAGE_1,
    IMAGE_2,
    NAME,
    NAMESPACE,
    Story,
    eventually,
    isvc_manifest,
    story,
    with_image,
)
from workflows.service.messages import AppliedView, ApplyOrigin, ApplyResult
from workflows.service.workflow import InferenceServiceWorkflow

pytestmark = pytest.mark.workflows


def isvc(s: Story) -> dict[str, Any] | None:
    return s.object("inferenceservices", NAME)


async def relay(s: Story, obj: dict[str, Any]) -> ApplyResult:
    """What the controller sends for an object it read."""
    origin = ApplyOrigin(
        object_generation=obj["metadata"]["generation"],
        uid=obj["metadata"]["uid"],
        resource_version=obj["metadata"]["resourceVersion"],
    )
    result: ApplyResult = await s.handle().execute_update(
        InferenceServiceWorkflow.apply, args=[relayed_manifest(obj), origin]
    )
    return result


async def applied(s: Story) -> AppliedView:
    view: AppliedView = await s.handle().query(InferenceServiceWorkflow.applied)
    return view


def edit_spec(s: Story, spec: dict[str, Any]) -> dict[str, Any]:
    """A user's `kubectl apply` of another spec, straight to the object (no relay)."""
    patched: dict[str, Any] = s.custom.patch_namespaced_custom_object(
        "ome.io", "v1beta1", NAMESPACE, "inferenceservices", NAME, {"spec": spec}
    )
    return patched


def observed(s: Story, generation: int) -> bool:
    obj = isvc(s)
    return obj is not None and (obj.get("status") or {}).get("observedGeneration") == generation


async def applied_and_observed(s: Story) -> dict[str, Any]:
    """The spec 003 example applied through Temporal, its object written and observed."""
    await s.apply(isvc_manifest())
    obj: dict[str, Any] = await eventually(lambda: isvc(s), "the InferenceService object")
    await eventually(lambda: observed(s, obj["metadata"]["generation"]), "generation 1 observed")
    return obj


async def test_a_temporal_apply_is_written_as_kubectl_apply_writes_it_and_delete_releases_the_finalizer(
    dev_client: Client, task_queue: str, kubesim: KubeSim
) -> None:
    first = with_image(isvc_manifest(), IMAGE_1)
    first["metadata"]["annotations"] = {"team": "search"}
    async with story(dev_client, task_queue, kubesim) as s:
        assert (await s.apply(first)).generation == 1
        obj = await eventually(lambda: isvc(s), "the InferenceService object")
        assert obj["metadata"]["finalizers"] == [ISVC_FINALIZER]
        written = json.loads(obj["metadata"]["annotations"][LAST_APPLIED])
        assert written["spec"] == first["spec"] and written["metadata"]["annotations"] == {"team": "search"}
        await eventually(lambda: observed(s, obj["metadata"]["generation"]), "observedGeneration of the object")

        # Someone else's annotation stays; the one the last apply named and this one drops goes,
        # and so does the spec field it drops (the runner), as `kubectl apply` computes it.
        s.custom.patch_namespaced_custom_object(
            "ome.io", "v1beta1", NAMESPACE, "inferenceservices", NAME, {"metadata": {"annotations": {"owner": "ops"}}}
        )
        second = isvc_manifest()
        assert (await s.apply(second)).generation == 2

        def rewritten() -> dict[str, Any] | None:
            now = isvc(s)
            return now if now is not None and "runner" not in now["spec"]["engine"] else None

        obj = await eventually(rewritten, "the spec written without the runner")
        annotations = obj["metadata"]["annotations"]
        assert annotations.get("owner") == "ops" and "team" not in annotations
        assert json.loads(annotations[LAST_APPLIED])["spec"] == second["spec"]

        # The object is written before the write's result reaches the workflow: it records
        # the object's generation a moment later.
        async def recorded() -> bool:
            return (await applied(s)).object_generation == obj["metadata"]["generation"]

        await eventually(recorded, "the workflow to record the object's generation")

        # `kubectl delete`: the finalizer holds the object while the workflow drains.
        s.custom.delete_namespaced_custom_object("ome.io", "v1beta1", NAMESPACE, "inferenceservices", NAME)
        held = isvc(s)
        assert held is not None and held["metadata"].get("deletionTimestamp"), "the finalizer must hold it"
        await s.handle().signal(InferenceServiceWorkflow.delete)
        await eventually(lambda: isvc(s) is None, "the object gone once the workflow tore it down", within=90)
        assert s.pods() == []


async def test_a_relayed_generation_is_applied_once_and_a_newer_spec_is_never_overwritten(
    dev_client: Client, task_queue: str, kubesim: KubeSim
) -> None:
    async with story(dev_client, task_queue, kubesim) as s:
        await s.apply(isvc_manifest())
        first = await eventually(lambda: isvc(s), "the InferenceService object")
        generation = first["metadata"]["generation"]

        # The controller relays the object the workflow wrote itself: nothing new.
        again = await relay(s, first)
        assert (again.changed, again.generation, again.superseded) == (False, 1, False)

        # A kubectl edit, relayed: applied once, however often it is resent.
        edited = edit_spec(s, with_image(isvc_manifest(), IMAGE_2)["spec"])
        assert edited["metadata"]["generation"] == generation + 1
        took = await relay(s, edited)
        assert (took.changed, took.generation) == (True, 2)
        resent = await relay(s, edited)
        assert (resent.changed, resent.generation) == (False, 2)
        late = await relay(s, first)
        assert (late.changed, late.superseded, late.generation) == (False, True, 2)
        view = await applied(s)
        assert view.object_generation == generation + 1
        assert view.digest == manifest_digest(relayed_manifest(edited))

        # A temporal apply while a newer kubectl edit waits for its relay: the workflow does
        # not overwrite the newer spec; it says so, and the relay then wins.
        await eventually(lambda: observed(s, generation + 1), "the relayed generation observed")
        newer = copy.deepcopy(isvc_manifest())
        newer["spec"]["engine"]["runner"] = {"image": IMAGE_1}
        waiting = edit_spec(s, newer["spec"])
        stale = with_image(isvc_manifest(), "docker.io/lmsysorg/sglang:v0.4.5")
        assert (await s.apply(stale)).changed

        def superseded_event() -> Any:
            events = s.core.list_namespaced_event(NAMESPACE, field_selector="reason=SpecSuperseded").items
            return events[0] if events else None

        event = await eventually(superseded_event, "the SpecSuperseded Warning Event")
        assert event.type == "Warning" and f"generation {waiting['metadata']['generation']}" in event.message
        assert isvc(s)["spec"]["engine"]["runner"] == {"image": IMAGE_1}  # type: ignore[index]
        final = await relay(s, waiting)
        assert final.changed and final.generation == 4
        await eventually(lambda: observed(s, waiting["metadata"]["generation"]), "the kubectl spec observed")
        assert isvc(s)["spec"] == newer["spec"]  # type: ignore[index]


async def test_runtime_changed_rereads_the_runtime_and_rolls_the_new_image(
    dev_client: Client, task_queue: str, kubesim: KubeSim
) -> None:
    async with story(dev_client, task_queue, kubesim) as s:
        await s.apply(isvc_manifest())

        def engine_images() -> set[str]:
            return {c.image for pod in s.serving_pods() for c in pod.spec.containers}

        await eventually(lambda: engine_images() == {IMAGE_1} and len(s.serving_pods()) == 2, "two serving pods")
        s.custom.patch_namespaced_custom_object(
            "ome.io",
            "v1beta1",
            NAMESPACE,
            "servingruntimes",
            "srt-qwen3-0-6b",
            {"spec": {"engineConfig": {"runner": {"image": IMAGE_2}}}},
        )
        await s.handle().signal(InferenceServiceWorkflow.runtime_changed)
        await eventually(
            lambda: engine_images() == {IMAGE_2} and len(s.serving_pods()) == 2,
            "both Instances on the runtime's new image",
            within=90,
        )
        assert (await applied(s)).generation == 1, "a runtime change is not a new spec generation"


async def test_a_relay_of_the_generation_a_temporal_apply_waits_to_overwrite_does_not_undo_it(
    dev_client: Client, task_queue: str, kubesim: KubeSim
) -> None:
    async with story(dev_client, task_queue, kubesim) as s:
        first = await applied_and_observed(s)
        # A kubectl annotate (no new generation) relayed just as a temporal apply of a new spec
        # comes in: whichever the workflow takes first, the temporal spec is the newer one.
        annotated = copy.deepcopy(first)
        annotated["metadata"].setdefault("annotations", {})["ome.io/global-host"] = "chat.example.com"
        newer = with_image(isvc_manifest(), IMAGE_2)
        temporal, relayed = await asyncio.gather(s.apply(newer), relay(s, annotated))
        # Taken after the temporal apply, the relay changes nothing; taken before, it is an
        # annotation change the temporal apply then follows.
        assert temporal.changed and (not relayed.changed or relayed.generation < temporal.generation), (
            temporal,
            relayed,
        )

        def written() -> dict[str, Any] | None:
            obj = isvc(s)
            return obj if obj is not None and obj["spec"] == newer["spec"] else None

        obj = await eventually(written, "the temporal spec on the object")
        assert (await applied(s)).digest == manifest_digest(newer)
        await eventually(lambda: observed(s, obj["metadata"]["generation"]), "the written generation observed")


async def test_a_delete_for_an_older_object_of_the_same_name_is_ignored(
    dev_client: Client, task_queue: str, kubesim: KubeSim
) -> None:
    async with story(dev_client, task_queue, kubesim) as s:
        obj = await applied_and_observed(s)
        await s.handle().signal(InferenceServiceWorkflow.delete, {"uid": "an-older-object"})
        await asyncio.sleep(1)
        assert not (await applied(s)).deleting and isvc(s) is not None
        await s.handle().signal(InferenceServiceWorkflow.delete, {"uid": obj["metadata"]["uid"]})
        await eventually(lambda: isvc(s) is None, "the object gone", within=90)
