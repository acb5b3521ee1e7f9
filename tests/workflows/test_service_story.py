"""The spec 003 example, end to end through the workflows: apply, spread, update, delete.

Real activities against kubesim, the watcher in-process, the workflows on a Temporal server.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError

from kubesim.handle import KubeSim
from tests.workflows.service_harness import (
    IMAGE_2,
    NAME,
    NAMESPACE,
    Story,
    eventually,
    isvc_manifest,
    story,
    with_image,
)
from workflows.service.messages import ADMISSION_DENIED

pytestmark = pytest.mark.workflows


async def ready_with(s: Story, ready: int) -> bool:
    view = await s.status()
    lifecycle = view.status.components["engine"].lifecycle
    return (
        view.status.condition("Ready") is not None
        and view.status.condition("Ready").status == "True"  # type: ignore[union-attr]
        and lifecycle is not None
        and lifecycle.ready_replicas == ready
        and lifecycle.current_revision == lifecycle.update_revision
    )


async def test_apply_spreads_two_instances_across_zones_then_update_then_delete(
    dev_client: Client, task_queue: str, kubesim: KubeSim
) -> None:
    async with story(dev_client, task_queue, kubesim) as s:
        result = await s.apply(isvc_manifest())
        assert result.accepted and result.generation == 1

        await eventually(lambda: ready_with(s, 2), "two Ready engine Instances")
        pods = s.pods()
        assert sorted(p.metadata.name for p in pods) == [
            f"{NAME}-engine-0-default-0",
            f"{NAME}-engine-1-default-0",
        ]
        zones = {s.zone_of(p.spec.node_name) for p in pods}
        assert len(zones) == 2, f"both Instances landed in {zones}"
        for pod in pods:
            (constraint,) = pod.spec.topology_spread_constraints
            assert constraint.topology_key == "topology.kubernetes.io/zone"
            assert constraint.when_unsatisfiable == "DoNotSchedule"

        irep = await eventually(
            lambda: _with_status(s.object("inferencereplicas", f"{NAME}-engine"), "availableReplicas", 2),
            "the InferenceReplica status to show 2 available",
        )
        assert irep["spec"]["component"] == "engine" and irep["spec"]["replicas"] == 2
        assert irep["spec"]["topologySpread"] == "Required"
        assert irep["status"]["readyReplicas"] == 2 and irep["status"]["availableReplicas"] == 2
        conditions = {c["type"]: c for c in irep["status"]["conditions"]}
        assert conditions["Ready"]["reason"] == "AllInstancesReady"
        assert conditions["InstanceReadyTimeoutUnconfigured"]["status"] == "False"
        # The object's status is written after the query's answer changes: wait for it.
        isvc = await eventually(lambda: _ready_object(s), "the InferenceService object's Ready condition")
        engine_ready = {c["type"]: c for c in isvc["status"]["conditions"]}["EngineReady"]
        assert engine_ready["status"] == "True" and engine_ready["reason"] == "Ready"
        assert isvc["status"]["components"]["engine"]["lifecycle"]["readyReplicas"] == 2

        # Same manifest again: accepted, nothing changes.
        again = await s.apply(isvc_manifest())
        assert again.accepted and not again.changed and again.generation == 1

        # A new runner image: SurgeThenDrain, never fewer than two serving.
        before = (await s.status()).status.components["engine"].lifecycle
        assert before is not None
        updated = await s.apply(with_image(isvc_manifest(), IMAGE_2))
        assert updated.changed and updated.generation == 2
        lowest_serving = 2
        saw_surge = False
        holds: set[tuple[str, str]] = set()

        async def watch_serving() -> None:
            nonlocal lowest_serving, saw_surge
            while True:
                pods = s.pods()
                saw_surge = saw_surge or any(p.metadata.name.endswith("-default-1") for p in pods)
                lowest_serving = min(lowest_serving, len(s.serving_pods()))
                hold = (await s.replica_status()).rollout_hold
                if hold is not None:
                    holds.add((hold.gate, hold.reason.split(";")[0]))
                await asyncio.sleep(0.05)

        watcher = asyncio.create_task(watch_serving())
        try:
            await eventually(
                lambda: _all_on(s, IMAGE_2, before.current_revision),
                "both Instances on the new image",
                within=90,
            )
        finally:
            watcher.cancel()
        assert saw_surge, "SurgeThenDrain brings up the new pod (ordinal 1) before the old one drains"
        assert lowest_serving >= 2, f"serving dropped to {lowest_serving} during the update"
        # maxSurge 25% of 2 rounds up to 1: the second Instance waited on the surge budget.
        assert ("Budget", "per-Component surge budget 1 exhausted (would become 2)") in holds, holds
        assert (await s.replica_status()).rollout_hold is None, "the hold clears when the rollout completes"

        # Delete: drains every Instance, removes pods, the IR and the ISVC, and completes.
        await s.handle().signal("delete")
        await eventually(lambda: _completed(s), "the InferenceService workflow to complete", within=90)
        assert s.pods() == []
        assert s.object("inferencereplicas", f"{NAME}-engine") is None
        assert s.object("inferenceservices", NAME) is None
        assert (await s.irep().describe()).status == WorkflowExecutionStatus.COMPLETED


def _ready_object(s: Story) -> dict[str, Any] | None:
    isvc = s.object("inferenceservices", NAME)
    conditions = {c["type"]: c for c in ((isvc or {}).get("status") or {}).get("conditions") or []}
    return isvc if conditions.get("Ready", {}).get("status") == "True" else None


def _with_status(obj: dict[str, object] | None, field: str, value: object) -> dict[str, object] | None:
    status = (obj or {}).get("status") or {}
    return obj if isinstance(status, dict) and status.get(field) == value else None


async def _all_on(s: Story, image: str, old_revision: str | None) -> bool:
    view = await s.status()
    lifecycle = view.status.components["engine"].lifecycle
    pods = [p for p in s.pods() if p.metadata.deletion_timestamp is None]
    return (
        lifecycle is not None
        and lifecycle.current_revision != old_revision
        and lifecycle.current_revision == lifecycle.update_revision
        and lifecycle.updated_replicas == 2
        and len(pods) == 2
        and all(p.spec.containers[0].image == image for p in pods)
    )


async def _completed(s: Story) -> bool:
    return (await s.handle().describe()).status == WorkflowExecutionStatus.COMPLETED


async def test_invalid_manifest_is_refused_with_reason_codes_and_nothing_is_created(
    dev_client: Client, task_queue: str, kubesim: KubeSim
) -> None:
    async with story(dev_client, task_queue, kubesim) as s:
        bad = isvc_manifest(minReplicas=3, maxReplicas=2)
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await s.apply(bad)
        cause = refused.value.cause
        assert isinstance(cause, ApplicationError) and cause.type == ADMISSION_DENIED
        assert "minReplicas" in str(cause.message)
        # The workflow that update-with-start opened fails on the same admission, creating nothing.
        await eventually(lambda: _failed(s), "the started workflow to fail on admission")
        assert s.object("inferenceservices", NAME) is None
        assert s.pods() == []


async def test_direct_start_with_an_invalid_manifest_fails_at_once_with_the_denials(
    dev_client: Client, task_queue: str, kubesim: KubeSim
) -> None:
    async with story(dev_client, task_queue, kubesim) as s:
        bad = isvc_manifest(minReplicas=3, maxReplicas=2)
        handle = await dev_client.start_workflow("InferenceService", bad, id=s.isvc_id, task_queue=task_queue)
        with pytest.raises(WorkflowFailureError) as failed:
            await asyncio.wait_for(handle.result(), 60)
        cause = failed.value.cause
        assert isinstance(cause, ApplicationError) and cause.type == ADMISSION_DENIED
        assert cause.non_retryable
        assert "spec.engine" in str(cause.message) and cause.details, (
            "the denials name the field and the reasons"
        )
        assert s.object("inferenceservices", NAME) is None
        assert s.pods() == []


async def _failed(s: Story) -> bool:
    return (await s.handle().describe()).status == WorkflowExecutionStatus.FAILED


__all__ = ["NAMESPACE"]


async def test_a_component_dropped_from_the_spec_drains_and_its_objects_go(
    dev_client: Client, task_queue: str, kubesim: KubeSim
) -> None:
    async with story(dev_client, task_queue, kubesim) as s:
        with_router = isvc_manifest(minReplicas=1, maxReplicas=1)
        with_router["spec"]["router"] = {
            "minReplicas": 1,
            "runner": {"name": "router", "image": "ome/router:1"},
        }
        await s.apply(with_router)
        view = await eventually(lambda: _components_ready(s, {"engine", "router"}), "engine and router Ready")
        assert {c.type for c in view.status.conditions} >= {"Ready", "EngineReady", "RouterReady"}
        assert s.object("inferencereplicas", f"{NAME}-router") is not None
        assert s.core.read_namespaced_service(f"{NAME}-router", NAMESPACE) is not None

        without_router = isvc_manifest(minReplicas=1, maxReplicas=1)
        await s.apply(without_router)
        await eventually(lambda: not _router_pods(s), "the router's pods to drain and go")
        await eventually(
            lambda: s.object("inferencereplicas", f"{NAME}-router") is None, "the router's IR to go"
        )
        await eventually(lambda: _no_router_service(s), "the router's Service to go")
        view = await eventually(lambda: _components_ready(s, {"engine"}), "the engine alone, Ready")
        assert "RouterReady" not in {c.type for c in view.status.conditions}
        assert [p.metadata.name for p in s.pods()] == [f"{NAME}-engine-0-default-0"]


async def _components_ready(s: Story, components: set[str]) -> Any:
    view = await s.status()
    ready = view.status.condition("Ready")
    if set(view.status.components) != components or ready is None or ready.status != "True":
        return None
    return view


def _router_pods(s: Story) -> list[Any]:
    return [p for p in s.pods() if p.metadata.labels.get("ome.io/component") == "router"]


def _no_router_service(s: Story) -> bool:
    names = [svc.metadata.name for svc in s.core.list_namespaced_service(NAMESPACE).items]
    return f"{NAME}-router" not in names
