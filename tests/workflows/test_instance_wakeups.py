"""Issue 5: an Instance never waits for a wake-up it already received.

The watcher signals `pods_changed` only when an Instance's summary changes, never the same
summary twice. These tests run on the real-time dev server (where the 5-minute safety re-list
cannot fire within the test) with a relay that, like the watcher, signals only on change, and
check that single-pod Instances reach Ready and serving, through create and update, on the
signals alone. One test slows the workflow's own pod list so that pod changes land while it
runs: the list's older answer must not replace the newer observation the signal brought.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any
from uuid import uuid4

import kubernetes
import pytest
from temporalio import activity
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from activities.registry import build_activities
from kubesim.handle import KubeSim
from kubesim.timing import Timing
from models.instance import (
    DeleteRequest,
    InstancePhase,
    InstanceSpec,
    InstanceStatus,
    UpdateRequest,
    UpdateStrategyType,
)
from models.kube_ops import KUBE_LIST_INSTANCE_PODS, ListInstancePodsInput
from models.pods import InstancePods
from planning.pod_summary import InstanceKey
from tests.fixtures.kubesim import TEST_TOPOLOGY
from tests.workflows.instance_kube_harness import Handle, pod_spec
from tests.workflows.service_harness import PodRelay
from workers.worker import build_worker
from workflows.instance.versions import LOCAL_KUBE_CALLS
from workflows.names import instance_workflow_id

pytestmark = [pytest.mark.workflows, pytest.mark.kubesim]

INSTANCES = 2
WITHIN = 25.0
"""Far below the 300 s safety re-list: reaching the goal in time proves the signals woke it."""
LAG_SECONDS = 2.0
"""How late the relay delivers each summary in the race test: a busy watcher's lag."""
READY_SECONDS = 4.0
"""How long a container takes to turn ready in the race test: longer than the lag, so the
workflow's confirming list sees the new pod still on its way up."""
HOLD_SECONDS = 8.0
"""How long the held pod list waits at most for a newer summary to reach the workflow."""


def spec(namespace: str, index: int, image: str, strategy: UpdateStrategyType, grace: int) -> InstanceSpec:
    leader = pod_spec(image)
    # With no grace a deleted pod is gone at once, so the Instance creates its successor
    # before the (lagging) summaries about the old pod arrive: the stale-signal path.
    leader["terminationGracePeriodSeconds"] = grace
    return InstanceSpec(
        update_strategy_type=strategy,
        namespace=namespace,
        isvc="chat",
        component="engine",
        index=index,
        revision=f"rev-{image.replace(':', '-')}",
        leader_pod_spec=leader,
        drain_seconds=0.2,
    )


def held_list(
    activities: list[Any], relay: PodRelay, overtaken_lists: list[str], held_lists: list[str]
) -> list[Any]:
    """The real activities, with `kube.list_instance_pods` answering late when pods are on
    their way up: it lists at once, then holds its answer until the relay has delivered a
    newer summary in which every pod is ready (at most `HOLD_SECONDS`). The workflow thus
    gets that last signal first and the older list second, the order that lost the wake-up
    (an Instance left waiting for a wake-up it already had); the watcher has nothing newer
    to send afterwards. Each list so overtaken is
    appended to `overtaken_lists`, so the test can tell the race really happened; each list
    held at all (one that saw a pod on its way up) to `held_lists`."""
    name = KUBE_LIST_INSTANCE_PODS
    real = next(a for a in activities if activity._Definition.must_from_callable(a).name == name)

    def overtaken(key: InstanceKey, listed: InstancePods) -> bool:
        seen = relay.delivered.get(key)
        return (
            seen is not None
            and int(seen.resource_version) > int(listed.resource_version)
            and bool(seen.pods)
            and all(pod.is_ready for pod in seen.pods)
        )

    @activity.defn(name=name)
    def list_instance_pods(request: ListInstancePodsInput) -> InstancePods:
        listed: InstancePods = real(request)
        key = (request.namespace, request.isvc, request.component, request.index)
        if all(pod.is_ready for pod in listed.pods):
            return listed  # nothing on its way: no change to race with
        held_lists.append(f"{listed.isvc}-{listed.component}-{listed.index}@{listed.resource_version}")
        deadline = time.monotonic() + HOLD_SECONDS
        while time.monotonic() < deadline:
            if overtaken(key, listed):
                overtaken_lists.append(
                    f"{listed.isvc}-{listed.component}-{listed.index}@{listed.resource_version}"
                )
                break
            time.sleep(0.05)
        return listed

    return [a for a in activities if a is not real] + [list_instance_pods]


async def took_local_kube_calls(handle: Handle) -> bool:
    """Whether the run took the `instance-local-kube-calls` path (its patch marker)."""
    async for event in handle.fetch_history_events():
        if event.HasField("marker_recorded_event_attributes"):
            details = event.marker_recorded_event_attributes.details
            if any(LOCAL_KUBE_CALLS.encode() in p.data for v in details.values() for p in v.payloads):
                return True
    return False


@pytest.fixture
def slow_ready_sim() -> Iterator[KubeSim]:
    """kubesim whose containers take `READY_SECONDS` to turn ready, so the workflow's own list
    can catch a pod on its way up (the fixture's fast timing makes it ready at once)."""
    timing = Timing.fast()
    timing.ready_seconds = READY_SECONDS
    sim = KubeSim(topology=TEST_TOPOLOGY, crds="product", timing=timing).start()
    try:
        yield sim
    finally:
        sim.stop()


def make_namespace(sim: KubeSim) -> str:
    name = f"wake-{uuid4().hex[:8]}"
    kubernetes.client.CoreV1Api(sim.api_client()).create_namespace({"metadata": {"name": name}})
    return name


async def settled(handle: Handle, revision: str, within: float = WITHIN) -> InstanceStatus:
    """Wait (real time) until the Instance is Ready and serving `revision`."""
    deadline = time.monotonic() + within
    status: InstanceStatus = await handle.query("status", result_type=InstanceStatus)
    while not (
        status.phase == InstancePhase.READY
        and status.serving
        and status.running_revision == revision
        and status.operation is None
    ):
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{handle.id} stalled for {within:.0f}s (the watcher sends each summary once, so "
                f"only the 300 s safety re-list would wake it): phase={status.phase.value} "
                f"ready={status.ready_pods} serving={status.serving_pods} "
                f"running={status.running_revision} operation={status.operation}"
            )
        await asyncio.sleep(0.1)
        status = await handle.query("status", result_type=InstanceStatus)
    return status


async def run_story(
    client: Client, task_queue: str, sim: KubeSim, race: bool, strategy: UpdateStrategyType
) -> None:
    """Two single-pod Instances: created, updated to a new image, deleted; each step must
    finish on the relay's signals alone. With `race`, summaries arrive a second late and the
    workflow's own pod list is overtaken by the signal of a pod turning ready."""
    namespace = make_namespace(sim)
    activities = build_activities(sim.api_client())
    overtaken_lists: list[str] = []
    held_lists: list[str] = []
    relay = PodRelay(client, sim, lag_seconds=LAG_SECONDS if race else 0.0)
    relay.start()
    handles: list[Handle] = []
    try:
        async with build_worker(
            client,
            task_queue,
            sim.api_client(),
            activities=held_list(activities, relay, overtaken_lists, held_lists) if race else activities,
        ):
            try:
                for index in range(INSTANCES):
                    handles.append(
                        await client.start_workflow(
                            "Instance",
                            spec(namespace, index, "engine:1", strategy, 0 if race else 30),
                            id=instance_workflow_id(namespace, "chat", "engine", index),
                            task_queue=task_queue,
                            result_type=InstanceStatus,
                        )
                    )
                for handle in handles:
                    await settled(handle, "rev-engine-1")
                for index, handle in enumerate(handles):
                    await handle.signal(
                        "update",
                        UpdateRequest(spec=spec(namespace, index, "engine:2", strategy, 0 if race else 30)),
                    )
                for handle in handles:
                    await settled(handle, "rev-engine-2")
                assert relay.signals > 0, "the relay never signalled: the test would prove nothing"
                if race and await took_local_kube_calls(handles[0]):
                    # From `instance-local-kube-calls` on, a teardown waits for the watcher's word
                    # that the old pod is gone before creating its successor, so no stale summary
                    # follows the create and the Instance takes no list while a pod comes up:
                    # there is nothing for a signal to overtake. What the run proves there: the
                    # lagging, once-sent summaries alone carry create, update and delete, and
                    # (checked here) no list of a pod on its way up is taken; if one ever is,
                    # this check fails and the overtaking check below must apply again.
                    assert not held_lists, f"a list saw pods on their way up: {held_lists}"
                elif race:
                    assert overtaken_lists, "no pod list was overtaken by a signal: the race never happened"
            finally:
                for handle in handles:
                    await handle.signal("delete", DeleteRequest(drain_seconds=0.0))
                for handle in handles:
                    final = await handle.result()
                    assert final.deleted
    finally:
        await relay.stop()


@pytest.mark.parametrize("strategy", [UpdateStrategyType.SURGE_THEN_DRAIN, UpdateStrategyType.RECREATE_POD])
async def test_single_pod_instances_create_and_update_on_signals_sent_once(
    dev_server: WorkflowEnvironment, kubesim: KubeSim, task_queue: str, strategy: UpdateStrategyType
) -> None:
    await run_story(dev_server.client, task_queue, kubesim, False, strategy)


async def test_a_signal_that_lands_during_the_workflows_own_pod_list_is_not_lost(
    dev_server: WorkflowEnvironment, slow_ready_sim: KubeSim, task_queue: str
) -> None:
    """RecreatePod with no grace: the successor pod is created before the lagging summaries
    about the old pod arrive, so the Instance confirms with its own list while the new pod
    comes up, and the pod's Ready summary reaches it before that list's older answer."""
    await run_story(dev_server.client, task_queue, slow_ready_sim, True, UpdateStrategyType.RECREATE_POD)
