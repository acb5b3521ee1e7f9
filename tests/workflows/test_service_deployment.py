"""Deployment-mode components and refused `scale` signals, through the InferenceService workflow.

Real activities against kubesim, whose Deployment controller runs the RawDeployment
component's pods; the Deployment watcher (`workers.watch.deployments`) runs in-process and
signals the workflow as it does in production, so a condition that changes within seconds
of a Deployment change came from a watcher signal (the workflow's own re-read of a
converged Deployment is minutes away).
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from temporalio import workflow
from temporalio.client import Client

from kubesim.handle import KubeSim
from tests.workflows.service_harness import NAME, NAMESPACE, Story, eventually, isvc_manifest, story
from workers.watch.deployments import DeploymentWatcher, TemporalDeploymentSink
from workflows.service.messages import ServiceStatusView
from workflows.service.projection import MULTINODE_SHOWN

pytestmark = pytest.mark.workflows


def raw_manifest(**engine: Any) -> dict[str, Any]:
    """The spec 003 example with its engine as a plain Deployment (spread is ignored there)."""
    manifest = copy.deepcopy(isvc_manifest(**engine))
    manifest["spec"]["deploymentMode"] = "RawDeployment"
    for key in ("topologySpread", "topologySpreadKey"):
        manifest["spec"]["engine"].pop(key, None)
    return manifest


@asynccontextmanager
async def deployment_watcher(client: Client, sim: KubeSim) -> AsyncIterator[DeploymentWatcher]:
    watcher = DeploymentWatcher(sim.api_client(), TemporalDeploymentSink(client))
    await watcher.start()
    try:
        yield watcher
    finally:
        await watcher.stop()


async def engine_condition(s: Story, status: str, reason: str) -> ServiceStatusView | None:
    view = await s.status()
    condition = view.status.condition("EngineReady")
    if condition is not None and (condition.status, condition.reason) == (status, reason):
        return view
    return None


def deployment(s: Story) -> dict[str, Any] | None:
    return next(
        (
            d
            for d in s.sim.objects("apps", "deployments", NAMESPACE)
            if d["metadata"]["name"] == f"{NAME}-engine"
        ),
        None,
    )


def warning_events(s: Story, reason: str) -> list[Any]:
    listed = s.core.list_namespaced_event(NAMESPACE)
    return [e for e in listed.items if e.reason == reason and e.type == "Warning"]


async def test_deployment_component_ready_follows_its_deployment(
    dev_client: Client, task_queue: str, kubesim: KubeSim
) -> None:
    async with story(dev_client, task_queue, kubesim) as s, deployment_watcher(dev_client, kubesim):
        await s.apply(raw_manifest(minReplicas=2, maxReplicas=4))

        view = await eventually(lambda: engine_condition(s, "True", "Ready"), "EngineReady=True (Ready)")
        condition = view.status.condition("EngineReady")
        assert condition is not None and condition.message == "All Instances are Ready"
        ready = await eventually(lambda: _ready(s, "True"), "the InferenceService to be Ready")
        assert ready.phase == "Ready"
        assert ready.status.components["engine"].deployment_mode == "RawDeployment"
        assert ready.status.components["engine"].lifecycle is None, "§7: lifecycle is OMENative-only"
        assert ready.deployments["engine"].available_replicas == 2
        object_status = await eventually(lambda: _object_condition(s, "EngineReady", "True"), "the object")
        assert object_status["reason"] == "Ready"

        # A valid scale reaches the Deployment; Ready again once the third pod is available.
        await s.handle().signal("scale", {"component": "engine", "replicas": 3})
        await eventually(lambda: (deployment(s) or {}).get("spec", {}).get("replicas") == 3, "replicas 3")
        await eventually(lambda: _available(s, 3), "EngineReady=True with three available pods", within=60)

        # Every node fails: the node controller marks the pods NotReady, and their
        # replacements have nowhere to run, so the Deployment reports none available.
        for node in s.core.list_node().items:
            kubesim.fail_node(node.metadata.name)
        view = await eventually(
            lambda: engine_condition(s, "False", "InsufficientAvailable"),
            "EngineReady=False (InsufficientAvailable) from the watcher's signal",
            within=60,
        )
        condition = view.status.condition("EngineReady")
        assert condition is not None and condition.message == "0/3 Instances serving, need 3"
        overall = view.status.condition("Ready")
        assert overall is not None and overall.status == "False"
        assert (overall.reason, overall.message) == (
            "InsufficientAvailable",
            "engine: 0/3 Instances serving, need 3",
        )
        await eventually(lambda: _object_condition(s, "Ready", "False"), "the object's Ready=False")


async def test_refused_scale_is_a_warning_event_and_in_status(
    dev_client: Client, task_queue: str, kubesim: KubeSim
) -> None:
    async with story(dev_client, task_queue, kubesim) as s:
        await s.apply(raw_manifest(minReplicas=1, maxReplicas=4))
        await eventually(lambda: deployment(s), "the engine Deployment")

        # What `temporal workflow signal --name scale --input '{...}'` sends: plain JSON.
        await s.handle().signal("scale", {"component": "engine", "replicas": -3})
        expected = (
            "scale refused: replicas=-3 for component engine must be an integer >= 0 within "
            "minReplicas..maxReplicas (1..4); send a value in range or change minReplicas/maxReplicas "
            "with apply"
        )
        view = await eventually(lambda: _rejected(s, expected), "the refusal in the status query")
        rejected = view.last_rejected_request
        assert rejected is not None
        assert (rejected.signal, rejected.reason, rejected.request["replicas"]) == (
            "scale",
            "ScaleRejected",
            -3,
        )
        assert view.transient_replicas == {}
        (event,) = await eventually(lambda: warning_events(s, "ScaleRejected"), "the ScaleRejected Event")
        assert event.message == expected
        assert (event.involved_object.kind, event.involved_object.name) == ("InferenceService", NAME)

        await s.handle().signal("scale", {"component": "decoder", "replicas": 2})
        unknown = (
            "scale refused: component='decoder' is not a component of this InferenceService "
            "(components: engine); send the scale to one of them, or add spec.decoder with apply"
        )
        await eventually(lambda: _rejected(s, unknown), "the unknown component's refusal")
        await eventually(lambda: len(warning_events(s, "ScaleRejected")) == 2, "a second ScaleRejected Event")

        # A value in range is taken, and leaves the last refusal where it was.
        await s.handle().signal("scale", {"component": "engine", "replicas": 2})
        await eventually(lambda: (deployment(s) or {}).get("spec", {}).get("replicas") == 2, "replicas 2")
        view = await s.status()
        assert view.transient_replicas == {"engine": 2}
        assert view.last_rejected_request is not None and view.last_rejected_request.message == unknown

        # A Deployment has no InferenceReplica to reset Instances of: refused the same way.
        await s.handle().signal("reset_instances", {"component": "engine", "instances": "all"})
        no_replica = (
            "reset_instances refused: component engine runs in RawDeployment mode, which has no "
            "InferenceReplica with Instances to reset; reset_instances applies to OMENative components only "
            '(set spec.engine.annotations["ome.io/deploymentMode"] to OMENative with apply to use it)'
        )
        view = await eventually(lambda: _rejected(s, no_replica), "the reset_instances refusal")
        assert view.last_rejected_request is not None
        assert view.last_rejected_request.reason == "RequestRejected"
        assert view.last_rejected_request.request == {"component": "engine", "value": "all"}
        (event,) = await eventually(lambda: warning_events(s, "RequestRejected"), "the RequestRejected Event")
        assert event.message == no_replica


async def _ready(s: Story, status: str) -> ServiceStatusView | None:
    view = await s.status()
    condition = view.status.condition("Ready")
    return view if condition is not None and condition.status == status else None


async def _available(s: Story, count: int) -> bool:
    view = await engine_condition(s, "True", "Ready")
    return view is not None and view.deployments["engine"].available_replicas == count


async def _rejected(s: Story, message: str) -> ServiceStatusView | None:
    view = await s.status()
    rejected = view.last_rejected_request
    return view if rejected is not None and rejected.message == message else None


def _object_condition(s: Story, kind: str, status: str) -> dict[str, Any] | None:
    isvc = s.object("inferenceservices", NAME)
    conditions = {c["type"]: c for c in ((isvc or {}).get("status") or {}).get("conditions") or []}
    found = conditions.get(kind)
    return found if found is not None and found["status"] == status else None


@pytest.mark.parametrize("recorded_before", [False, True], ids=["now", "runs-recorded-before"])
async def test_a_multinode_component_says_why_it_does_not_run(
    dev_client: Client, task_queue: str, kubesim: KubeSim, monkeypatch: pytest.MonkeyPatch, recorded_before: bool
) -> None:
    """An engine pinned to MultiNode (a LeaderWorkerSet in OME, which this product does not run):
    the apply warns, and the InferenceService's `Ready` and `EngineReady` name the component and
    the fix (`isvc-multinode-shown`), not "the InferenceService declares no component" as runs
    from before did."""
    if recorded_before:
        patched = workflow.patched
        monkeypatch.setattr(workflow, "patched", lambda change: change != MULTINODE_SHOWN and patched(change))
    manifest = isvc_manifest()
    manifest["spec"]["engine"]["annotations"] = {"ome.io/deploymentMode": "MultiNode"}
    fix = "which needs a LeaderWorkerSet this product does not run; remove the annotation"
    async with story(dev_client, task_queue, kubesim) as s:
        result = await s.apply(manifest)
        assert result.accepted and any(fix in warning and "MultiNodeNotSupported" in warning for warning in result.warnings)
        if recorded_before:
            ready = await eventually(lambda: _object_condition(s, "Ready", "False"), "the object's Ready=False")
            assert ready["reason"] == "NoComponents" and _object_condition(s, "EngineReady", "False") is None
            return
        ready = await eventually(lambda: _object_condition(s, "Ready", "False"), "the object's Ready=False")
        assert ready["reason"] == "MultiNodeNotSupported" and ready["message"].startswith("engine: ")
        assert fix in ready["message"]
        engine = await eventually(lambda: _object_condition(s, "EngineReady", "False"), "EngineReady=False")
        assert engine["reason"] == "MultiNodeNotSupported"
        assert s.sim.objects("apps", "deployments", NAMESPACE) == []
