"""The Instance workflow against an in-memory cluster: every lifecycle path, fast.

Time moves only when the test says so (`env.sleep`), so deadlines and back-offs of minutes
take milliseconds; the in-memory cluster reacts instantly and signals like the watcher.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from models.instance import (
    DeleteRequest,
    InstancePhase,
    InstanceStatus,
    ReleaseHeldRequest,
    RestartRequest,
    RetryBlockState,
    UpdateRequest,
    UpdateStrategyType,
)
from tests.fixtures.temporal import register_search_attributes
from tests.workflows.instance_fake_cluster import FakeCluster
from tests.workflows.instance_harness import Harness, make_spec, ready_at
from tests.workflows.instance_parent import FakeParent
from workers.worker import build_worker
from workflows.replica.children import first_input

pytestmark = pytest.mark.workflows

P = InstancePhase


async def test_creates_leader_and_three_workers(harness: Harness) -> None:
    handle = await harness.start(harness.spec(workers=3))
    status = await harness.until(handle, ready_at())
    assert status.serving_pods == 4 and status.available_pods == 4 and status.total_pods == 4
    assert status.running_revision == "rev-engine-1" and status.ready_since is not None
    assert sorted(harness.cluster.pods) == [
        "chat-engine-1-leader-0",
        "chat-engine-1-worker-0",
        "chat-engine-1-worker-1",
        "chat-engine-1-worker-2",
    ]
    assert "PodGroup/chat-engine-1" in harness.cluster.objects
    assert "Service/chat-engine-1" in harness.cluster.objects
    assert not status.gang_scheduling_unavailable
    await handle.signal("delete", DeleteRequest())
    final = await handle.result()
    assert final.deleted and harness.cluster.pods == {}
    assert "PodGroup/chat-engine-1" not in harness.cluster.objects


async def test_missing_pod_group_crd_reports_gang_scheduling_unavailable(harness: Harness) -> None:
    harness.cluster.crd = False
    handle = await harness.start(harness.spec(workers=1))
    status = await harness.until(handle, ready_at())
    assert status.gang_scheduling_unavailable
    assert not any(key.startswith("PodGroup/") for key in harness.cluster.objects)
    leader = harness.cluster.pods["chat-engine-1-leader-0"]
    assert "scheduling.x-k8s.io/pod-group" not in leader.labels
    await handle.signal("delete", DeleteRequest())
    await handle.result()


async def test_killed_worker_recreates_the_whole_instance(harness: Harness) -> None:
    handle = await harness.start(harness.spec(workers=3))
    await harness.until(handle, ready_at())
    before = {name: pod.uid for name, pod in harness.cluster.pods.items()}
    await harness.cluster.kill("chat-engine-1-worker-1")
    status = await harness.until(handle, ready_at(incarnation=2))
    after = {name: pod.uid for name, pod in harness.cluster.pods.items()}
    assert sorted(after) == sorted(before)
    assert all(after[name] != before[name] for name in before)
    assert {pod.labels["ome.io/incarnation"] for pod in harness.cluster.pods.values()} == {"2"}
    assert status.last_failure is not None and status.last_failure.reason == "PodDeleted"
    assert status.last_failure.pod_name == "chat-engine-1-worker-1"
    await handle.signal("delete", DeleteRequest())
    await handle.result()


async def test_single_pod_container_restart_is_left_to_the_kubelet(harness: Harness) -> None:
    handle = await harness.start(harness.spec())
    await harness.until(handle, ready_at())
    await harness.cluster.crash("chat-engine-1-default-0")
    await harness.env.sleep(30)
    status = await handle.query("status", result_type=InstanceStatus)
    assert status.phase == P.READY and status.incarnation == 1
    assert harness.cluster.created == ["chat-engine-1-default-0"]
    await handle.signal("delete", DeleteRequest())
    await handle.result()


async def test_restart_request_gives_a_new_incarnation(harness: Harness) -> None:
    handle = await harness.start(harness.spec(workers=1))
    await harness.until(handle, ready_at())
    await handle.signal("restart", RestartRequest())
    await harness.until(handle, ready_at(incarnation=2))
    await handle.signal("delete", DeleteRequest())
    await handle.result()


async def test_image_pull_failure_retried_then_held_and_released(harness: Harness) -> None:
    harness.cluster.bad_images.add("engine:bad")
    handle = await harness.start(harness.spec("engine:bad"))
    status = await harness.until(
        handle, lambda s: s.retry_block is not None and s.retry_block.state == RetryBlockState.HELD, step=10
    )
    assert status.phase == P.FAILED
    assert status.retry_block is not None and status.retry_block.attempts_started == 3
    assert status.last_failure is not None and status.last_failure.reason == "ErrImagePull"
    assert status.last_failure.container_name == "engine"
    assert harness.cluster.created.count("chat-engine-1-default-0") == 3
    assert harness.cluster.reasons().count("RetryHeld") == 1
    # Each attempt fails after the 60 s stuck grace; the 2nd starts 1 min after the 1st failure
    # and the 3rd 2 min after the 2nd: 60 + 60 + 120 + 60 seconds from first to last failure.
    span = status.retry_block.last_failure_at - status.retry_block.first_failure_at
    assert timedelta(minutes=5) <= span <= timedelta(minutes=5, seconds=20)
    # Held: nothing more happens however long we wait.
    await harness.env.sleep(3600)
    assert harness.cluster.created.count("chat-engine-1-default-0") == 3
    harness.cluster.bad_images.clear()
    await handle.signal("release_held", ReleaseHeldRequest(revision="rev-engi"))
    await handle.signal("release_held", ReleaseHeldRequest(revision="rev-engine-bad"))
    status = await harness.until(handle, ready_at())
    assert status.retry_block is None
    assert "RetryBlockReleaseSkipped" in harness.cluster.reasons()
    assert "RetryBlockReleased" in harness.cluster.reasons()
    await handle.signal("delete", DeleteRequest())
    await handle.result()


async def test_new_revision_replaces_a_held_one(harness: Harness) -> None:
    harness.cluster.bad_images.add("engine:bad")
    handle = await harness.start(harness.spec("engine:bad", update_retry=None))
    await harness.until(
        handle, lambda s: s.retry_block is not None and s.retry_block.state == RetryBlockState.HELD
    )
    assert harness.cluster.created.count("chat-engine-1-default-0") == 1
    await handle.signal("update", UpdateRequest(spec=harness.spec("engine:2")))
    status = await harness.until(handle, ready_at())
    assert status.running_revision == "rev-engine-2"
    await handle.signal("delete", DeleteRequest())
    await handle.result()


async def test_readiness_deadline_fails_after_thirty_minutes(harness: Harness) -> None:
    def never_ready(cluster: FakeCluster) -> None:
        for pod in cluster.pods.values():
            pod.containers_ready = False

    harness.cluster.on_change = never_ready
    handle = await harness.start(harness.spec(workers=1))
    # The Create begins after the first task's local activities (the Service); a query answered
    # while they run (a loaded machine) sees no operation yet, so wait for it to begin.
    first = await harness.until(handle, lambda s: s.operation is not None, step=1)
    assert first.operation is not None
    started = first.operation.started_at
    status = await harness.until(handle, lambda s: s.phase == P.FAILED, step=60)
    assert status.last_failure is not None and status.last_failure.reason == "DeadlineExceeded"
    assert status.retry_block is None, "a readiness timeout never counts toward holding the revision"
    waited = status.last_failure.time - started
    # The clock starts with the bring-up, in the Create's first task, at or after the operation's
    # start. (Not the first query's `updated_at`: that query answers from the next task, whose
    # time is later by the first task's wall time, ~40 ms of local activities.)
    assert timedelta(minutes=30) <= waited <= timedelta(minutes=31)
    assert "InstanceFailed" in harness.cluster.reasons()
    # It is rebuilt after the back-off, and this time the pods come up.
    harness.cluster.on_change = None
    await harness.until(handle, ready_at(), step=30)
    await handle.signal("delete", DeleteRequest())
    await handle.result()


async def test_surge_then_drain_never_serves_nothing(harness: Harness) -> None:
    handle = await harness.start(harness.spec())
    await harness.until(handle, ready_at())
    serving_counts: list[int] = []

    def record(cluster: FakeCluster) -> None:
        serving_counts.append(sum(1 for pod in cluster.pods.values() if pod.serving and pod.containers_ready))

    harness.cluster.on_change = record
    await handle.signal("update", UpdateRequest(spec=harness.spec("engine:2")))
    status = await harness.until(
        handle, lambda s: s.phase == P.READY and s.running_revision == "rev-engine-2"
    )
    assert status.active_ordinal == 1 and status.incarnation == 1
    assert sorted(harness.cluster.pods) == ["chat-engine-1-default-1"]
    assert serving_counts and min(serving_counts) >= 1
    log = harness.cluster.serving_log
    assert log.index(("chat-engine-1-default-1", True)) < log.index(("chat-engine-1-default-0", False))
    # The next update alternates back to ordinal 0.
    await handle.signal("update", UpdateRequest(spec=harness.spec("engine:3")))
    status = await harness.until(
        handle, lambda s: s.running_revision == "rev-engine-3" and s.phase == P.READY
    )
    assert status.active_ordinal == 0 and sorted(harness.cluster.pods) == ["chat-engine-1-default-0"]
    await handle.signal("delete", DeleteRequest())
    await handle.result()


async def test_failed_surge_keeps_the_old_pod_serving(harness: Harness) -> None:
    harness.cluster.bad_images.add("engine:bad")
    handle = await harness.start(harness.spec())
    await harness.until(handle, ready_at())
    await handle.signal("update", UpdateRequest(spec=harness.spec("engine:bad", update_retry=None)))
    status = await harness.until(
        handle, lambda s: s.retry_block is not None and s.retry_block.state == RetryBlockState.HELD
    )
    assert status.phase == P.READY and status.running_revision == "rev-engine-1" and status.serving
    assert sorted(harness.cluster.pods) == ["chat-engine-1-default-0"]
    await handle.signal("delete", DeleteRequest())
    await handle.result()


async def test_recreate_pod_drains_before_delete(harness: Harness) -> None:
    handle = await harness.start(harness.spec(workers=1))
    await harness.until(handle, ready_at())
    target = harness.spec("engine:2", workers=1, update_strategy_type=UpdateStrategyType.RECREATE_POD)
    await handle.signal("update", UpdateRequest(spec=target))
    status = await harness.until(
        handle, lambda s: s.phase == P.READY and s.running_revision == "rev-engine-2"
    )
    assert status.incarnation == 2
    log = harness.cluster.serving_log
    assert ("chat-engine-1-leader-0", False) in log
    await handle.signal("delete", DeleteRequest())
    await handle.result()


async def test_in_place_only_patches_images_or_refuses(harness: Harness) -> None:
    handle = await harness.start(harness.spec(update_strategy_type=UpdateStrategyType.IN_PLACE_ONLY))
    await harness.until(handle, ready_at())
    uid = harness.cluster.pods["chat-engine-1-default-0"].uid
    await handle.signal(
        "update",
        UpdateRequest(spec=harness.spec("engine:2", update_strategy_type=UpdateStrategyType.IN_PLACE_ONLY)),
    )
    status = await harness.until(
        handle, lambda s: s.running_revision == "rev-engine-2" and s.phase == P.READY
    )
    assert harness.cluster.pods["chat-engine-1-default-0"].uid == uid and status.incarnation == 1
    refused = harness.spec(
        "engine:3", update_strategy_type=UpdateStrategyType.IN_PLACE_ONLY, labels={"new": "label"}
    )
    await handle.signal("update", UpdateRequest(spec=refused))
    await harness.env.sleep(30)
    status = await handle.query("status", result_type=InstanceStatus)
    assert status.running_revision == "rev-engine-2" and status.target_revision == "rev-engine-3"
    assert "InPlaceUpdateNotPossible" in harness.cluster.reasons()
    await handle.signal("delete", DeleteRequest())
    await handle.result()


async def test_delete_drains_before_deleting(harness: Harness) -> None:
    handle = await harness.start(harness.spec(workers=1))
    await harness.until(handle, ready_at())
    events: list[str] = []
    harness.cluster.on_change = lambda c: events.append(
        ",".join(sorted(n for n, p in c.pods.items() if p.serving))
    )
    await handle.signal("delete", DeleteRequest(drain_seconds=30))
    final = await handle.result()
    assert final.deleted and final.phase == P.DELETING
    # The pods were taken out of rotation (none serving) while they still existed.
    assert "" in events and harness.cluster.deleted[-2:] == [
        "chat-engine-1-leader-0",
        "chat-engine-1-worker-0",
    ]


async def test_overdue_drain_rereads_before_reporting_pods_a_lost_signal_hid(harness: Harness) -> None:
    """The pods' 'gone' signal is lost; when the deletion falls due the Instance lists afresh
    and finds them gone instead of reporting a false `DrainOverdue` (the re-list is hours off)."""
    spec = harness.spec(workers=1, instance_ready_timeout_seconds=60, safety_recheck_seconds=3600)
    handle = await harness.start(spec)
    await harness.until(handle, ready_at())
    harness.cluster.lose_gone_signals = True
    await handle.signal("delete", DeleteRequest(drain_seconds=0))
    await harness.env.sleep(120)
    final = await handle.result()
    assert final.deleted and not harness.cluster.pods
    assert "DrainOverdue" not in harness.cluster.reasons()


async def test_invalid_pod_spec_counts(harness: Harness) -> None:
    handle = await harness.start(harness.spec("invalid", update_retry=None))
    status = await harness.until(handle, lambda s: s.retry_block is not None)
    assert status.retry_block is not None and status.retry_block.state == RetryBlockState.HELD
    assert status.last_failure is not None and status.last_failure.reason == "InvalidPodSpec"
    await handle.signal("delete", DeleteRequest())
    await handle.result()


async def test_gang_surge_failure_is_abandoned(harness: Harness) -> None:
    harness.cluster.bad_images.add("engine:bad")
    handle = await harness.start(harness.spec("engine:bad", workers=1, gang_surge_of=0, update_retry=None))
    final = await handle.result()
    assert final.abandoned and final.deleted
    assert "GangSurgeAbandoned" in harness.cluster.reasons()
    assert harness.cluster.pods == {}


@pytest.mark.parametrize("launched_by_parent", [False, True], ids=["reports-creating", "launched-by-parent"])
async def test_parent_receives_reports(
    workflow_env: WorkflowEnvironment, task_queue: str, launched_by_parent: bool
) -> None:
    """The parent hears each phase; an Instance its parent recorded as launched (single-pod, from
    `workflows.replica.children.first_input`) leaves out the first report, `Creating`, which
    would tell the parent only what its launch record says."""
    await register_search_attributes(workflow_env)
    cluster = FakeCluster(client=workflow_env.client)
    client: Client = workflow_env.client
    async with build_worker(
        client, task_queue, None, activities=cluster.activities(), extra_workflows=[FakeParent]
    ):
        parent = await client.start_workflow(
            "FakeParent", id=f"irep/prod/chat-engine-{task_queue}", task_queue=task_queue
        )
        harness = Harness(workflow_env, cluster, task_queue)
        spec = harness.spec(parent_workflow_id=parent.id)
        first = first_input(spec) if launched_by_parent else None
        assert first is None or first.launched_by_parent
        handle = await harness.start(spec, first)
        await harness.until(handle, ready_at())
        await handle.signal("delete", DeleteRequest())
        await parent.result()
        phases = await parent.query("phases", result_type=list[str])
        assert phases[0] == ("Ready" if launched_by_parent else "Creating")
        assert "Ready" in phases and phases[-1] == "Deleting"
        assert "Creating" not in phases or not launched_by_parent


def test_a_gang_is_not_launched_by_parent() -> None:
    """A leader-and-workers Instance reports `Creating` as before: its parent's launch record
    counts one pod, its report how many it holds (`planning.replica.overlay.replica_facts`)."""
    assert first_input(make_spec()).launched_by_parent
    assert not first_input(make_spec(workers=1)).launched_by_parent
