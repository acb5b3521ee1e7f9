"""Migrations on kubesim (spec reference §13): an Instance moved off its node replacement
first, through the InferenceService's `migrate` Update and the `Migration` workflow it starts,
with the InferenceReplica's `status.migrations`, the Events, and the audit ConfigMap."""

from __future__ import annotations

import asyncio
import json
from typing import Any
from uuid import uuid4

import pytest
from temporalio.client import Client, WorkflowUpdateFailedError

from kubesim.handle import KubeSim
from models.migration import MigrationAudit, MigrationProgress
from models.pods import LABEL_INSTANCE_INDEX
from planning.replica.migrations import POLICY_UNCONFIGURED_WAIT
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


def events(s: Story, reason: str, type_: str | None = None) -> list[str]:
    listed = s.core.list_namespaced_event(s.namespace)
    return [e.message for e in listed.items if e.reason == reason and type_ in (None, e.type)]


def spread_free(namespace: str, **engine: Any) -> dict[str, Any]:
    """Two engine Instances anywhere (no zone spread), in `namespace`."""
    manifest = isvc_manifest(topologySpread=None, topologySpreadKey=None, **engine)
    manifest["spec"]["engine"] = {k: v for k, v in manifest["spec"]["engine"].items() if v is not None}
    manifest["metadata"]["namespace"] = namespace
    return manifest


async def ended(s: Story, workflow_id: str) -> MigrationProgress:
    return MigrationProgress.model_validate(await s.client.get_workflow_handle(workflow_id).result())


def migration_rows(s: Story) -> list[dict[str, Any]]:
    ir = s.object("inferencereplicas", f"{NAME}-engine") or {}
    return list((ir.get("status") or {}).get("migrations") or [])


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
        assert getattr(refused.value.cause, "type", None) == "MigrationRequestRejected"  # not a component: exit 1

        started = await migrate(
            s, {"component": "engine", "instance": 1, "from_node": source_node, "reason": "node maintenance",
                "requested_by": "test"}
        )
        handle = s.client.get_workflow_handle(started.workflow_id)
        assert started.workflow_id == f"migration/{namespace}/{NAME}-engine-1/{started.uuid}"

        # While it runs: CURRENT = DESIRED + 1, and never fewer than 2 serving. Sampled on a
        # task of its own every 50 ms: the surge can be short, and the migration's query below
        # takes a while on a loaded machine.
        saw_surge = False
        fewest = 2

        async def sample() -> None:
            nonlocal saw_surge, fewest
            while True:
                fewest = min(fewest, len(serving_by_index(s)))
                ir = s.object("inferencereplicas", f"{NAME}-engine") or {}
                if (ir.get("status") or {}).get("replicas") == 3:
                    saw_surge = True
                await asyncio.sleep(0.05)

        async def done() -> MigrationProgress | None:
            progress: MigrationProgress = await handle.query(MigrationWorkflow.status)
            return progress if progress.phase.terminal else None

        sampler = asyncio.create_task(sample())
        try:
            progress = await eventually(done, "the migration ends", within=90)
        finally:
            sampler.cancel()
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


async def test_without_caps_a_migration_waits_in_accepted_until_cancelled(
    dev_client: Client, task_queue: str, kubesim: KubeSim
) -> None:
    """No `lifecycle.audit` configured: the request waits in `Accepted`, warns once, and a
    `cancel` ends it with nothing moved."""
    namespace = f"migrate-nocaps-{uuid4().hex[:6]}"
    async with story(
        dev_client, task_queue, kubesim, cluster=FAST_CLUSTER, namespace=namespace, migration_audit=None
    ) as s:
        assert (await s.apply(spread_free(namespace))).accepted
        await eventually(lambda: engine_ready(s), "two engine Instances Ready", within=60)
        before = serving_by_index(s)
        started = await migrate(s, {"component": "engine", "instance": 1, "from_node": before[1]})
        handle = s.client.get_workflow_handle(started.workflow_id)

        def waiting() -> dict[str, Any] | None:
            rows = migration_rows(s)
            return rows[0] if rows and rows[0]["message"] == POLICY_UNCONFIGURED_WAIT else None

        row = await eventually(waiting, "status.migrations shows the wait for caps", within=20)
        assert row["uuid"] == started.uuid and row["phase"] == "Accepted" and row.get("surgeInstance") is None
        assert row["message"] == "waiting for migration capacity policy (no lifecycle.audit configured)"
        warned = await eventually(
            lambda: events(s, "MigrationPolicyUnconfigured", "Warning"), "a MigrationPolicyUnconfigured Warning"
        )
        assert warned == [
            f"OMENative migration uuid={started.uuid} component=engine instance=1: {POLICY_UNCONFIGURED_WAIT}"
        ]
        progress: MigrationProgress = await handle.query(MigrationWorkflow.status)
        assert (progress.phase, progress.message) == ("Accepted", POLICY_UNCONFIGURED_WAIT)

        await handle.signal(MigrationWorkflow.cancel, "tester")
        result = await ended(s, started.workflow_id)
        assert (result.phase, result.reason, result.message) == ("Failed", "MigrationCancelled", "cancelled by tester")
        assert result.surge_instance is None
        assert not events(s, "MigrationRequestAccepted")
        # Warned once, for all the passes it waited.
        assert len(events(s, "MigrationPolicyUnconfigured")) == 1
        assert serving_by_index(s) == before
        assert sorted(int(p.metadata.labels[LABEL_INSTANCE_INDEX]) for p in s.pods()) == [0, 1]
        final = await eventually(
            lambda: next((r for r in migration_rows(s) if r["phase"] == "Failed"), None), "status shows it Failed"
        )
        assert final["message"] == "cancelled by tester"


async def test_the_rate_cap_fails_a_migration_past_the_window_count(
    dev_client: Client, task_queue: str, kubesim: KubeSim
) -> None:
    """One migration per hour: the first moves its Instance, the second fails `RateLimited`."""
    namespace = f"migrate-rate-{uuid4().hex[:6]}"
    caps = MigrationAudit(max_migrations_per_window=1, window_seconds=3600)
    async with story(
        dev_client, task_queue, kubesim, cluster=FAST_CLUSTER, namespace=namespace, migration_audit=caps
    ) as s:
        assert (await s.apply(spread_free(namespace))).accepted
        await eventually(lambda: engine_ready(s), "two engine Instances Ready", within=60)
        before = serving_by_index(s)
        first = await migrate(s, {"component": "engine", "instance": 1, "from_node": before[1]})
        done = await ended(s, first.workflow_id)
        assert (done.phase, done.surge_instance) == ("Completed", 2), done

        def moved() -> dict[int, str] | None:
            found = serving_by_index(s)
            return found if sorted(found) == [0, 2] else None

        after = await eventually(moved, "instance 1 gone, instance 2 serving")

        second = await migrate(s, {"component": "engine", "instance": 0, "from_node": after[0]})
        refused = await ended(s, second.workflow_id)
        assert (refused.phase, refused.reason) == ("Failed", "RateLimited"), refused
        assert refused.message == "migration rate cap reached (1/1 in the last 1h0m0s)"
        assert refused.surge_instance is None
        assert await eventually(lambda: events(s, "RateLimited", "Warning"), "a RateLimited Warning") == [
            f"OMENative migration uuid={second.uuid} component=engine instance=0: "
            "migration rate cap reached (1/1 in the last 1h0m0s)"
        ]
        assert serving_by_index(s) == after
        assert len(events(s, "MigrationRequestAccepted")) == 1


async def test_migration_policy_never_fails_the_request(
    dev_client: Client, task_queue: str, kubesim: KubeSim
) -> None:
    namespace = f"migrate-never-{uuid4().hex[:6]}"
    manifest = spread_free(namespace, lifecycle={"migrationPolicy": {"mode": "Never"}})
    async with story(dev_client, task_queue, kubesim, cluster=FAST_CLUSTER, namespace=namespace) as s:
        assert (await s.apply(manifest)).accepted
        await eventually(lambda: engine_ready(s), "two engine Instances Ready", within=60)
        before = serving_by_index(s)
        started = await migrate(s, {"component": "engine", "instance": 1, "from_node": before[1]})
        result = await ended(s, started.workflow_id)
        assert (result.phase, result.reason) == ("Failed", "MigrationRequestRejected"), result
        assert result.message == "migrations disabled by MigrationPolicy Mode=Never"
        assert await eventually(
            lambda: events(s, "MigrationRequestRejected", "Warning"), "a MigrationRequestRejected Warning"
        ) == [
            f"OMENative migration uuid={started.uuid} component=engine instance=1: "
            "migrations disabled by MigrationPolicy Mode=Never"
        ]
        assert not events(s, "MigrationRequestAccepted")
        assert serving_by_index(s) == before


async def test_a_malformed_migrate_signal_becomes_a_warning_event(
    dev_client: Client, task_queue: str, kubesim: KubeSim
) -> None:
    """The signal has no answer to fail: its refusal is a Warning Event on the InferenceService."""
    namespace = f"migrate-signal-{uuid4().hex[:6]}"
    async with story(dev_client, task_queue, kubesim, cluster=FAST_CLUSTER, namespace=namespace) as s:
        assert (await s.apply(spread_free(namespace))).accepted
        await eventually(lambda: engine_ready(s), "two engine Instances Ready", within=60)
        before = serving_by_index(s)
        await s.handle().signal(
            InferenceServiceWorkflow.migrate, {"component": "engine", "instance": "one", "from_node": before[1]}
        )
        rejected = await eventually(
            lambda: events(s, "MigrationRequestRejected", "Warning"), "a MigrationRequestRejected Warning"
        )
        assert len(rejected) == 1
        assert rejected[0].startswith("migration request")
        assert rejected[0] == "migration request: instance must be a non-negative index, got 'one'"

        await s.handle().signal(InferenceServiceWorkflow.migrate, {"component": "decoder", "instance": 0,
                                                                   "from_node": before[0]})

        def two() -> list[str] | None:
            found = events(s, "MigrationRequestRejected", "Warning")
            return found if len(found) == 2 else None

        both = await eventually(two, "a second MigrationRequestRejected Warning")
        assert all(message.startswith("migration request") for message in both)
        assert any("component 'decoder' is not in this InferenceService" in message for message in both)
        assert not events(s, "MigrationRequestAccepted")
        assert serving_by_index(s) == before
