"""Failure paths of the Instance workflow against the in-memory cluster (spec reference §9).

- "After failure: Create → clear op, retry after backoff (already ran target → stays Failed
  until pods ready)": an Instance rebuilt on a revision it already ran keeps the pods of
  the failed attempt and returns to Ready when they come up, with no back-off rebuild.
- A container restart during the last step of a single-pod SurgeThenDrain update (the old
  pod draining) under RecreateInstanceOnPodRestart is a restart like any other: the
  Instance recreates its pod with a new incarnation once the update is done.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from temporalio.client import WorkflowHandle

from models.instance import (
    DeleteRequest,
    InstancePhase,
    InstanceStatus,
    RestartPolicy,
    UpdateRequest,
)
from tests.workflows.instance_fake_cluster import FakeCluster, FakePod
from tests.workflows.instance_harness import Harness, ready_at

pytestmark = pytest.mark.workflows

P = InstancePhase
Handle = WorkflowHandle[Any, InstanceStatus]
POD = "chat-engine-1-default-0"


async def within(
    harness: Harness, handle: Handle, test: Callable[[InstanceStatus], bool], tries: int = 120
) -> InstanceStatus:
    """`Harness.until` with a bound of `tries` seconds of workflow time, so a miss fails fast."""
    status: InstanceStatus = await handle.query("status", result_type=InstanceStatus)
    for _ in range(tries):
        if test(status):
            return status
        await harness.env.sleep(1)
        status = await handle.query("status", result_type=InstanceStatus)
    raise AssertionError(f"condition never held; last status: {status}")


def stuck_after(first_uid: str, reason: str) -> Callable[[FakeCluster], None]:
    """Every pod created after the one with `first_uid` hangs in the waiting `reason`."""

    def hook(cluster: FakeCluster) -> None:
        for pod in cluster.pods.values():
            if pod.uid != first_uid and pod.waiting is None:
                pod.containers_ready, pod.waiting = False, reason

    return hook


async def recover(harness: Harness, pod: FakePod) -> None:
    """The pod's trouble passes on its own (the kubelet's restarts succeed, the image is back)."""
    harness.cluster.on_change = None
    pod.containers_ready, pod.waiting, pod.phase = True, None, "Running"
    await harness.cluster.notify_pod(pod.manifest)


@pytest.mark.parametrize("reason", ["CrashLoopBackOff", "ErrImagePull"])
async def test_failed_rebuild_of_a_revision_it_ran_stays_failed_until_its_pods_are_ready(
    harness: Harness, reason: str
) -> None:
    handle = await harness.start(harness.spec())
    await harness.until(handle, ready_at())
    first = harness.cluster.pods[POD].uid
    harness.cluster.on_change = stuck_after(first, reason)
    # Restart policy None: a lost single pod makes the Instance Pending, then it is rebuilt.
    await harness.cluster.kill(POD)
    failed = await harness.until(handle, lambda s: s.phase == P.FAILED, step=10)
    assert failed.last_failure is not None and failed.last_failure.reason == reason
    assert failed.running_revision == "rev-engine-1" == failed.target_revision
    # The revision ran here: the failure holds nothing, and the pod is kept, not rebuilt.
    assert not failed.last_failure.counting and failed.retry_block is None
    kept = harness.cluster.pods[POD]
    assert kept.uid != first and harness.cluster.created == [POD, POD]
    await harness.env.sleep(3 * 3600)
    status = await handle.query("status", result_type=InstanceStatus)
    assert status.phase == P.FAILED and status.retry_block is None
    assert harness.cluster.created == [POD, POD], "a failed Create of a revision it ran was rebuilt"
    assert harness.cluster.pods[POD].uid == kept.uid
    # Its pod comes up: back to Ready on the same pod, without a rebuild.
    await recover(harness, kept)
    status = await harness.until(handle, ready_at(), step=1)
    assert harness.cluster.created == [POD, POD] and harness.cluster.pods[POD].uid == kept.uid
    assert status.last_failure is not None and status.last_failure.reason == reason
    await handle.signal("delete", DeleteRequest())
    await handle.result()


async def test_failed_first_create_is_still_rebuilt_after_back_off(harness: Harness) -> None:
    harness.cluster.on_change = stuck_after("none", "CrashLoopBackOff")
    handle = await harness.start(harness.spec())
    failed = await harness.until(handle, lambda s: s.phase == P.FAILED, step=10)
    assert failed.running_revision is None
    assert harness.cluster.pods == {}, "a first attempt's pods are removed before the rebuild"
    await harness.until(handle, lambda s: len(harness.cluster.created) == 2, step=10)
    await recover(harness, harness.cluster.pods[POD])
    await harness.until(handle, ready_at(), step=5)
    await handle.signal("delete", DeleteRequest())
    await handle.result()


@pytest.mark.parametrize("moment", ["old pod leaves rotation", "old pod deleted"])
async def test_restart_during_surge_drain_recreates_the_instance(harness: Harness, moment: str) -> None:
    spec = harness.spec(restart_policy=RestartPolicy.RECREATE_INSTANCE_ON_POD_RESTART)
    handle = await harness.start(spec)
    await harness.until(handle, ready_at())
    crashed: list[str] = []

    def crash_new_pod(cluster: FakeCluster) -> None:
        old, new = cluster.pods.get(POD), cluster.pods.get("chat-engine-1-default-1")
        if crashed or new is None or not new.serving:
            return
        now = old is not None and old.serving is False if moment == "old pod leaves rotation" else old is None
        if now:
            # The kubelet restarted the new pod's container while the old one drains.
            new.restart_count += 1
            crashed.append(new.uid)

    harness.cluster.on_change = crash_new_pod
    target = harness.spec("engine:2", restart_policy=RestartPolicy.RECREATE_INSTANCE_ON_POD_RESTART)
    await handle.signal("update", UpdateRequest(spec=target))
    status = await within(harness, handle, ready_at(incarnation=2))
    assert crashed, "the scenario never crashed the new pod"
    assert status.running_revision == "rev-engine-2" and status.active_ordinal == 1
    assert status.last_failure is not None and status.last_failure.pod_name == "chat-engine-1-default-1"
    pod = harness.cluster.pods["chat-engine-1-default-1"]
    assert pod.uid != crashed[0] and pod.labels["ome.io/incarnation"] == "2"
    await handle.signal("delete", DeleteRequest())
    await handle.result()
