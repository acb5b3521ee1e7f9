"""Automatic relocation on kubesim (spec reference §13): a new Instance stuck on a node whose
container runtime is wedged (`KubeSim.stall_node`: Ready, but its pods wait in
ContainerCreating) times out and is relocated off that node, keeping its index; the attempts
cap, `migrationPolicy.mode: Never` and a failure of the workload itself relocate nothing."""

from __future__ import annotations

import asyncio
from typing import Any
from uuid import uuid4

import pytest
from temporalio.client import Client

from kubesim.handle import KubeSim
from models.pods import LABEL_INSTANCE_INDEX
from tests.workflows.service_harness import IMAGE_1, NAME, Story, eventually, isvc_manifest, story

pytestmark = pytest.mark.workflows

NODES = ("gpu-node-1", "gpu-node-2", "gpu-node-3", "gpu-node-4")
READY_TIMEOUT = "5s"
SUBJECT = "OMENative auto-migration component=engine instance=0"


def one_engine(namespace: str, **lifecycle: Any) -> dict[str, Any]:
    """One engine Instance anywhere, ready within `READY_TIMEOUT` or failed."""
    manifest = isvc_manifest(topologySpread=None, topologySpreadKey=None, minReplicas=1, maxReplicas=1,
                             lifecycle={"instanceReadyTimeout": READY_TIMEOUT, **lifecycle})
    manifest["spec"]["engine"] = {k: v for k, v in manifest["spec"]["engine"].items() if v is not None}
    manifest["metadata"]["namespace"] = namespace
    return manifest


def cluster(**extra: Any) -> dict[str, Any]:
    return {"drain_seconds": 0.2, "stuck_pod_grace_seconds": 2.0, **extra}


def events(s: Story, reason: str) -> list[tuple[str, str]]:
    listed = s.core.list_namespaced_event(s.namespace)
    return [(e.type, e.message) for e in listed.items if e.reason == reason]


def live_pods(s: Story) -> list[Any]:
    return [p for p in s.pods() if p.metadata.deletion_timestamp is None]


def migration_rows(s: Story) -> list[dict[str, Any]]:
    ir = s.object("inferencereplicas", f"{NAME}-engine") or {}
    return list((ir.get("status") or {}).get("migrations") or [])


async def instance_row(s: Story) -> Any:
    rows = (await s.replica_status()).instance_statuses
    return rows[0] if rows else None


def only_on(sim: KubeSim, node: str) -> None:
    """Every node but `node` cordoned: the next pod goes there."""
    for other in NODES:
        if other != node:
            sim.cordon_node(other)


async def placed_on(s: Story, node: str) -> Any:
    def probe() -> Any:
        pods = live_pods(s)
        return pods[0] if pods and pods[0].spec.node_name == node else None

    return await eventually(probe, f"the engine pod bound to {node}", within=30)


async def failed_with(s: Story, *reasons: str) -> Any:
    async def probe() -> Any:
        row = await instance_row(s)
        failure = row.last_failure if row is not None else None
        return row if row is not None and row.phase == "Failed" and failure and failure.reason in reasons else None

    return await eventually(probe, f"the Instance Failed with {' or '.join(reasons)}", within=30)


def kept_off(pod: Any) -> list[str]:
    """The nodes the pod's required node affinity keeps it off."""
    affinity = pod.spec.affinity.node_affinity if pod.spec.affinity else None
    required = affinity.required_during_scheduling_ignored_during_execution if affinity else None
    off: list[str] = []
    for term in required.node_selector_terms if required else []:
        for field in term.match_fields or []:
            if field.key == "metadata.name" and field.operator == "NotIn":
                off += field.values
    return off


async def test_an_instance_stuck_on_a_wedged_node_is_relocated_and_serves_elsewhere(
    dev_client: Client, task_queue: str, kubesim: KubeSim
) -> None:
    namespace = f"reloc-{uuid4().hex[:6]}"
    kubesim.stall_node("gpu-node-1")
    only_on(kubesim, "gpu-node-1")
    async with story(dev_client, task_queue, kubesim, cluster=cluster(), namespace=namespace) as s:
        assert (await s.apply(one_engine(namespace))).accepted
        await placed_on(s, "gpu-node-1")
        # Room elsewhere from now on; the stuck pod stays where it is until the deadline.
        kubesim.uncordon_node("gpu-node-2")

        def serving() -> Any:
            pods = s.serving_pods()
            return pods[0] if pods else None

        pod = await eventually(serving, "the engine serving again", within=60)
        assert pod.spec.node_name == "gpu-node-2"
        assert pod.metadata.labels[LABEL_INSTANCE_INDEX] == "0"
        assert kept_off(pod) == ["gpu-node-1"]
        assert events(s, "AutoMigrationTriggered") == [
            ("Normal", f"{SUBJECT}: relocated off node gpu-node-1 after DeadlineExceeded "
                       "(attempt 1/3; avoiding gpu-node-1)"),
        ]
        assert not events(s, "AutoMigrationCapReached")

        def relocated() -> Any:
            rows = [r for r in migration_rows(s) if r["phase"] == "Relocated"]
            return rows[0] if rows else None

        row = await eventually(relocated, "status.migrations shows the relocation")
        assert (row["instance"], row["fromNode"]) == (0, "gpu-node-1")
        assert row["message"] == "relocated off node gpu-node-1 after DeadlineExceeded (attempt 1/3; avoiding gpu-node-1)"
        assert row.get("surgeInstance") is None

        async def ready() -> Any:
            row = await instance_row(s)
            return row if row is not None and row.phase == "Ready" else None

        settled = await eventually(ready, "the Instance Ready")
        assert settled.index == 0
        assert settled.last_failure is not None and settled.last_failure.reason == "DeadlineExceeded"
        assert [p.spec.node_name for p in live_pods(s)] == ["gpu-node-2"]


async def test_out_of_attempts_the_instance_stays_failed_with_one_warning(
    dev_client: Client, task_queue: str, kubesim: KubeSim
) -> None:
    """`maxAttempts: 1` and two wedged nodes: one relocation, then `AutoMigrationCapReached`."""
    namespace = f"reloc-cap-{uuid4().hex[:6]}"
    kubesim.stall_node("gpu-node-1")
    kubesim.stall_node("gpu-node-2")
    only_on(kubesim, "gpu-node-1")
    async with story(
        dev_client, task_queue, kubesim, cluster=cluster(auto_migrate_max_attempts=1), namespace=namespace
    ) as s:
        assert (await s.apply(one_engine(namespace))).accepted
        await placed_on(s, "gpu-node-1")
        kubesim.uncordon_node("gpu-node-2")
        pod = await placed_on(s, "gpu-node-2")
        assert kept_off(pod) == ["gpu-node-1"]
        warned = await eventually(lambda: events(s, "AutoMigrationCapReached"), "AutoMigrationCapReached")
        assert warned == [
            ("Warning", f"{SUBJECT}: not relocated off node gpu-node-2 after DeadlineExceeded: 1/1 attempts used "
                        "(autoMigrate.maxAttempts)"),
        ]
        assert events(s, "AutoMigrationTriggered") == [
            ("Normal", f"{SUBJECT}: relocated off node gpu-node-1 after DeadlineExceeded "
                       "(attempt 1/1; avoiding gpu-node-1)"),
        ]
        row = await failed_with(s, "DeadlineExceeded")
        assert row.index == 0
        await asyncio.sleep(2)
        assert (await instance_row(s)).phase == "Failed"
        assert len(events(s, "AutoMigrationTriggered")) == 1
        assert len(events(s, "AutoMigrationCapReached")) == 1
        assert [r["phase"] for r in migration_rows(s)] == ["Relocated"]


async def test_migration_policy_never_turns_relocation_off(
    dev_client: Client, task_queue: str, kubesim: KubeSim
) -> None:
    namespace = f"reloc-never-{uuid4().hex[:6]}"
    kubesim.stall_node("gpu-node-1")
    only_on(kubesim, "gpu-node-1")
    manifest = one_engine(namespace, migrationPolicy={"mode": "Never"})
    async with story(dev_client, task_queue, kubesim, cluster=cluster(), namespace=namespace) as s:
        assert (await s.apply(manifest)).accepted
        await placed_on(s, "gpu-node-1")
        kubesim.uncordon_node("gpu-node-2")
        await failed_with(s, "DeadlineExceeded")
        await asyncio.sleep(2)
        assert (await instance_row(s)).phase == "Failed"
        assert not events(s, "AutoMigrationTriggered") and not events(s, "AutoMigrationCapReached")
        assert not migration_rows(s)
        assert not s.serving_pods()


async def test_a_failure_of_the_workload_itself_is_not_relocated(
    dev_client: Client, task_queue: str, kubesim: KubeSim
) -> None:
    """An image that cannot be pulled fails the same on every node: no relocation."""
    namespace = f"reloc-image-{uuid4().hex[:6]}"
    kubesim.set_image_behavior(IMAGE_1, fail_pull=True)
    # Real back-offs (10 s), so the pull error outlasts the stuck-pod grace: at the test's
    # scaled ones ErrImagePull and ImagePullBackOff alternate faster than any grace.
    kubesim.set_default_timing(factor=1.0)
    only_on(kubesim, "gpu-node-1")
    async with story(dev_client, task_queue, kubesim, cluster=cluster(), namespace=namespace) as s:
        assert (await s.apply(one_engine(namespace))).accepted
        await placed_on(s, "gpu-node-1")
        kubesim.uncordon_node("gpu-node-2")
        row = await failed_with(s, "ErrImagePull", "ImagePullBackOff")
        assert row.index == 0
        await asyncio.sleep(2)
        assert not events(s, "AutoMigrationTriggered") and not events(s, "AutoMigrationCapReached")
        assert not migration_rows(s)
