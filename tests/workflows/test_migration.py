"""Migrations on kubesim (spec reference §13): an Instance moved off its node replacement
first, through the InferenceService's `migrate` Update and the `Migration` workflow it starts,
with the InferenceReplica's `status.migrations`, the Events, and the audit ConfigMap."""

from __future__ import annotations

import json
from typing import Any
from uuid import uuid4

import pytest
from temporalio.client import Client, WorkflowUpdateFailedError

from kubesim.handle import KubeSim
from models.migration import MigrationProgress
from models.pods import LABEL_INSTANCE_INDEX
from tests.workflows.service_harness import (
    FAST_CLUSTER,
    NAME,
    Story,
    engine_ready,
    eventually,
    isvc_manifest,
    story,
)
from workflows.migration.workflow import MigrationWorkflow
from workflows.service.workflow import InferenceServiceWorkflow

pytestmark = pytest.mark.workflows


def serving_by_index(s: Story) -> dict[int, str]:
    """Instance index -> node of its serving pod."""
    found: dict[int, str] = {}
    for pod in s.serving_pods():
        found[int(pod.metadata.labels[LABEL_INSTANCE_INDEX])] = pod.spec.node_name
    return found


def events(s: Story, reason: str) -> list[str]:
    listed = s.core.list_namespaced_event(s.namespace)
    return [e.message for e in listed.items if e.reason == reason]


async def migrate(s: Story, request: dict[str, Any]) -> Any:
    return await s.handle().execute_update(InferenceServiceWorkflow.migrate_update, request)


async def test_a_migration_moves_an_instance_off_its_node_replacement_first(
    dev_client: Client, task_queue: str, kubesim: KubeSim
) -> None:
    namespace = f"migrate-{uuid4().hex[:6]}"
    manifest = isvc_manifest(topologySpread=None, topologySpreadKey=None)
    manifest["spec"]["engine"] = {k: v for k, v in manifest["spec"]["engine"].items() if v is not None}
    manifest["metadata"]["namespace"] = namespace
    async with story(dev_client, task_queue, kubesim, cluster=FAST_CLUSTER, namespace=namespace) as s:
        assert (await s.apply(manifest)).accepted
        await eventually(lambda: engine_ready(s), "two engine Instances Ready", within=60)
        before = serving_by_index(s)
        assert sorted(before) == [0, 1]
        source_node = before[1]

        # Bad requests are refused with the field, the value and the fix.
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await migrate(s, {"component": "engine", "instance": -1, "from_node": source_node})
        assert str(refused.value.cause.message).startswith("migration request: instance must be a non-negative")
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await migrate(s, {"component": "decoder", "instance": 0, "from_node": source_node})
        assert "only OMENative components" in str(refused.value.cause.message)

        started = await migrate(
            s, {"component": "engine", "instance": 1, "from_node": source_node, "reason": "node maintenance",
                "requested_by": "test"}
        )
        handle = s.client.get_workflow_handle(started.workflow_id)
        assert started.workflow_id == f"migration/{namespace}/{NAME}-engine-1/{started.uuid}"

        # While it runs: CURRENT = DESIRED + 1, and never fewer than 2 serving.
        saw_surge = False
        fewest = 2

        async def done() -> MigrationProgress | None:
            nonlocal saw_surge, fewest
            fewest = min(fewest, len(serving_by_index(s)))
            ir = s.object("inferencereplicas", f"{NAME}-engine") or {}
            if (ir.get("status") or {}).get("replicas") == 3:
                saw_surge = True
            progress: MigrationProgress = await handle.query(MigrationWorkflow.status)
            return progress if progress.phase.terminal else None

        progress = await eventually(done, "the migration ends", within=90)
        assert progress.phase == "Completed", progress
        assert progress.message == f"migrated to instance={progress.surge_instance}"
        assert progress.surge_instance == 2
        assert saw_surge
        assert fewest >= 2
        result = MigrationProgress.model_validate(await handle.result())
        assert result.phase == "Completed"

        after = serving_by_index(s)
        assert sorted(after) == [0, 2]
        assert after[2] != source_node

        async def recorded() -> dict[str, Any] | None:
            ir = s.object("inferencereplicas", f"{NAME}-engine") or {}
            rows = (ir.get("status") or {}).get("migrations") or []
            return rows[0] if rows and rows[0]["phase"] == "Completed" and ir["status"]["replicas"] == 2 else None

        row = await eventually(recorded, "status.migrations shows it Completed")
        assert row["uuid"] == started.uuid and row["instance"] == 1 and row["surgeInstance"] == 2
        assert any(m.startswith(f"OMENative migration uuid={started.uuid} complete: component=engine instance=1 -> "
                                f"instance=2 (revision={NAME}-engine-") for m in events(s, "MigrationCompleted"))
        assert events(s, "MigrationRequestAccepted")
        audit = s.core.read_namespaced_config_map(f"{NAME}-ome-migration-audit", namespace)
        history = json.loads(audit.data["history.json"])
        assert [(h["uuid"], h["phase"]) for h in history] == [(started.uuid, "Completed")]
        assert history[0]["requested_by"] == "test"

        # A request naming the wrong node fails, and the Instance stays.
        wrong = await migrate(s, {"component": "engine", "instance": 0, "from_node": "no-such-node"})
        failed = MigrationProgress.model_validate(await s.client.get_workflow_handle(wrong.workflow_id).result())
        assert failed.phase == "Failed" and failed.reason == "MigrationFromNodeMismatch"
        assert failed.message == f"request.FromNode=no-such-node does not match observed source node={after[0]}"
        assert sorted(serving_by_index(s)) == [0, 2]
