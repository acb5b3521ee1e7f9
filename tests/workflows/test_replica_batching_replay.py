"""Pod batching (§14) keeps histories from before it replayable (`workflow.patched("pod-batching")`).

Those histories' inputs lack the batch sizes, so on replay they read the chart's 100 and the
budget would defer starts and removals the old code had made at once. The test records a run
without batching (both sizes unset: unbounded), then rewrites the history's inputs and signals
to a budget of one pod, as if the default now applied to it, and replays it: the old path must
be taken (every Instance started, every removal sent, no requeue timer), not the batched one.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from temporalio.client import Client, WorkflowHistory
from temporalio.worker import Replayer
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from kubesim.handle import KubeSim
from tests.workflows.service_harness import FAST_CLUSTER, eventually, isvc_manifest, story
from tests.workflows.test_replica_teardown import live_pods, serving
from workers.client import DATA_CONVERTER
from workers.worker import _SANDBOX_PASSTHROUGH
from workflows.registry import WORKFLOWS

pytestmark = pytest.mark.workflows

UNBOUNDED = {"scale_up_pod_batch_size": None, "scale_down_pod_batch_size": None}


def with_budget(value: Any, pods: int) -> Any:
    """`value` (decoded payload JSON) with every unset batch size set to `pods`."""
    if isinstance(value, dict):
        out = {key: with_budget(item, pods) for key, item in value.items()}
        for key in UNBOUNDED:
            if key in out and out[key] is None:
                out[key] = pods
        return out
    if isinstance(value, list):
        return [with_budget(item, pods) for item in value]
    return value


def rewrite_payloads(node: Any, pods: int) -> int:
    """Rewrite every JSON payload in a history document in place; how many changed."""
    changed = 0
    if isinstance(node, dict):
        encoding = node.get("metadata", {}).get("encoding") if isinstance(node.get("metadata"), dict) else None
        if "data" in node and encoding is not None and base64.b64decode(encoding) == b"json/plain":
            decoded = json.loads(base64.b64decode(node["data"]))
            rewritten = with_budget(decoded, pods)
            if rewritten != decoded:
                node["data"] = base64.b64encode(json.dumps(rewritten).encode()).decode()
                changed += 1
        for item in node.values():
            changed += rewrite_payloads(item, pods)
    elif isinstance(node, list):
        for item in node:
            changed += rewrite_payloads(item, pods)
    return changed


async def test_history_from_before_pod_batching_replays_unbatched(
    dev_client: Client, task_queue: str, kubesim: KubeSim
) -> None:
    cluster = {**FAST_CLUSTER, **UNBOUNDED}
    async with story(dev_client, task_queue, kubesim, cluster) as s:
        await s.apply(isvc_manifest(minReplicas=3, maxReplicas=3, topologySpread="Preferred"))
        await eventually(lambda: serving(s, 3), "three serving engine pods, started in one pass", within=90)
        await s.apply(isvc_manifest(minReplicas=1, maxReplicas=1, topologySpread="Preferred"))
        await eventually(lambda: _one_left(s), "two Instances removed in one pass", within=90)
        recorded = await s.irep().fetch_history()

    document = json.loads(recorded.to_json())
    assert rewrite_payloads(document, pods=1) >= 1, "the InferenceReplica's input carries the batch sizes"
    old = WorkflowHistory.from_json(recorded.workflow_id, document)
    replayer = Replayer(
        workflows=list(WORKFLOWS),
        data_converter=DATA_CONVERTER,
        workflow_runner=SandboxedWorkflowRunner(
            restrictions=SandboxRestrictions.default.with_passthrough_modules(*_SANDBOX_PASSTHROUGH)
        ),
    )
    # Raises NondeterminismError if a budget of one pod now defers a start or a removal.
    await replayer.replay_workflow(old)
    # And the recorded run itself replays too.
    await replayer.replay_workflow(recorded)


async def _one_left(s: Any) -> bool:
    return len(live_pods(s)) == 1 and len(s.pods()) == 1
