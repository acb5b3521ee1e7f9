"""The pod watcher against kubesim, with a recording signal sink in place of Temporal.

Every test also checks the watcher's promise that no Instance receives the same summary
twice in a row, whatever the cluster did in between.
"""

from __future__ import annotations

import asyncio
import copy
import functools
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar
from uuid import uuid4

import kubernetes.client
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
from planning.leadership import held_keys, held_text
from tests.kubesim.activity_objects import WAIT_SECONDS, headless_service, instance_pod, namespace_manifest
from workers.watch.pods import NODES, PODS, PodWatcher, TemporalSignalSink
from workers.watch.stream import WatchItem
from workers.watcher import DELIVERED_ANNOTATION, HELD_ANNOTATION, delivered_mark, handover_annotations

pytestmark = pytest.mark.kubesim

T = TypeVar("T")
POD = "chat-engine-0-default-0"


class RecordingSink:
    """Collects signals; workflow ids in `missing` answer like a workflow that does not exist."""

    def __init__(self, missing: set[str] | None = None) -> None:
        self.sent: list[tuple[str, InstancePods]] = []
        self.missing = missing or set()
        self._changed = asyncio.Event()

    async def __call__(self, workflow_id: str, summary: InstancePods) -> bool:
        if workflow_id in self.missing:
            return False
        self.sent.append((workflow_id, summary))
        self._changed.set()
        return True

    def to(self, workflow_id: str) -> list[InstancePods]:
        return [summary for wid, summary in self.sent if wid == workflow_id]

    async def wait(self, workflow_id: str, check: Callable[[InstancePods], bool], what: str) -> InstancePods:
        """The first summary sent to `workflow_id` (latest first) that passes `check`."""
        async with asyncio.timeout(WAIT_SECONDS):
            while True:
                for summary in reversed(self.to(workflow_id)):
                    if check(summary):
                        return summary
                self._changed.clear()
                await self._changed.wait()
        raise AssertionError(what)

    def assert_no_repeats(self) -> None:
        last: dict[str, InstancePods] = {}
        for workflow_id, summary in self.sent:
            assert not summary.same_state(last.get(workflow_id)), (
                f"{workflow_id} got the same summary twice in a row"
            )
            last[workflow_id] = summary


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


async def test_an_instance_that_changed_and_changed_back_across_a_relist_is_sent_at_takeover() -> None:
    """Review finding 5: after a 410 re-list, a pod whose own resourceVersion moved past the mark
    counts as changed even if it looks the same again (Ready -> NotReady -> Ready while this
    standby's watch was broken: the old leader may have sent NotReady last)."""
    watcher = PodWatcher(kubernetes.client.ApiClient(), RecordingSink(), watch_endpoints=False)
    pod = instance_pod("ns")
    pod["metadata"]["resourceVersion"] = "10"
    again = copy.deepcopy(pod)
    again["metadata"]["resourceVersion"] = "20"
    watcher._apply(WatchItem(NODES, "RESYNC", [], "10"))
    watcher._apply(WatchItem(PODS, "RESYNC", [pod], "10"))
    watcher._apply(WatchItem(PODS, "RESYNC", [again], "25"))  # same content, its version moved
    watcher.lead({PODS: "15", NODES: "15"})
    assert ("ns", "chat", "engine", 0) in watcher._dirty


async def test_a_new_leader_whose_streams_lag_sends_summaries_no_older_than_the_mark() -> None:
    """Review finding 6: workflows drop a summary older than the last one; the new leader's
    carry at least the newest version of the mark it took over."""
    watcher = PodWatcher(kubernetes.client.ApiClient(), RecordingSink(), watch_endpoints=False)
    watcher._apply(WatchItem(NODES, "RESYNC", [], "10"))
    watcher._apply(WatchItem(PODS, "RESYNC", [instance_pod("ns")], "10"))
    watcher.lead({PODS: "99", NODES: "40"})
    key = ("ns", "chat", "engine", 0)
    assert watcher.summaries({key})[key].resource_version == "99"


async def test_a_standby_keeps_a_bounded_number_of_deleted_instances(monkeypatch: pytest.MonkeyPatch) -> None:
    """Review finding 9: a standby never sends, so what it keeps of deleted Instances is bounded."""
    monkeypatch.setattr("workers.watch.pods.STANDBY_GONE_KEPT", 10)
    watcher = PodWatcher(kubernetes.client.ApiClient(), RecordingSink(), watch_endpoints=False)
    await watcher.follow()
    watcher._apply(WatchItem(NODES, "RESYNC", [], "1"))
    watcher._apply(WatchItem(PODS, "RESYNC", [], "1"))
    for index in range(100):
        pod = instance_pod("ns", index=index)
        watcher._apply(WatchItem(PODS, "ADDED", [pod], str(2 * index + 2)))
        watcher._apply(WatchItem(PODS, "DELETED", [pod], str(2 * index + 3)))
    assert len(watcher._changed) <= 11 and ("ns", "chat", "engine", 99) in watcher._changed


async def test_progress_on_the_way_up_is_held_back_and_what_decisions_read_goes_at_once() -> None:
    """Issue 17: a pod appearing, being scheduled and starting is progress: it waits up to
    `settle_seconds` and goes as one summary with the newest state; readiness goes at once;
    nothing held is counted as delivered for a hand-over."""
    sink = RecordingSink()
    watcher = PodWatcher(kubernetes.client.ApiClient(), sink, watch_endpoints=False, settle_seconds=0.3)
    key, workflow_id = ("ns", "chat", "engine", 0), "instance/ns/chat-engine-0"
    node = {"metadata": {"name": "gpu-1", "resourceVersion": "2"}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    watcher._apply(WatchItem(NODES, "RESYNC", [node], "2"))
    watcher._apply(WatchItem(PODS, "RESYNC", [], "2"))
    pod = instance_pod("ns")
    pod["metadata"]["resourceVersion"] = "3"
    watcher._apply(WatchItem(PODS, "ADDED", [pod], "3"))
    await watcher._flush()
    assert sink.to(workflow_id) == [] and key in watcher._dirty, "a new Pending pod went out at once"
    # A new leader taking over at this mark sends the held Instance: the Lease names it.
    assert key in held_keys(watcher.delivered_held()), "a held summary counted as delivered"
    # ... and only it: the mark is not lowered (every Instance changed since would be resent).
    assert watcher.delivered() == {PODS: "3", NODES: "2"}
    assert watcher.holding() == 1

    scheduled = copy.deepcopy(pod)
    scheduled["metadata"]["resourceVersion"] = "4"
    scheduled["spec"]["nodeName"] = "gpu-1"
    scheduled["status"] = {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]}
    watcher._apply(WatchItem(PODS, "MODIFIED", [scheduled], "4"))
    await watcher._flush()
    assert sink.to(workflow_id) == [], "being scheduled went out before the hold ended"

    await asyncio.sleep(0.35)
    await watcher._flush()
    (first,) = sink.to(workflow_id)
    assert first.pods[0].node_name == "gpu-1" and first.resource_version == "4", "not the newest progress"
    assert key not in watcher._dirty and watcher.delivered() == {PODS: "4", NODES: "2"} and watcher.holding() == 0
    assert watcher.delivered_held() == ""

    ready = copy.deepcopy(scheduled)
    ready["metadata"]["resourceVersion"] = "5"
    ready["status"] = {
        "phase": "Running",
        "conditions": [
            {"type": "PodScheduled", "status": "True"},
            {"type": "ContainersReady", "status": "True"},
        ],
        "containerStatuses": [{"name": "main", "ready": True, "restartCount": 0, "state": {"running": {}}}],
    }
    watcher._apply(WatchItem(PODS, "MODIFIED", [ready], "5"))
    await watcher._flush()
    assert [summary.pods[0].is_ready for summary in sink.to(workflow_id)] == [False, True], "readiness was held back"
    sink.assert_no_repeats()


async def test_a_new_leader_resends_what_the_old_one_held_and_nothing_it_delivered_since() -> None:
    """CI failure of stop 27: the old leader's mark was lowered below its oldest held change, so
    the new leader resent every Instance delivered after that change (36 repeats in the chaos
    test). The Lease names the held Instances instead: the new leader sends those, and the ones
    the old leader had delivered after the held change count as delivered."""
    sink = RecordingSink()
    old = PodWatcher(kubernetes.client.ApiClient(), sink, watch_endpoints=False, settle_seconds=30)
    new = PodWatcher(kubernetes.client.ApiClient(), RecordingSink(), watch_endpoints=False, settle_seconds=30)
    held_pod, delivered_pod = instance_pod("ns", index=0), instance_pod("ns", index=1)
    held_pod["metadata"]["resourceVersion"] = "3"
    delivered_pod["metadata"]["resourceVersion"] = "4"
    delivered_pod["metadata"]["deletionTimestamp"] = "2026-12-04T00:00:00Z"  # news: goes at once
    for watcher in (old, new):
        watcher._apply(WatchItem(NODES, "RESYNC", [], "2"))
        watcher._apply(WatchItem(PODS, "RESYNC", [], "2"))
        watcher._apply(WatchItem(PODS, "ADDED", [held_pod], "3"))
        watcher._apply(WatchItem(PODS, "ADDED", [delivered_pod], "4"))
    await new.follow()
    await old._flush()
    assert [wid for wid, _ in sink.sent] == ["instance/ns/chat-engine-1"] and old.holding() == 1
    assert old.delivered() == {PODS: "4", NODES: "2"}, "the mark was lowered below the held change"

    new.lead(*delivered_mark(handover_annotations(old)))
    assert new._dirty == {("ns", "chat", "engine", 0)}, "not the held Instance alone"


async def test_held_instances_the_lease_has_no_room_for_are_kept_below_the_mark(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past `HELD_TEXT_LIMIT` the Lease names fewer held Instances; the changes of those it
    leaves out stay above the mark, so a new leader still sends them."""
    monkeypatch.setattr("workers.watch.pods.held_text", functools.partial(held_text, limit=0))
    watcher = PodWatcher(kubernetes.client.ApiClient(), RecordingSink(), watch_endpoints=False, settle_seconds=30)
    pod = instance_pod("ns")
    pod["metadata"]["resourceVersion"] = "3"
    watcher._apply(WatchItem(NODES, "RESYNC", [], "2"))
    watcher._apply(WatchItem(PODS, "RESYNC", [], "2"))
    watcher._apply(WatchItem(PODS, "ADDED", [pod], "3"))
    await watcher._flush()
    assert watcher.holding() == 1 and watcher.delivered_held() == ""
    assert watcher.delivered() == {PODS: "2", NODES: "2"}, "the left-out Instance's change counted as delivered"


async def test_a_mark_or_held_list_that_cannot_be_read_means_everything_is_sent_again() -> None:
    assert delivered_mark({DELIVERED_ANNOTATION: '{"pods": "9"}', HELD_ANNOTATION: "ns/chat/engine:1"}) == (
        {"pods": "9"}, {("ns", "chat", "engine", 1)}
    )
    assert delivered_mark({DELIVERED_ANNOTATION: '{"pods": "9"}'}) == ({"pods": "9"}, set()), "a leader before the held list"
    assert delivered_mark({DELIVERED_ANNOTATION: '{"pods": "9"}', HELD_ANNOTATION: "ns/chat:1"}) == ({}, set())
    assert delivered_mark({DELIVERED_ANNOTATION: "[1]"}) == ({}, set())


async def test_a_pod_gone_while_its_first_summary_was_held_is_reported_gone() -> None:
    """Review finding: the Instance must hear that the pod it created went, although the only
    summary that showed the pod was held back and never sent; a new lead holds afresh."""
    sink = RecordingSink()
    watcher = PodWatcher(kubernetes.client.ApiClient(), sink, watch_endpoints=False, settle_seconds=30)
    key, workflow_id = ("ns", "chat", "engine", 0), "instance/ns/chat-engine-0"
    watcher._apply(WatchItem(NODES, "RESYNC", [], "2"))
    watcher._apply(WatchItem(PODS, "RESYNC", [], "2"))
    pod = instance_pod("ns")
    pod["metadata"]["resourceVersion"] = "3"
    watcher._apply(WatchItem(PODS, "ADDED", [pod], "3"))
    await watcher._flush()
    assert sink.to(workflow_id) == [] and watcher.holding() == 1
    watcher._apply(WatchItem(PODS, "DELETED", [pod], "4"))
    await watcher._flush()
    (gone,) = sink.to(workflow_id)
    assert gone.pods == () and watcher.holding() == 0 and key not in watcher._dirty

    again = instance_pod("ns")
    again["metadata"]["resourceVersion"] = "5"
    watcher._apply(WatchItem(PODS, "ADDED", [again], "5"))
    await watcher._flush()
    assert watcher.holding() == 1
    await watcher.follow()
    watcher.lead()
    assert watcher.holding() == 0 and key in watcher._dirty


def _serving_on_gpu_1(*watchers: PodWatcher) -> dict[str, Any]:
    """Node gpu-1 and Instance 0's pod on it, ready and serving (resourceVersion 3), in each view."""
    node = {"metadata": {"name": "gpu-1", "resourceVersion": "2"}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    serving = instance_pod("ns")
    serving["metadata"]["resourceVersion"] = "3"
    serving["spec"]["nodeName"] = "gpu-1"
    serving["spec"]["readinessGates"] = [{"conditionType": "ome.io/serving"}]
    serving["status"] = {
        "phase": "Running",
        "conditions": [
            {"type": "ContainersReady", "status": "True"},
            {"type": "Ready", "status": "True"},
            {"type": "ome.io/serving", "status": "True"},
        ],
        "containerStatuses": [{"name": "main", "ready": True, "restartCount": 0, "state": {"running": {}}}],
    }
    for watcher in watchers:
        watcher._apply(WatchItem(NODES, "RESYNC", [node], "2"))
        watcher._apply(WatchItem(PODS, "RESYNC", [serving], "3"))
    return serving


def _take_out_of_rotation_and_delete(watcher: PodWatcher, serving: dict[str, Any]) -> dict[str, Any]:
    """The pod's way out, as its Instance takes it: out of rotation (4), then deleted (5)."""
    out = copy.deepcopy(serving)
    out["metadata"]["resourceVersion"] = "4"
    out["status"]["conditions"][1:] = [{"type": "Ready", "status": "False"}, {"type": "ome.io/serving", "status": "False"}]
    watcher._apply(WatchItem(PODS, "MODIFIED", [out], "4"))
    deleted = copy.deepcopy(out)
    deleted["metadata"].update(resourceVersion="5", deletionTimestamp="2026-12-01T00:00:30Z", deletionGracePeriodSeconds=30)
    deleted["status"]["containerStatuses"] = [
        {"name": "main", "ready": False, "restartCount": 0, "state": {"terminated": {"reason": "Completed", "exitCode": 0}}}
    ]
    watcher._apply(WatchItem(PODS, "MODIFIED", [deleted], "5"))
    return deleted


@pytest.mark.parametrize("held", [True, False], ids=["held-by-the-old-leader", "gone-past-its-mark"])
async def test_a_new_leader_tells_an_instance_its_pods_are_gone(held: bool) -> None:
    """Found under `make up` (stop 42): the watcher lost its Lease while 11 Instances were
    deleting, their pods' way out held back; it led again, their pods went, and no signal said
    so: a new leader took an Instance it had sent nothing to, with no pods left, for one never
    told of any. They waited in `DeletePods` for their own five-minute re-list."""
    old_sink, new_sink = RecordingSink(), RecordingSink()
    old = PodWatcher(kubernetes.client.ApiClient(), old_sink, watch_endpoints=False, settle_seconds=0.05,
                     way_out_settle_seconds=30)
    new = PodWatcher(kubernetes.client.ApiClient(), new_sink, watch_endpoints=False, settle_seconds=0.05,
                     way_out_settle_seconds=30)
    workflow_id = "instance/ns/chat-engine-0"
    serving = _serving_on_gpu_1(old, new)
    await new.follow()
    await old._flush()
    assert len(old_sink.to(workflow_id)) == 1
    if held:
        # The way out is held back by the old leader, which the Lease records; then it dies.
        for watcher in (old, new):
            deleted = _take_out_of_rotation_and_delete(watcher, serving)
        await old._flush()
        assert old.holding() == 1 and len(old_sink.to(workflow_id)) == 1
    else:
        deleted = serving  # the old leader dies before it sees the pod go
    new._apply(WatchItem(PODS, "DELETED", [{**deleted, "metadata": {**deleted["metadata"], "resourceVersion": "6"}}], "6"))

    new.lead(*delivered_mark(handover_annotations(old)))
    await new._flush()
    (gone,) = new_sink.to(workflow_id)
    assert gone.pods == ()
    await new._flush()
    assert len(new_sink.to(workflow_id)) == 1, "told twice"


async def test_a_pod_on_its_way_out_is_held_longer_and_its_going_goes_at_once() -> None:
    """Issue 17: a ready pod its Instance took out of rotation (`ome.io/serving` False) and
    then deleted is progress held for `way_out_settle_seconds`, not `settle_seconds`: the
    Instance waits only for it to go, which goes at once, with what was held."""
    sink = RecordingSink()
    watcher = PodWatcher(
        kubernetes.client.ApiClient(), sink, watch_endpoints=False, settle_seconds=0.05, way_out_settle_seconds=30
    )
    workflow_id = "instance/ns/chat-engine-0"
    serving = _serving_on_gpu_1(watcher)
    await watcher._flush()
    (first,) = sink.to(workflow_id)
    assert first.pods[0].is_serving

    deleted = _take_out_of_rotation_and_delete(watcher, serving)
    await watcher._flush()
    await asyncio.sleep(0.1)  # past `settle_seconds`, well within `way_out_settle_seconds`
    await watcher._flush()
    assert len(sink.to(workflow_id)) == 1, "the pod's way out went out before it went"
    assert watcher.holding() == 1

    watcher._apply(WatchItem(PODS, "DELETED", [deleted], "6"))
    await watcher._flush()
    assert [len(summary.pods) for summary in sink.to(workflow_id)] == [1, 0]
    assert watcher.holding() == 0
    sink.assert_no_repeats()
