"""`PodDeleteBlockedByFinalizer` keeps histories from before it replayable
(`workflow.patched("finalizer-block-report")`).

Before it, a pod pinned by another controller's finalizers, Terminating on a dead node, was
passed by in silence: no Event (an activity) and no timer for it. The test records an
Instance deletion that meets such a pod without `forceDelete` (so the run reports nothing),
then rewrites the history's spec to turn `forceDelete` on, as if the old code had run with
it, and replays it: the old path must be taken. A fresh run with `forceDelete` still reports.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from typing import Any

import kubernetes
import pytest
import pytest_asyncio
from temporalio.client import WorkflowHistory
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from kubesim.handle import KubeSim
from models.instance import DeleteRequest, ForceDeletePolicy, InstancePhase
from tests.workflows.instance_kube_harness import KubeHarness, kube_harness
from workers.client import DATA_CONVERTER
from workers.worker import _SANDBOX_PASSTHROUGH
from workflows.registry import WORKFLOWS

pytestmark = [pytest.mark.workflows, pytest.mark.kubesim]
P = InstancePhase

FOREIGN = "example.com/keep"
POLICY = {"overdue_slack_seconds": 0.0, "node_unreachable_threshold_seconds": 0.0}
WIRE_POLICY = {"overdueSlackSeconds": 0.0, "nodeUnreachableThresholdSeconds": 0.0}


@pytest_asyncio.fixture(loop_scope="session")
async def harness(
    workflow_env: WorkflowEnvironment, kubesim: KubeSim, task_queue: str
) -> AsyncIterator[KubeHarness]:
    async with kube_harness(workflow_env, kubesim, task_queue) as built:
        yield built


def with_force_delete(node: Any) -> int:
    """Turn `forceDelete` on in every JSON payload of a history document; how many changed."""
    changed = 0
    if isinstance(node, dict):
        metadata = node.get("metadata")
        encoding = metadata.get("encoding") if isinstance(metadata, dict) else None
        if "data" in node and encoding is not None and base64.b64decode(encoding) == b"json/plain":
            decoded = json.loads(base64.b64decode(node["data"]))
            # An InstanceSpec (the input; unset fields may be left out of the payload).
            if isinstance(decoded, dict) and "leaderPodSpec" in decoded and decoded.get("forceDelete") is None:
                decoded["forceDelete"] = WIRE_POLICY
                node["data"] = base64.b64encode(json.dumps(decoded).encode()).decode()
                changed += 1
        for item in node.values():
            changed += with_force_delete(item)
    elif isinstance(node, list):
        for item in node:
            changed += with_force_delete(item)
    return changed


async def pinned_on_dead_node(harness: KubeHarness, force_delete: ForceDeletePolicy | None) -> Any:
    """An Instance whose only pod, pinned by a foreign finalizer on a failed node, is deleted."""
    spec = harness.spec(force_delete=force_delete, drain_seconds=0.0)
    # Started as runs from before versions travelled in the input: the change is a `patched` call.
    handle = await harness.start(spec, first=spec)
    await harness.until_real(handle, lambda s: s.phase == P.READY and s.serving)
    ((name, pod),) = harness.live_pods().items()
    core = kubernetes.client.CoreV1Api(harness.sim.api_client())
    core.patch_namespaced_pod(name, harness.namespace, {"metadata": {"finalizers": [FOREIGN]}})
    harness.sim.fail_node(pod["spec"]["nodeName"])
    await handle.signal("delete", DeleteRequest())
    for _ in range(40):  # until the pod is Terminating
        if harness.pods()[name]["metadata"].get("deletionTimestamp"):
            break
        await asyncio.sleep(0.1)
    # Past the safety re-check: the Instance looks again with the pod overdue on a dead node.
    for _ in range(4):
        await harness.env.sleep(100)
        await asyncio.sleep(0.3)
    return handle, name, pod["spec"]["nodeName"], core


def replayer() -> Replayer:
    return Replayer(
        workflows=list(WORKFLOWS),
        data_converter=DATA_CONVERTER,
        workflow_runner=SandboxedWorkflowRunner(
            restrictions=SandboxRestrictions.default.with_passthrough_modules(*_SANDBOX_PASSTHROUGH)
        ),
    )


async def test_history_from_before_the_finalizer_report_replays(harness: KubeHarness) -> None:
    handle, name, node, core = await pinned_on_dead_node(harness, force_delete=None)
    recorded = await handle.fetch_history()
    assert "PodDeleteBlockedByFinalizer" not in harness.events()
    try:
        document = json.loads(recorded.to_json())
        assert with_force_delete(document) >= 1, "the Instance's spec carries force_delete"
        # Raises NondeterminismError if the pinned pod now gets an Event or a timer of its own.
        await replayer().replay_workflow(WorkflowHistory.from_json(recorded.workflow_id, document))
    finally:
        core.patch_namespaced_pod(name, harness.namespace, {"metadata": {"finalizers": None}})
        harness.sim.restore_node(node)
        await handle.terminate("test finished")


async def test_a_new_run_still_reports_the_pinned_pod(harness: KubeHarness) -> None:
    handle, name, node, core = await pinned_on_dead_node(harness, ForceDeletePolicy.model_validate(POLICY))
    try:
        assert harness.events().count("PodDeleteBlockedByFinalizer") == 1
        assert name in harness.pods(), "a pinned pod is never force-deleted"
        await replayer().replay_workflow(await handle.fetch_history())
    finally:
        core.patch_namespaced_pod(name, harness.namespace, {"metadata": {"finalizers": None}})
        harness.sim.restore_node(node)
        await handle.terminate("test finished")
