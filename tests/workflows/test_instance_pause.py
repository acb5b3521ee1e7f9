"""The Instance workflow under a pause (spec reference §5, §9), against the in-memory cluster.

`set_pause` carries the component's depth: `Recover` (the annotation's `true`) or `Freeze`.
Time moves only when a test says so (`env.sleep`), so "nothing happens for an hour" takes
milliseconds and is asserted on the cluster's own record of creates and deletes.
"""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.client import WorkflowHandle

from models.instance import (
    DeleteRequest,
    InstancePauseMode,
    InstancePhase,
    InstanceStatus,
    PauseRequest,
    RestartPolicy,
    UpdateRequest,
)
from tests.workflows.instance_fake_cluster import FakeCluster
from tests.workflows.instance_harness import Harness, ready_at

pytestmark = pytest.mark.workflows

P = InstancePhase
RECREATE = RestartPolicy.RECREATE_INSTANCE_ON_POD_RESTART
LEADER, WORKER = "chat-engine-1-leader-0", "chat-engine-1-worker-0"
POD0, POD1 = "chat-engine-1-default-0", "chat-engine-1-default-1"


Handle = WorkflowHandle[Any, InstanceStatus]


async def set_pause(handle: Handle, mode: InstancePauseMode | None) -> None:
    await handle.signal("set_pause", PauseRequest(mode=mode))


async def status_of(handle: Handle) -> InstanceStatus:
    status: InstanceStatus = await handle.query("status", result_type=InstanceStatus)
    return status


async def finish(handle: Handle) -> None:
    await handle.signal("delete", DeleteRequest())
    final = await handle.result()
    assert final.deleted


async def test_freeze_stops_the_restart_of_a_killed_pod_until_resume(harness: Harness) -> None:
    handle = await harness.start(harness.spec(workers=1))
    await harness.until(handle, ready_at())
    await set_pause(handle, "Freeze")
    await harness.until(handle, lambda s: s.pause_mode == "Freeze")
    await harness.cluster.kill(WORKER)
    # An hour later: the Instance was not recreated (no repair at freeze), its leader is untouched.
    await harness.env.sleep(3600)
    status = await status_of(handle)
    assert status.phase == P.READY and status.incarnation == 1 and not status.serving
    assert harness.cluster.created.count(WORKER) == 1 and sorted(harness.cluster.pods) == [LEADER]
    assert harness.cluster.deleted == []
    await set_pause(handle, None)
    status = await harness.until(handle, ready_at(incarnation=2))
    assert status.pause_mode is None
    assert status.last_failure is not None and status.last_failure.pod_name == WORKER
    assert harness.cluster.created.count(WORKER) == 2 and sorted(harness.cluster.pods) == [LEADER, WORKER]
    await finish(handle)


async def test_recover_pause_lets_a_killed_pod_be_recreated(harness: Harness) -> None:
    handle = await harness.start(harness.spec(workers=1, pause_mode="Recover"))
    status = await harness.until(handle, ready_at())
    assert status.pause_mode == "Recover", "a new Instance learns the pause from its spec"
    await harness.cluster.kill(WORKER)
    status = await harness.until(handle, ready_at(incarnation=2))
    assert status.pause_mode == "Recover" and status.last_failure is not None
    assert harness.cluster.created.count(WORKER) == 2
    await finish(handle)


@pytest.mark.parametrize("mode", ["Recover", "Freeze"])
async def test_restart_policy_none_lost_pod_waits_pending_during_a_pause(
    harness: Harness, mode: InstancePauseMode
) -> None:
    handle = await harness.start(harness.spec())
    await harness.until(handle, ready_at())
    await set_pause(handle, mode)
    await harness.until(handle, lambda s: s.pause_mode == mode)
    await harness.cluster.kill(POD0)
    await harness.until(handle, lambda s: s.phase == P.PENDING)
    await harness.env.sleep(3600)
    status = await status_of(handle)
    assert status.phase == P.PENDING and harness.cluster.pods == {}
    assert harness.cluster.created == [POD0], "a pod deleted during a pause is not replaced"
    await set_pause(handle, None)
    await harness.until(handle, ready_at())
    assert harness.cluster.created == [POD0, POD0]
    await finish(handle)


async def paused_mid_surge(harness: Harness) -> Any:
    """A Ready Instance whose SurgeThenDrain to engine:2 is under way (the new pod held not
    ready) when a `Recover` pause arrives; its handle."""
    handle = await harness.start(harness.spec())
    await harness.until(handle, ready_at())

    def hold_new_pod(cluster: FakeCluster) -> None:
        if POD1 in cluster.pods:
            cluster.pods[POD1].containers_ready = False

    harness.cluster.on_change = hold_new_pod
    await handle.signal("update", UpdateRequest(spec=harness.spec("engine:2")))
    await harness.until(handle, lambda s: s.phase == P.UPDATING and POD1 in harness.cluster.pods)
    await set_pause(handle, "Recover")
    return handle


async def test_pause_during_surge_then_drain_keeps_both_pods_serving_until_resume(harness: Harness) -> None:
    handle = await paused_mid_surge(harness)
    # Still coming up: the pause holds the readiness clock and shows as the operation's wait.
    status = await harness.until(
        handle, lambda s: s.operation is not None and s.operation.waiting == "Paused"
    )
    assert status.operation is not None and status.operation.deadline is None
    harness.cluster.on_change = None
    harness.cluster.pods[POD1].containers_ready = True
    await harness.cluster.notify_pod(harness.cluster.pods[POD1].manifest)
    status = await harness.until(
        handle,
        lambda s: (
            s.operation is not None and s.operation.step == "SurgeDrain" and s.operation.waiting == "Paused"
        ),
    )
    assert status.phase == P.UPDATING and status.running_revision == "rev-engine-1"
    await harness.env.sleep(3600)
    pods = harness.cluster.pods
    assert sorted(pods) == [POD0, POD1] and all(pod.serving and pod.containers_ready for pod in pods.values())
    assert (POD0, False) not in harness.cluster.serving_log, "the old pod never left rotation while paused"
    await set_pause(handle, None)
    status = await harness.until(
        handle, lambda s: s.phase == P.READY and s.running_revision == "rev-engine-2"
    )
    assert status.active_ordinal == 1 and sorted(harness.cluster.pods) == [POD1]
    log = harness.cluster.serving_log
    assert log.index((POD1, True)) < log.index((POD0, False))
    await finish(handle)


async def test_an_update_that_arrives_during_a_pause_waits_for_resume(harness: Harness) -> None:
    handle = await harness.start(harness.spec(pause_mode="Recover"))
    await harness.until(handle, ready_at())
    await handle.signal("update", UpdateRequest(spec=harness.spec("engine:2")))
    await handle.signal("update", UpdateRequest(spec=harness.spec("engine:3")))
    await harness.env.sleep(3600)
    status = await status_of(handle)
    assert status.phase == P.READY and status.target_revision == "rev-engine-1"
    assert harness.cluster.created == [POD0]
    await set_pause(handle, None)
    # The newest update goes once the pause ends.
    status = await harness.until(
        handle, lambda s: s.phase == P.READY and s.running_revision == "rev-engine-3"
    )
    assert sorted(harness.cluster.pods) == [POD1]
    await finish(handle)


async def test_readiness_deadline_stops_while_paused_and_restarts_in_full(harness: Harness) -> None:
    def never_ready(cluster: FakeCluster) -> None:
        for pod in cluster.pods.values():
            pod.containers_ready = False

    harness.cluster.on_change = never_ready
    handle = await harness.start(harness.spec())
    await harness.until(handle, lambda s: s.operation is not None and s.operation.deadline is not None)
    await harness.env.sleep(25 * 60)
    await set_pause(handle, "Recover")
    status = await harness.until(
        handle, lambda s: s.operation is not None and s.operation.waiting == "Paused"
    )
    # Two hours paused, well past the 30-minute deadline: not failed.
    await harness.env.sleep(2 * 3600)
    status = await status_of(handle)
    assert status.phase == P.CREATING and status.last_failure is None
    assert status.operation is not None and status.operation.deadline is None
    await set_pause(handle, None)
    status = await harness.until(
        handle, lambda s: s.operation is not None and s.operation.deadline is not None
    )
    resumed = status.updated_at
    assert resumed is not None and status.operation is not None and status.operation.deadline is not None
    # A full window from resume, not the five minutes that were left before the pause.
    assert (status.operation.deadline - resumed).total_seconds() == pytest.approx(1800, abs=30)
    status = await harness.until(handle, lambda s: s.phase == P.FAILED, step=60)
    assert status.last_failure is not None and status.last_failure.reason == "DeadlineExceeded"
    assert (status.last_failure.time - resumed).total_seconds() >= 1800 - 30
    harness.cluster.on_change = None
    await finish(handle)


async def test_freeze_holds_the_rebuild_of_a_failed_instance(harness: Harness) -> None:
    def never_ready(cluster: FakeCluster) -> None:
        for pod in cluster.pods.values():
            pod.containers_ready = False

    harness.cluster.on_change = never_ready
    handle = await harness.start(harness.spec(instance_ready_timeout_seconds=600.0))
    # Small steps: the rebuild comes one minute after the failure, and must not start before the freeze.
    await harness.until(handle, lambda s: s.phase == P.FAILED, step=5)
    harness.cluster.on_change = None
    await set_pause(handle, "Freeze")
    await harness.until(handle, lambda s: s.pause_mode == "Freeze")
    # The rebuild back-off (1 minute) passes many times over: a frozen Instance stays Failed.
    await harness.env.sleep(3600)
    status = await status_of(handle)
    assert status.phase == P.FAILED and harness.cluster.created == [POD0]
    await set_pause(handle, None)
    await harness.until(handle, ready_at())
    assert harness.cluster.created == [POD0, POD0]
    await finish(handle)


async def test_deletion_proceeds_during_a_paused_surge(harness: Harness) -> None:
    handle = await harness.start(harness.spec())
    await harness.until(handle, ready_at())
    await set_pause(handle, "Freeze")
    await harness.until(handle, lambda s: s.pause_mode == "Freeze")
    # The update arrived before the pause ended: it waits, then goes on resume...
    await handle.signal("update", UpdateRequest(spec=harness.spec("engine:2")))

    def hold_new_pod(cluster: FakeCluster) -> None:
        if POD1 in cluster.pods:
            cluster.pods[POD1].containers_ready = False

    harness.cluster.on_change = hold_new_pod
    await set_pause(handle, None)
    await harness.until(handle, lambda s: s.phase == P.UPDATING and POD1 in harness.cluster.pods)
    # ...and a pause that comes while it surges stops it before the old pod drains.
    await set_pause(handle, "Freeze")
    await harness.until(handle, lambda s: s.operation is not None and s.operation.waiting == "Paused")
    harness.cluster.on_change = None
    harness.cluster.pods[POD1].containers_ready = True
    await harness.cluster.notify_pod(harness.cluster.pods[POD1].manifest)
    await harness.until(handle, lambda s: s.operation is not None and s.operation.step == "SurgeDrain")
    # Deletion always proceeds: both pods go, the surged one too.
    await handle.signal("delete", DeleteRequest())
    final = await handle.result()
    assert final.deleted and harness.cluster.pods == {}
    assert sorted(harness.cluster.deleted) == [POD0, POD1]


async def test_a_surge_pod_lost_during_the_pause_serves_again_before_the_old_one_drains(
    harness: Harness,
) -> None:
    handle = await paused_mid_surge(harness)
    await harness.until(handle, lambda s: s.operation is not None and s.operation.waiting == "Paused")
    harness.cluster.on_change = None
    harness.cluster.pods[POD1].containers_ready = True
    await harness.cluster.notify_pod(harness.cluster.pods[POD1].manifest)
    await harness.until(handle, lambda s: s.operation is not None and s.operation.step == "SurgeDrain")
    await harness.cluster.kill(POD1)
    serving: list[int] = []
    harness.cluster.on_change = lambda c: serving.append(sum(1 for p in c.pods.values() if p.serving))
    await set_pause(handle, None)
    status = await harness.until(
        handle, lambda s: s.phase == P.READY and s.running_revision == "rev-engine-2"
    )
    assert status.active_ordinal == 1 and sorted(harness.cluster.pods) == [POD1]
    assert harness.cluster.created.count(POD1) == 2, "the lost surge pod was created again"
    assert serving and min(serving) >= 1, "the old pod drained only after the new one served again"
    await finish(handle)


async def test_a_stuck_grace_that_ran_out_during_the_pause_fires_on_resume(harness: Harness) -> None:
    harness.cluster.bad_images.add("engine:bad")
    handle = await harness.start(harness.spec("engine:bad", update_retry=None, pause_mode="Recover"))
    await harness.until(handle, lambda s: s.operation is not None and s.operation.waiting == "Paused")
    # Ten times the 60 s stuck-pod grace: the clock ran, but nothing fails while paused.
    await harness.env.sleep(600)
    status = await status_of(handle)
    assert status.phase == P.CREATING and status.last_failure is None
    await set_pause(handle, None)
    # The test server may skip time while the signal is sent: take the moment from the workflow.
    resumed_at = (await status_of(handle)).updated_at
    status = await harness.until(handle, lambda s: s.phase == P.FAILED, step=1)
    assert status.last_failure is not None and status.last_failure.reason == "ErrImagePull"
    # It fired at once on resume, not a whole grace later.
    assert resumed_at is not None and (status.last_failure.time - resumed_at).total_seconds() < 30
    await finish(handle)
