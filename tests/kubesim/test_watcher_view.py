"""The pod watcher's view alone, fed watch events by hand (no cluster, no Temporal): what it
holds back and for how long, and what a new leader sends after a hand-over (`PodWatcher.lead`,
the Lease's delivered mark and held list). `test_watcher.py` runs the watcher against kubesim."""

from __future__ import annotations

import asyncio
import copy
import functools
from typing import Any

import kubernetes.client
import pytest

from planning.leadership import held_keys, held_text
from tests.kubesim.activity_objects import instance_pod
from tests.recording_sink import RecordingSink
from workers.watch.pods import NODES, PODS, SLICES, PodWatcher
from workers.watch.stream import WatchItem
from workers.watcher import DELIVERED_ANNOTATION, HELD_ANNOTATION, delivered_mark, handover_annotations

pytestmark = pytest.mark.kubesim


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


def _a_pod_added_to_an_empty_view() -> tuple[RecordingSink, PodWatcher, dict[str, Any]]:
    """A view that listed no pods and no nodes (resourceVersion 2), then saw Instance 0's pod
    created (3); its progress is held back 30 s."""
    sink = RecordingSink()
    watcher = PodWatcher(kubernetes.client.ApiClient(), sink, watch_endpoints=False, settle_seconds=30)
    watcher._apply(WatchItem(NODES, "RESYNC", [], "2"))
    watcher._apply(WatchItem(PODS, "RESYNC", [], "2"))
    pod = instance_pod("ns")
    pod["metadata"]["resourceVersion"] = "3"
    watcher._apply(WatchItem(PODS, "ADDED", [pod], "3"))
    return sink, watcher, pod


async def test_a_pod_gone_while_its_first_summary_was_held_is_reported_gone() -> None:
    """Review finding: the Instance must hear that the pod it created went, although the only
    summary that showed the pod was held back and never sent; a new lead holds afresh."""
    sink, watcher, pod = _a_pod_added_to_an_empty_view()
    key, workflow_id = ("ns", "chat", "engine", 0), "instance/ns/chat-engine-0"
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


async def test_a_pod_that_came_and_went_between_two_passes_is_reported_gone() -> None:
    """Found by a workflow test under load: an Instance told to delete while its pod's creation
    was in flight deletes the pod at once (an unscheduled pod goes without grace). Both events
    reach the watcher before its next pass, which found no pods for an Instance it had told
    nothing and sent nothing, and the Instance waited in `DeletePods` for its five-minute
    re-list. It hears that the pod went."""
    sink, watcher, pod = _a_pod_added_to_an_empty_view()
    key, workflow_id = ("ns", "chat", "engine", 0), "instance/ns/chat-engine-0"
    watcher._apply(WatchItem(PODS, "DELETED", [pod], "4"))
    await watcher._flush()
    (gone,) = sink.to(workflow_id)
    assert gone.pods == () and key not in watcher._dirty
    await watcher._flush()
    assert len(sink.to(workflow_id)) == 1, "told once"
    # A pod first seen in a re-list (created while the stream was cut, after a 410) and gone
    # before the next pass: its Instance hears it went, once.
    other = instance_pod("ns", index=1)
    other["metadata"]["resourceVersion"] = "5"
    watcher._apply(WatchItem(PODS, "RESYNC", [other], "5"))
    watcher._apply(WatchItem(PODS, "DELETED", [other], "6"))
    await watcher._flush()
    await watcher._flush()
    (gone,) = sink.to("instance/ns/chat-engine-1")
    assert gone.pods == ()


async def test_a_relist_owes_only_what_changed_and_a_standby_owes_nothing() -> None:
    """A re-list's pods count as seen (owed a summary even if gone by the next pass) only where
    they are new or changed since the view's last look; a standby owes nothing, since `lead`
    counts such a pod changed."""
    _, watcher, pod = _a_pod_added_to_an_empty_view()
    await watcher._flush()
    watcher._owed.clear()  # as if told; held back only by the settle time
    watcher._apply(WatchItem(PODS, "RESYNC", [pod], "4"))
    assert watcher._owed == set(), "listed unchanged"
    moved = copy.deepcopy(pod)
    moved["metadata"]["resourceVersion"] = "5"
    watcher._apply(WatchItem(PODS, "RESYNC", [moved], "5"))
    assert watcher._owed == {("ns", "chat", "engine", 0)}, "changed while not watched"
    standby = PodWatcher(kubernetes.client.ApiClient(), RecordingSink(), watch_endpoints=False)
    await standby.follow()
    standby._apply(WatchItem(NODES, "RESYNC", [], "1"))
    standby._apply(WatchItem(PODS, "RESYNC", [instance_pod("ns", index=3)], "2"))
    assert standby._owed == set()


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


def instance_slice(namespace: str, index: int, listed: list[str], version: str) -> dict[str, Any]:
    """The EndpointSlice of Instance `index`'s headless Service, listing `listed` pods as ready."""
    pod = instance_pod(namespace, index=index)
    return {
        "metadata": {
            "name": f"chat-engine-{index}-abcde",
            "namespace": namespace,
            "resourceVersion": version,
            "labels": {**{k: v for k, v in pod["metadata"]["labels"].items() if k != "ome.io/role"}},
        },
        "endpoints": [
            {"targetRef": {"kind": "Pod", "name": name, "namespace": namespace}, "conditions": {"ready": True}}
            for name in listed
        ],
    }


async def test_each_instance_reads_its_own_slices_as_they_come_and_go() -> None:
    """Issue 17: a flush reads the slices of the Instances it summarizes (an index by Instance,
    kept by every event and re-list), not every Instance's: each Instance has one, so reading
    them all made a flush cost as much as the fleet."""
    watcher = PodWatcher(kubernetes.client.ApiClient(), RecordingSink(), watch_endpoints=True)
    pods = [instance_pod("ns", index=index) for index in range(3)]
    names = [pod["metadata"]["name"] for pod in pods]
    watcher._apply(WatchItem(NODES, "RESYNC", [], "1"))
    watcher._apply(WatchItem(PODS, "RESYNC", pods, "1"))
    watcher._apply(WatchItem(SLICES, "RESYNC", [instance_slice("ns", 0, [names[0]], "1")], "1"))
    keys = {("ns", "chat", "engine", index) for index in range(3)}

    def listed() -> dict[int, tuple[str, ...] | None]:
        return {key[3]: summary.endpoints_listed for key, summary in watcher.summaries(keys).items()}

    assert listed() == {0: (names[0],), 1: None, 2: None}
    watcher._apply(WatchItem(SLICES, "ADDED", [instance_slice("ns", 1, [], "2")], "2"))
    watcher._apply(WatchItem(SLICES, "MODIFIED", [instance_slice("ns", 1, [names[1]], "3")], "3"))
    assert listed() == {0: (names[0],), 1: (names[1],), 2: None}
    watcher._apply(WatchItem(SLICES, "DELETED", [instance_slice("ns", 0, [names[0]], "4")], "4"))
    assert listed() == {0: None, 1: (names[1],), 2: None}
    # A re-list replaces them all.
    watcher._apply(WatchItem(SLICES, "RESYNC", [instance_slice("ns", 2, [names[2]], "5")], "5"))
    assert listed() == {0: None, 1: None, 2: (names[2],)}
