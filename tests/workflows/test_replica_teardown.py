"""Deleting an InferenceReplica (§15) and pod batching (§14) against kubesim: the finalizer
`ome.io/ir-teardown` holds the object while a pod is left, the teardown deadline releases it
with `TeardownDeadlineExceeded`, no deadline says `TeardownBlocked` (once the
drain window has passed, then at most once a minute) until the pod goes, and
`scaleDownPodBatchSize` keeps a second Instance serving while the first still drains.

A pod is kept Terminating the way another controller would: a finalizer of its own on it.
"""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime
from typing import Any

import pytest
from temporalio.client import Client, WorkflowExecutionStatus

from kubesim.handle import KubeSim
from planning.controller.state_metrics import state_samples
from tests.fixtures.metrics_scrape import metrics_client, scrape_samples
from tests.workflows.service_harness import NAME, NAMESPACE, Story, eventually, isvc_manifest, story

pytestmark = pytest.mark.workflows

FOREIGN = "example.com/keep"
IR = f"{NAME}-engine"
ESCAPE = (
    f"kubectl patch inferencereplica {IR} -n {NAMESPACE} --type=merge "
    """-p '{"metadata":{"finalizers":null}}'"""
)
SELECTOR = f'selector: parent="{NAME}", component="engine"'


def events(s: Story, reason: str) -> list[str]:
    listed = s.core.list_namespaced_event(NAMESPACE)
    return [e.message for e in listed.items if e.reason == reason]


def live_pods(s: Story) -> list[Any]:
    return [p for p in s.pods() if p.metadata.deletion_timestamp is None]


def pin(s: Story, pod: str) -> None:
    s.core.patch_namespaced_pod(pod, NAMESPACE, {"metadata": {"finalizers": [FOREIGN]}})


def unpin(s: Story, pod: str) -> None:
    s.core.patch_namespaced_pod(pod, NAMESPACE, [{"op": "remove", "path": "/metadata/finalizers"}])


async def serving(s: Story, count: int) -> bool:
    pods = live_pods(s)
    ready = [
        p
        for p in pods
        if {c.type: c.status for c in p.status.conditions or []}.get("ome.io/serving") == "True"
    ]
    return len(pods) == count and len(ready) == count


async def completed(s: Story) -> bool:
    return (await s.handle().describe()).status == WorkflowExecutionStatus.COMPLETED


def ir_held(s: Story) -> dict[str, Any] | None:
    ir = s.object("inferencereplicas", IR)
    return ir if ir is not None and ir["metadata"].get("deletionTimestamp") else None


async def test_teardown_deadline_releases_the_finalizer_with_the_spec_event(
    dev_client: Client, task_queue: str, kubesim: KubeSim
) -> None:
    cluster = {"drain_seconds": 0.2, "teardown_deadline_seconds": 3.0}
    async with story(dev_client, task_queue, kubesim, cluster) as s:
        await s.apply(isvc_manifest(minReplicas=1, maxReplicas=1))
        await eventually(lambda: serving(s, 1), "one serving engine pod")
        ir = s.object("inferencereplicas", IR)
        assert ir is not None and ir["metadata"]["finalizers"] == ["ome.io/ir-teardown"]
        (pod,) = live_pods(s)
        pin(s, pod.metadata.name)

        await s.handle().signal("delete")
        # The object stays, Terminating, while the pinned pod is there.
        held = await eventually(lambda: ir_held(s), "the InferenceReplica held by its finalizer")
        assert "ome.io/ir-teardown" in held["metadata"]["finalizers"]
        await eventually(lambda: completed(s), "the deadline to release the finalizer", within=60)
        assert s.object("inferencereplicas", IR) is None
        assert events(s, "TeardownDeadlineExceeded") == [
            f"teardown deadline 3s exceeded (1 owned pod(s) observed; {SELECTOR}); releasing finalizer "
            f"ome.io/ir-teardown to background GC; manual escape: {ESCAPE}"
        ]
        assert events(s, "TeardownBlocked") == []
        # The pod is the garbage collector's now; its finalizer is never stripped by us.
        (left,) = s.pods()
        assert left.metadata.finalizers == [FOREIGN]
        unpin(s, pod.metadata.name)


async def test_without_a_deadline_teardown_blocked_holds_until_the_pod_is_gone(
    dev_client: Client, task_queue: str, kubesim: KubeSim
) -> None:
    cluster = {
        "drain_seconds": 0.2,
        "teardown_deadline_seconds": None,
        "scale_down_requeue_interval_seconds": 1.0,
        # The Instance's drain window: past it, its pinned pod makes the teardown blocked.
        "instance_ready_timeout_seconds": 6.0,
    }
    async with story(dev_client, task_queue, kubesim, cluster) as s:
        await s.apply(isvc_manifest(minReplicas=1, maxReplicas=1))
        await eventually(lambda: serving(s, 1), "one serving engine pod")
        (pod,) = live_pods(s)
        pin(s, pod.metadata.name)

        await s.handle().signal("delete")
        blocked = (
            f"teardown blocked: 1 owned pod(s) and 0 owned PodGroup(s) remain ({SELECTOR}); finalizer "
            "ome.io/ir-teardown holds until cleanup completes (no lifecycle.teardown.deadline configured); "
            f"manual escape: {ESCAPE}"
        )
        # Not at once: the Instance drains gracefully until its drain window has passed.
        await asyncio.sleep(3)
        assert events(s, "TeardownBlocked") == []
        await eventually(lambda: blocked in events(s, "TeardownBlocked"), "a TeardownBlocked event")
        # Repeated no more often than once a minute, not every re-check interval (1 s here).
        await asyncio.sleep(4)
        assert _count(s, "TeardownBlocked") == 1
        assert ir_held(s) is not None, "the finalizer holds while the pod is there"
        assert not await completed(s)

        unpin(s, pod.metadata.name)
        await eventually(lambda: completed(s), "the teardown to finish once the pod is gone", within=60)
        assert s.object("inferencereplicas", IR) is None
        assert s.pods() == []
        assert events(s, "TeardownDeadlineExceeded") == []


def _count(s: Story, reason: str) -> int:
    listed = s.core.list_namespaced_event(NAMESPACE)
    return sum(e.count or 1 for e in listed.items if e.reason == reason)


async def test_scale_down_batch_keeps_the_next_instance_until_the_draining_one_is_gone(
    dev_client: Client, task_queue: str, kubesim: KubeSim
) -> None:
    # One pod at a time: the second removal waits for the first Instance's pod to go.
    cluster = {
        "drain_seconds": 0.2,
        "scale_down_pod_batch_size": 1,
        "scale_down_requeue_interval_seconds": 0.5,
        # Also the drain deadline of a deletion: Instance 2's drain becomes overdue while pinned.
        "instance_ready_timeout_seconds": 6.0,
    }
    client, address = await metrics_client(dev_client)

    async def metric(name: str) -> float | None:
        mine = {"namespace": NAMESPACE, "isvc": NAME, "component": "engine"}
        found = [m.value for m in await scrape_samples(address) if m.name == name and m.has(**mine)]
        return found[0] if found else None

    async with story(client, task_queue, kubesim, cluster) as s:
        await s.apply(isvc_manifest(minReplicas=3, maxReplicas=3, topologySpread="Preferred"))
        await eventually(lambda: serving(s, 3), "three serving engine pods", within=90)
        by_index = {int(p.metadata.labels["ome.io/instance-index"]): p.metadata.name for p in live_pods(s)}
        pin(s, by_index[2])  # removed first: the end of the keep order

        await s.apply(isvc_manifest(minReplicas=1, maxReplicas=1, topologySpread="Preferred"))
        await eventually(lambda: _terminating(s) == [by_index[2]], "Instance 2's pod Terminating")
        # Several requeue intervals: Instance 1 is not admitted while Instance 2 still costs its pod.
        await asyncio.sleep(3)
        assert _terminating(s) == [by_index[2]]
        assert sorted(p.metadata.name for p in live_pods(s)) == [by_index[0], by_index[1]]
        # §14's wave metrics: one pod in flight (the controller's, from Instance 2's Deleting row),
        # one Instance deferred to the next wave (the worker's).
        await eventually(lambda: state_metric(s, "ome_omenative_scale_down_active_pods") == 1,
                         "one pod being removed, from the InferenceReplica status")  # fmt: skip
        assert await metric("ome_omenative_scale_down_active_pods") is None, "the controller's, not a worker's"
        assert await metric("ome_omenative_scale_down_deferred_instances") == 1

        # Past delete start + instanceReadyTimeout: overdue, said once, and the Instance stays Deleting.
        (overdue,) = await eventually(lambda: events(s, "DrainOverdue"), "a DrainOverdue event")
        assert re.fullmatch(
            rf"OMENative component=engine instance=2: drain overdue by \d+s \(deadline "
            rf"\d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\dZ\); 1 pod\(s\) still Terminating \({by_index[2]}\)",
            overdue,
        ), overdue
        condition = await eventually(lambda: _condition(s, "DrainOverdue", "True"), "DrainOverdue=True on the IR")
        assert condition["reason"] == "DrainsOverdue"
        assert state_metric(s, "ome_instance_drains_overdue") == 1, "the OmeDrainOverdue alert's input"
        rows = {row.index: row.phase for row in (await s.replica_status()).instance_statuses}
        assert rows.get(2) != "Failed"

        unpin(s, by_index[2])
        await eventually(lambda: [p.metadata.name for p in s.pods()] == [by_index[0]], "Instance 1 removed next")
        condition = await eventually(lambda: _condition(s, "DrainOverdue", "False"), "DrainOverdue=False again")
        assert condition["reason"] == "DrainsWithinDeadline"
        assert state_metric(s, "ome_instance_drains_overdue") == 0
        assert await metric("ome_omenative_scale_down_deferred_instances") == 0
        assert await metric("ome_omenative_scale_down_batch_pods_count") == 2, "two waves of one pod each"
        await eventually(lambda: state_metric(s, "ome_omenative_scale_down_active_pods") == 0, "no pod being removed")


def state_metric(s: Story, name: str) -> float | None:
    """A state gauge as the controller renders it from the InferenceReplica (its `/metrics`)."""
    found = [m.value for m in state_samples([s.object("inferencereplicas", IR) or {}], datetime.now(UTC)) if m.name == name]
    return found[0] if found else None


def _condition(s: Story, kind: str, status: str) -> dict[str, Any] | None:
    ir = s.object("inferencereplicas", IR) or {}
    for condition in (ir.get("status") or {}).get("conditions") or []:
        if condition["type"] == kind and condition["status"] == status:
            return dict(condition)
    return None


def _terminating(s: Story) -> list[str]:
    return sorted(p.metadata.name for p in s.pods() if p.metadata.deletion_timestamp is not None)


async def test_a_scale_down_with_a_new_ready_timeout_gives_one_drain_deadline(
    dev_client: Client, task_queue: str, kubesim: KubeSim
) -> None:
    """A scale-down applied together with a shorter `instanceReadyTimeout`: the Instance told to
    go says in its `DrainOverdue` the deadline its row shows. It takes it from the
    InferenceReplica's request (`DeleteRequest.drain_deadline`); here the pass sends the
    lifecycle change first, which the Instance's own reckoning would have agreed with too:
    tests/workflows/test_instance_kubesim.py covers a request whose deadline differs from it."""
    cluster = {"drain_seconds": 0.2, "instance_ready_timeout_seconds": 3600.0}
    async with story(dev_client, task_queue, kubesim, cluster) as s:
        await s.apply(isvc_manifest(minReplicas=2, maxReplicas=2, topologySpread="Preferred"))
        await eventually(lambda: serving(s, 2), "two serving engine pods", within=90)
        by_index = {int(p.metadata.labels["ome.io/instance-index"]): p.metadata.name for p in live_pods(s)}
        pin(s, by_index[1])  # removed first: the end of the keep order
        shorter = {"instanceReadyTimeout": "4s"}
        await s.apply(isvc_manifest(minReplicas=1, maxReplicas=1, topologySpread="Preferred", lifecycle=shorter))
        (overdue,) = await eventually(lambda: events(s, "DrainOverdue"), "a DrainOverdue event", within=40)
        rows = {row.index: row for row in (await s.replica_status()).instance_statuses}
        operation = rows[1].operation
        assert operation is not None and operation.type == "Delete" and operation.deadline is not None
        assert f"(deadline {operation.deadline:%Y-%m-%dT%H:%M:%SZ})" in overdue, (overdue, operation)
        unpin(s, by_index[1])
        await eventually(lambda: [p.metadata.name for p in s.pods()] == [by_index[0]], "Instance 1 removed")
