"""The Instance workflow with the real Kubernetes activities against kubesim, and the watcher.

The scenarios the issue names: create a leader and three workers; a readiness deadline after
30 simulated minutes; an image that cannot be pulled, retried then held; a node failure; a
killed worker; a SurgeThenDrain update that never serves nothing; drain before delete.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import kubernetes
import pytest
import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from kubesim.handle import KubeSim
from kubesim.timing import Timing
from models.instance import DeleteRequest, ForceDeletePolicy, InstancePhase, RetryBlockState, UpdateRequest
from tests.fixtures.kubesim import TEST_TOPOLOGY
from tests.workflows.instance_kube_harness import KubeHarness, kube_harness

pytestmark = [pytest.mark.workflows, pytest.mark.kubesim]
P = InstancePhase


@pytest_asyncio.fixture(loop_scope="session")
async def harness(
    workflow_env: WorkflowEnvironment, kubesim: KubeSim, task_queue: str
) -> AsyncIterator[KubeHarness]:
    async with kube_harness(workflow_env, kubesim, task_queue) as built:
        yield built


@pytest.fixture
def gang_sim() -> AsyncIterator[KubeSim]:
    """kubesim with the optional scheduler-plugins PodGroup CRD installed."""
    sim = KubeSim(topology=TEST_TOPOLOGY, crds="all", timing=Timing.fast()).start()
    try:
        yield sim  # type: ignore[misc]
    finally:
        sim.stop()


async def delete_and_finish(harness: KubeHarness, handle: object) -> None:
    await handle.signal("delete", DeleteRequest())  # type: ignore[attr-defined]
    final = await harness.until_real(handle, lambda s: s.deleted, within=60)  # type: ignore[arg-type]
    assert final.deleted
    assert harness.live_pods() == {}


async def test_creates_leader_and_three_workers_with_pod_group(
    workflow_env: WorkflowEnvironment, gang_sim: KubeSim, task_queue: str
) -> None:
    async with kube_harness(workflow_env, gang_sim, task_queue) as harness:
        handle = await harness.start(harness.spec(workers=3))
        status = await harness.until_real(handle, lambda s: s.phase == P.READY and s.available)
        assert (status.serving_pods, status.available_pods, status.total_pods) == (4, 4, 4)
        assert not status.gang_scheduling_unavailable
        pods = harness.live_pods()
        assert sorted(pods) == [
            "chat-engine-1-leader-0",
            "chat-engine-1-worker-0",
            "chat-engine-1-worker-1",
            "chat-engine-1-worker-2",
        ]
        worker = pods["chat-engine-1-worker-2"]
        env = {e["name"]: e["value"] for e in worker["spec"]["containers"][0]["env"]}
        assert env["OME_ROLE"] == "worker" and env["OME_INSTANCE_INDEX"] == "1"
        assert env["OME_LEADER_ADDRESS"] == f"chat-engine-1-leader-0.chat-engine-1.{harness.namespace}.svc"
        assert worker["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "chat-engine-1"
        groups = gang_sim.objects("scheduling.x-k8s.io", "podgroups", harness.namespace)
        assert [g["spec"]["minMember"] for g in groups] == [4]
        assert sorted(harness.serving_pods()) == sorted(pods)
        await delete_and_finish(harness, handle)
        assert gang_sim.objects("scheduling.x-k8s.io", "podgroups", harness.namespace) == []


async def test_without_pod_group_crd_gang_scheduling_is_unavailable(harness: KubeHarness) -> None:
    handle = await harness.start(harness.spec(workers=1))
    status = await harness.until_real(handle, lambda s: s.phase == P.READY)
    assert status.gang_scheduling_unavailable
    await delete_and_finish(harness, handle)


async def test_readiness_deadline_after_thirty_simulated_minutes(harness: KubeHarness) -> None:
    harness.sim.set_image_behavior("engine:slow", ready_seconds=100_000)
    handle = await harness.start(harness.spec("engine:slow", workers=1))
    await harness.until_real(handle, lambda s: s.total_pods == 2)
    status = await harness.until_skipping(handle, lambda s: s.phase == P.FAILED, step=120)
    assert status.last_failure is not None and status.last_failure.reason == "DeadlineExceeded"
    assert status.retry_block is None
    assert "InstanceFailed" in harness.events()
    await delete_and_finish(harness, handle)


async def test_image_pull_failure_retried_then_held(harness: KubeHarness) -> None:
    harness.sim.set_image_behavior("engine:missing", fail_pull=True)
    handle = await harness.start(harness.spec("engine:missing"))
    status = await harness.until_skipping(
        handle,
        lambda s: s.retry_block is not None and s.retry_block.state == RetryBlockState.HELD,
        step=15,
        within=120,
    )
    assert status.phase == P.FAILED
    assert status.retry_block is not None and status.retry_block.attempts_started == 3
    assert status.last_failure is not None and status.last_failure.counting
    assert status.last_failure.reason in ("ErrImagePull", "ImagePullBackOff")
    assert "RetryHeld" in harness.events()
    # Held: the pods of the failed attempt are gone and no new attempt starts.
    await harness.env.sleep(3600)
    await asyncio.sleep(0.5)
    assert harness.live_pods() == {}
    await delete_and_finish(harness, handle)


async def test_killed_worker_recreates_all_four_pods(harness: KubeHarness) -> None:
    handle = await harness.start(harness.spec(workers=3))
    await harness.until_real(handle, lambda s: s.phase == P.READY and s.serving)
    before = {n: p["metadata"]["uid"] for n, p in harness.live_pods().items()}
    harness.sim.kill_pod(harness.namespace, "chat-engine-1-worker-1")
    status = await harness.until_real(
        handle, lambda s: s.incarnation == 2 and s.phase == P.READY and s.serving
    )
    after = {n: p["metadata"]["uid"] for n, p in harness.live_pods().items()}
    assert sorted(after) == sorted(before) and all(after[n] != before[n] for n in before)
    assert {p["metadata"]["labels"]["ome.io/incarnation"] for p in harness.live_pods().values()} == {"2"}
    assert status.last_failure is not None and status.last_failure.pod_name == "chat-engine-1-worker-1"
    await delete_and_finish(harness, handle)


async def test_node_failure_rebuilds_on_stable_names(harness: KubeHarness) -> None:
    policy = ForceDeletePolicy(overdue_slack_seconds=0, node_unreachable_threshold_seconds=0)
    handle = await harness.start(harness.spec(workers=1, force_delete=policy))
    await harness.until_real(handle, lambda s: s.phase == P.READY and s.serving)
    node = harness.live_pods()["chat-engine-1-worker-0"]["spec"]["nodeName"]
    harness.sim.fail_node(node)
    status = await harness.until_skipping(
        handle, lambda s: s.incarnation == 2 and s.phase == P.READY and s.serving, step=5, within=90
    )
    pods = harness.live_pods()
    assert sorted(pods) == ["chat-engine-1-leader-0", "chat-engine-1-worker-0"]
    assert all(p["spec"]["nodeName"] != node for p in pods.values())
    assert status.last_failure is not None and status.last_failure.reason == "NodeLost"
    await delete_and_finish(harness, handle)


async def test_surge_then_drain_never_serves_nothing(harness: KubeHarness) -> None:
    handle = await harness.start(harness.spec())
    await harness.until_real(handle, lambda s: s.phase == P.READY and s.serving)
    samples: list[int] = []
    done = asyncio.Event()

    async def sample() -> None:
        while not done.is_set():
            samples.append(len(harness.serving_pods()))
            await asyncio.sleep(0.01)

    sampler = asyncio.create_task(sample())
    await handle.signal("update", UpdateRequest(spec=harness.spec("engine:2")))
    status = await harness.until_skipping(
        handle, lambda s: s.running_revision == "rev-engine-2" and s.phase == P.READY, step=1, within=60
    )
    done.set()
    await sampler
    assert status.active_ordinal == 1 and status.incarnation == 1
    assert sorted(harness.live_pods()) == ["chat-engine-1-default-1"]
    assert samples and min(samples) >= 1, "the Instance served nothing at some moment of the update"
    assert max(samples) == 2, "the new pod never served beside the old one"
    await delete_and_finish(harness, handle)


async def test_drain_before_delete(harness: KubeHarness) -> None:
    handle = await harness.start(harness.spec(workers=1, drain_seconds=600))
    await harness.until_real(handle, lambda s: s.phase == P.READY and s.serving)
    await handle.signal("delete", DeleteRequest())
    # The drain timer holds the pods, out of rotation, until workflow time moves on.
    await harness.until_real(handle, lambda s: s.phase == P.DELETING and s.serving_pods == 0)
    assert sorted(harness.live_pods()) == ["chat-engine-1-leader-0", "chat-engine-1-worker-0"]
    assert harness.serving_pods() == []
    await harness.env.sleep(timedelta(minutes=11).total_seconds())
    final = await harness.until_real(handle, lambda s: s.deleted)
    assert final.deleted and harness.live_pods() == {}


async def test_deleted_gang_pods_count_as_terminating_at_once(harness: KubeHarness) -> None:
    """A two-pod Instance being deleted counts its pods Terminating once its delete call returns,
    not when the watcher reports them: the watcher holds a pod's way out up to 10 s, and the
    parent's scale-down budget reads what the Instance holds (`pods_held`: one pod, not two)."""
    handle = await harness.start(harness.spec(image="slowstop:1", workers=1, drain_seconds=0.0))
    await harness.until_real(handle, lambda s: s.phase == P.READY and s.serving)
    # Pods that take 12 s to exit, in real time (fast timing scales the grace period too).
    harness.sim.set_image_behavior("slowstop:1", stop_seconds=12.0)
    harness.sim.set_default_timing(factor=1.0)
    await handle.signal("delete", DeleteRequest())
    status = await harness.until_real(handle, lambda s: s.phase == P.DELETING and s.total_pods == 0, within=5)
    assert (status.ready_pods, status.deleted) == (0, False)
    exiting = sorted(name for name, pod in harness.pods().items() if pod["metadata"].get("deletionTimestamp"))
    assert exiting == ["chat-engine-1-leader-0", "chat-engine-1-worker-0"], "the pods went before the check"
    final = await harness.until_real(handle, lambda s: s.deleted, within=60)
    assert final.deleted and harness.pods() == {}


async def test_a_counted_deletion_takes_its_drain_deadline_from_the_parent(harness: KubeHarness) -> None:
    """A delete the parent counts says when its drain is overdue (`DeleteRequest.drain_deadline`):
    the Instance takes it as it is, not its own start + `instanceReadyTimeout` (an hour here),
    which a lifecycle change may not have reached yet when the delete did."""
    handle = await harness.start(harness.spec(instance_ready_timeout_seconds=3600.0, drain_seconds=0.0))
    await harness.until_real(handle, lambda s: s.phase == P.READY and s.serving)
    (pod,) = harness.live_pods()
    kubernetes.client.CoreV1Api(harness.sim.api_client()).patch_namespaced_pod(
        pod, harness.namespace, {"metadata": {"finalizers": ["example.com/keep"]}}
    )
    asked = datetime.now(UTC)
    said = asked + timedelta(seconds=30)
    request = DeleteRequest(reason="ScaleDown", counted_since=asked, drain_deadline=said, drain_deadline_said=True)
    await handle.signal("delete", request)
    status = await harness.until_real(handle, lambda s: s.phase == P.DELETING and s.operation is not None)
    await harness.until_skipping(handle, lambda s: "DrainOverdue" in harness.events(), step=10.0, within=60)
    (message,) = [e["message"] for e in harness.sim.objects("", "events", harness.namespace) if e["reason"] == "DrainOverdue"]
    assert f"(deadline {said:%Y-%m-%dT%H:%M:%SZ})" in message, (message, status.operation)
    kubernetes.client.CoreV1Api(harness.sim.api_client()).patch_namespaced_pod(
        pod, harness.namespace, [{"op": "remove", "path": "/metadata/finalizers"}]
    )
    final = await harness.until_real(handle, lambda s: s.deleted, within=60)
    assert final.deleted and harness.pods() == {}


async def test_scenarios_end_right_under_api_faults_and_cut_watches(harness: KubeHarness) -> None:
    """10% of API answers are 500/409/429 and every watch is cut each 10 s: same outcomes."""
    harness.sim.inject_faults(error_rate=0.1, codes=(500, 409, 429), watch_cut_seconds=10.0)
    try:
        gang = await harness.start(harness.spec(workers=3))
        await harness.until_real(gang, lambda s: s.phase == P.READY and s.serving, within=120)
        before = {n: p["metadata"]["uid"] for n, p in harness.live_pods().items()}
        harness.sim.kill_pod(harness.namespace, "chat-engine-1-worker-0")
        await harness.until_real(
            gang, lambda s: s.incarnation == 2 and s.phase == P.READY and s.serving, within=120
        )
        after = {n: p["metadata"]["uid"] for n, p in harness.live_pods().items()}
        assert sorted(after) == sorted(before) and all(after[n] != before[n] for n in before)

        single = await harness.start(harness.spec(index=2))
        await harness.until_real(single, lambda s: s.phase == P.READY and s.serving, within=120)
        await single.signal("update", UpdateRequest(spec=harness.spec("engine:2", index=2)))
        status = await harness.until_skipping(
            single, lambda s: s.running_revision == "rev-engine-2" and s.phase == P.READY, step=1, within=120
        )
        assert status.active_ordinal == 1
        for handle in (gang, single):
            await handle.signal("delete", DeleteRequest())
            await harness.until_skipping(handle, lambda s: s.deleted, step=1, within=120)
        assert harness.live_pods() == {}
        assert harness.sim.counters()["faults_injected"], "the fault injection never fired"
    finally:
        harness.sim.clear_faults()
