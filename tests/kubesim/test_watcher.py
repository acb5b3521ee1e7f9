"""The pod watcher against kubesim, with a recording signal sink in place of Temporal
(`test_watcher_view.py`: holding back and handing over, on the watcher's view alone).

Every test also checks the watcher's promise that no Instance receives the same summary
twice in a row, whatever the cluster did in between.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar
from uuid import uuid4

import pytest
import pytest_asyncio
from temporalio.testing import ActivityEnvironment, WorkflowEnvironment

from activities.kube import KubeActivities
from models.kube_ops import (
    ApplyObjectInput,
    CreatePodsInput,
    DeletePodsInput,
    ListInstancePodsInput,
    ObjectRef,
    PatchObjectInput,
    SetServingInput,
)
from models.pods import InstancePods
from tests.kubesim.activity_objects import WAIT_SECONDS, headless_service, instance_pod, namespace_manifest
from tests.recording_sink import RecordingSink
from workers.watch.pods import PodWatcher, TemporalSignalSink

pytestmark = pytest.mark.kubesim

T = TypeVar("T")
POD = "chat-engine-0-default-0"


async def call(fn: Callable[[Any], T], arg: Any) -> T:
    """Run a (blocking) activity off the event loop the watcher runs on."""
    return await asyncio.to_thread(ActivityEnvironment().run, fn, arg)


@pytest.fixture
def kube(kubesim: Any) -> KubeActivities:
    return KubeActivities(kubesim.api_client())


@pytest_asyncio.fixture
async def namespace(kube: KubeActivities) -> str:
    name = f"w-{uuid4().hex[:8]}"
    await call(
        kube.apply_object,
        ApplyObjectInput(manifest=namespace_manifest(name)),
    )
    return name


@pytest_asyncio.fixture
async def sink() -> RecordingSink:
    return RecordingSink()


@pytest_asyncio.fixture
async def watcher(kubesim: Any, sink: RecordingSink) -> AsyncIterator[PodWatcher]:
    watcher = PodWatcher(kubesim.api_client(), sink, cluster="sim", read_timeout_seconds=10.0)
    await watcher.start()
    async with asyncio.timeout(WAIT_SECONDS):
        await watcher.wait_synced()
    try:
        yield watcher
    finally:
        await watcher.stop()
        sink.assert_no_repeats()


def wid(namespace: str, index: int = 0) -> str:
    """The watcher here watches workload cluster `sim`: its Instances' IDs end in `@sim`."""
    return f"instance/{namespace}/chat-engine-{index}@sim"


def is_ready(summary: InstancePods) -> bool:
    return len(summary.pods) == 1 and summary.pods[0].is_ready


def is_serving(summary: InstancePods) -> bool:
    return len(summary.pods) == 1 and summary.pods[0].is_serving and summary.pods[0].ready


async def serve(kube: KubeActivities, namespace: str, serving: bool = True, index: int = 0) -> None:
    name = f"chat-engine-{index}-default-0"
    await call(
        kube.set_serving_condition,
        SetServingInput(
            namespace=namespace, pods=[name], serving=serving, reason="Admitted" if serving else "Draining"
        ),
    )


async def test_ready_pod_is_one_signal_and_noise_is_not_signalled(
    kube: KubeActivities, namespace: str, sink: RecordingSink, watcher: PodWatcher
) -> None:
    await call(kube.create_pods, CreatePodsInput(namespace=namespace, pods=[instance_pod(namespace)]))
    headless = headless_service(namespace)
    await call(kube.apply_object, ApplyObjectInput(manifest=headless))
    await sink.wait(
        wid(namespace), lambda s: is_ready(s) and s.endpoints_listed == (), "ready, not yet listed"
    )
    before = len(sink.to(wid(namespace)))
    events_before = watcher.stats.events

    # A change nobody decides on (an annotation) reaches the watcher but is not signalled.
    pod_ref = ObjectRef(api_version="v1", kind="Pod", name=POD, namespace=namespace)
    await call(
        kube.patch_object, PatchObjectInput(ref=pod_ref, patch={"metadata": {"annotations": {"note": "x"}}})
    )
    await serve(kube, namespace)
    await sink.wait(
        wid(namespace), lambda s: is_serving(s) and s.endpoints_listed == (POD,), "serving, listed"
    )
    after = sink.to(wid(namespace))[before:]
    assert watcher.stats.events > events_before
    assert after[0].pods[0].serving == "True", "the annotation alone produced a signal"
    # The Ready transition shows up in exactly one signal.
    ready_flips = [
        summary
        for previous, summary in zip(sink.to(wid(namespace)), sink.to(wid(namespace))[1:], strict=False)
        if summary.pods[0].ready and not previous.pods[0].ready
    ]
    assert len(ready_flips) == 1
    assert after[-1].cluster == "sim" and after[-1].resource_version


async def test_node_failure_and_deletion_are_signalled(
    kubesim: Any, kube: KubeActivities, namespace: str, sink: RecordingSink, watcher: PodWatcher
) -> None:
    await call(kube.create_pods, CreatePodsInput(namespace=namespace, pods=[instance_pod(namespace)]))
    ready = await sink.wait(wid(namespace), is_ready, "containers ready")
    node_name = ready.pods[0].node_name
    assert node_name and ready.pods[0].node_ready == "True"

    # The Instance keeps the newest observation by resourceVersion: a node failure seen after
    # its own pod list must carry a newer version than that list, though no pod changed.
    listed = await call(
        kube.list_instance_pods,
        ListInstancePodsInput(namespace=namespace, isvc="chat", component="engine", index=0),
    )
    await asyncio.to_thread(kubesim.fail_node, node_name)
    failed = await sink.wait(
        wid(namespace), lambda s: bool(s.pods) and s.pods[0].node_ready != "True", "node not ready"
    )
    assert int(failed.resource_version) > int(listed.resource_version)

    await call(kube.delete_pods, DeletePodsInput(namespace=namespace, names=[POD], grace_period_seconds=0))
    await sink.wait(wid(namespace), lambda s: not s.pods, "an empty summary once the pod is gone")


async def test_cut_watches_and_410_resync_bring_state_up_to_date(
    kubesim: Any, kube: KubeActivities, namespace: str, sink: RecordingSink
) -> None:
    # Faults first, so that every watch the watcher opens is cut after 0.3 s.
    kubesim.inject_faults(error_rate=0.1, codes=(500, 429, 409), watch_cut_seconds=0.3)
    watcher = PodWatcher(kubesim.api_client(), sink, cluster="sim", read_timeout_seconds=10.0)
    await watcher.start()
    try:
        async with asyncio.timeout(WAIT_SECONDS):
            await watcher.wait_synced()
        await _retrying(
            lambda: call(
                kube.create_pods, CreatePodsInput(namespace=namespace, pods=[instance_pod(namespace)])
            )
        )
        await sink.wait(wid(namespace), is_ready, "containers ready")
        # Move the cluster's version past the watcher's, then forget history: the next
        # resume from the watcher's version is answered 410 and it must list again.
        resyncs = watcher.stats.resyncs.get("pods", 0)
        async with asyncio.timeout(WAIT_SECONDS):
            while watcher.stats.resyncs.get("pods", 0) == resyncs:
                name = f"c-{uuid4().hex[:6]}"
                config_map = {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": name, "namespace": namespace},
                }
                await _apply_retrying(kube, config_map)
                await asyncio.to_thread(kubesim.compact)
                await asyncio.sleep(0.2)
        await _retrying(lambda: serve(kube, namespace))
        await sink.wait(wid(namespace), is_serving, "serving after the resync")
        await _retrying(lambda: serve(kube, namespace, serving=False))
        await sink.wait(wid(namespace), lambda s: bool(s.pods) and s.pods[0].serving == "False", "drained")
    finally:
        kubesim.inject_faults()
        await watcher.stop()
    sink.assert_no_repeats()


async def test_restarted_watcher_resends_current_state(
    kubesim: Any, kube: KubeActivities, namespace: str, sink: RecordingSink, watcher: PodWatcher
) -> None:
    pods = [instance_pod(namespace, index=0), instance_pod(namespace, index=1)]
    await call(kube.create_pods, CreatePodsInput(namespace=namespace, pods=pods))
    await sink.wait(wid(namespace, 1), is_ready, "containers ready")
    await watcher.stop()

    # While no watcher runs, Instance 0 starts serving.
    await serve(kube, namespace)
    fresh_sink = RecordingSink(missing={wid(namespace, 1)})
    restarted = PodWatcher(kubesim.api_client(), fresh_sink, cluster="sim")
    await restarted.start()
    try:
        async with asyncio.timeout(WAIT_SECONDS):
            await restarted.wait_synced()
        latest = await fresh_sink.wait(wid(namespace), is_serving, "current state re-sent")
        assert latest.pods[0].name == POD
        # Instance 1 has no workflow: its signal is dropped, not retried forever.
        assert restarted.stats.signals_dropped >= 1 and not fresh_sink.to(wid(namespace, 1))
        fresh_sink.assert_no_repeats()
    finally:
        await restarted.stop()


async def test_temporal_sink_ignores_missing_workflows(workflow_env: WorkflowEnvironment) -> None:
    sink = TemporalSignalSink(workflow_env.client)
    summary = InstancePods(namespace="ns", isvc="chat", component="engine", index=0)
    assert await sink(f"instance/ns/no-such-{uuid4().hex[:6]}-0", summary) is False


async def _retrying(step: Callable[[], Any]) -> None:
    """Retry a step through injected faults, as Temporal would retry the activity."""
    from temporalio.exceptions import ApplicationError

    for _ in range(40):
        try:
            await step()
            return
        except ApplicationError as error:
            if error.non_retryable:
                raise
            await asyncio.sleep(0.05)
    raise AssertionError("step kept failing")


async def _apply_retrying(kube: KubeActivities, manifest: dict[str, Any]) -> None:
    await _retrying(lambda: call(kube.apply_object, ApplyObjectInput(manifest=manifest)))


async def eventually(check: Callable[[], bool]) -> None:
    async with asyncio.timeout(WAIT_SECONDS):
        while True:
            if check():
                return
            await asyncio.sleep(0.05)


async def test_a_standby_that_takes_over_sends_only_what_changed_after_the_leaders_mark(
    kubesim: Any, kube: KubeActivities, namespace: str, sink: RecordingSink, watcher: PodWatcher
) -> None:
    """Hand-over (`PodWatcher.lead`): the standby's view is warm but it sends nothing; taking over
    with the leader's delivered mark it signals the Instance that changed after the leader died,
    and nothing the leader had delivered, so no Instance gets a summary twice or misses one."""
    standby_sink = RecordingSink()
    standby = PodWatcher(kubesim.api_client(), standby_sink, cluster="sim", read_timeout_seconds=10.0)
    await standby.follow()
    await standby.start()
    try:
        pods = [instance_pod(namespace, index=index) for index in range(3)]
        await call(kube.create_pods, CreatePodsInput(namespace=namespace, pods=pods))
        for index in range(3):
            await sink.wait(wid(namespace, index), is_ready, f"Instance {index} ready")
        # The leader has flushed everything it saw (its mark is its view), then dies.
        await eventually(lambda: watcher.delivered() == watcher._versions and not watcher._has_dirty())
        mark = watcher.delivered()
        await watcher.stop()
        assert not standby_sink.sent, "a standby sends nothing"

        # While nobody leads, Instance 0 starts serving; the standby's view follows.
        await serve(kube, namespace)
        key = (namespace, "chat", "engine", 0)
        await eventually(lambda: is_serving(standby.summaries({key})[key]))
        assert not standby_sink.sent

        standby.lead(mark)
        await standby_sink.wait(wid(namespace), is_serving, "the change after the mark is sent")
        assert not standby_sink.to(wid(namespace, 1)) and not standby_sink.to(wid(namespace, 2)), (
            "Instances the old leader had delivered were sent again"
        )
        handed_over = RecordingSink()
        handed_over.sent = sink.sent + standby_sink.sent
        handed_over.assert_no_repeats()
    finally:
        await standby.stop()


async def test_a_standby_taking_over_without_a_mark_sends_everything(
    kubesim: Any, kube: KubeActivities, namespace: str, sink: RecordingSink, watcher: PodWatcher
) -> None:
    standby_sink = RecordingSink()
    standby = PodWatcher(kubesim.api_client(), standby_sink, cluster="sim", read_timeout_seconds=10.0)
    await standby.follow()
    await standby.start()
    try:
        await call(kube.create_pods, CreatePodsInput(namespace=namespace, pods=[instance_pod(namespace)]))
        await sink.wait(wid(namespace), is_ready, "ready")
        standby.lead({})  # the Lease carried no mark: nothing is known to be delivered
        await standby_sink.wait(wid(namespace), is_ready, "re-sent")
    finally:
        await standby.stop()


async def test_follow_cancels_the_pass_in_flight_and_keeps_its_instances_dirty(
    kubesim: Any, kube: KubeActivities, namespace: str
) -> None:
    """Review finding 2: once `follow()` returns (the Lease is lost), no signal is in flight; what
    the cancelled pass had not sent is still dirty."""
    entered, sent = asyncio.Event(), []

    async def slow_sink(workflow_id: str, summary: InstancePods) -> bool:
        entered.set()
        await asyncio.sleep(30)
        sent.append(workflow_id)
        return True

    watcher = PodWatcher(kubesim.api_client(), slow_sink, cluster="sim", read_timeout_seconds=10.0)
    await watcher.start()
    try:
        await call(kube.create_pods, CreatePodsInput(namespace=namespace, pods=[instance_pod(namespace)]))
        async with asyncio.timeout(WAIT_SECONDS):
            await entered.wait()
            await watcher.follow()
        assert watcher._passing is None and not sent
        assert (namespace, "chat", "engine", 0) in watcher._dirty
    finally:
        await watcher.stop()
