"""kube-scheduler's back-off in kubesim: a pod that fits nowhere is tried again after a cluster
event that could help, and not before its back-off (1 s doubling to 10 s) has passed; with no
event, after 5 minutes. The bookkeeping alone, then a cluster whose pods come and go fast
around a pending pod."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from kubesim.handle import KubeSim
from kubesim.scheduler.backoff import SchedulingBackoff, backoff_seconds
from kubesim.timing import Timing
from tests.kubesim.helpers import Clients, clients, condition, pod_body, wait_for, wait_pod


@pytest.mark.parametrize(("failures", "seconds"), [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (5, 10.0), (12, 10.0)])
def test_back_off_doubles_from_one_second_to_ten(failures: int, seconds: float) -> None:
    assert backoff_seconds(failures) == seconds


def test_a_new_pod_is_tried_at_once() -> None:
    assert SchedulingBackoff(lambda s: s).wait("new", now=100.0) == 0.0


def test_a_failed_pod_waits_for_an_event_or_five_minutes() -> None:
    backoff = SchedulingBackoff(lambda s: s)
    backoff.failed("p", now=100.0)
    assert backoff.wait("p", now=101.0) == 299.0  # parked: no event has come
    assert backoff.wait("p", now=400.0) == 0.0  # the unschedulable queue's 5-minute flush


# (failures so far, seconds after the last failure when an event comes and it is asked,
#  seconds it must still wait)
EVENT_CASES = [
    (1, 0.2, 0.8),  # one failure: 1 s from the failure, not from the event
    (1, 1.5, 0.0),  # back-off already over when the event comes: at once
    (2, 0.5, 1.5),
    (3, 0.0, 4.0),
    (6, 3.0, 7.0),  # capped at 10 s
]


@pytest.mark.parametrize(("failures", "after", "left"), EVENT_CASES)
def test_after_an_event_the_pod_waits_out_its_back_off(failures: int, after: float, left: float) -> None:
    backoff = SchedulingBackoff(lambda s: s)
    for attempt in range(failures):
        backoff.failed("p", now=float(attempt))
    last = float(failures - 1)
    backoff.cluster_changed()
    assert backoff.wait("p", now=last + after) == pytest.approx(left)


def test_a_pending_pods_own_change_moves_it_alone() -> None:
    backoff = SchedulingBackoff(lambda s: s)
    backoff.failed("changed", now=0.0)
    backoff.failed("other", now=0.0)
    backoff.moved("changed")
    assert backoff.wait("changed", now=0.5) == pytest.approx(0.5)  # its back-off, not 5 minutes
    assert backoff.wait("other", now=0.5) == pytest.approx(299.5)
    backoff.moved("never-failed")  # a pod not backing off: nothing to move
    assert backoff.wait("never-failed", now=0.5) == 0.0


def test_the_time_factor_scales_every_wait() -> None:
    backoff = SchedulingBackoff(lambda s: s * 0.01)
    backoff.failed("p", now=0.0)
    assert backoff.wait("p", now=0.0) == pytest.approx(3.0)  # 5 minutes x 0.01
    backoff.cluster_changed()
    assert backoff.wait("p", now=0.0) == pytest.approx(0.01)


def test_a_placed_or_gone_pod_starts_again_without_back_off() -> None:
    backoff = SchedulingBackoff(lambda s: s)
    for uid in ("placed", "gone", "still"):
        backoff.failed(uid, now=0.0)
    backoff.forget("placed")
    backoff.keep_only({"placed", "still"})
    assert backoff.wait("placed", now=0.0) == backoff.wait("gone", now=0.0) == 0.0
    assert backoff.failures("still") == 1 and backoff.failures("gone") == 0


# --- in a cluster -----------------------------------------------------------------------

FACTOR = 0.05  # back-off 50 ms doubling to 0.5 s; the 5-minute flush 15 s


@pytest.fixture
def one_node() -> Iterator[Clients]:
    """One node of 8 GPUs, so one pod of 8 fills it."""
    timing = Timing(pull_seconds=0.02, start_seconds=0.02, ready_seconds=0.02, factor=FACTOR)
    with KubeSim(topology="zones=1,nodes-per-zone=1,gpus=8", timing=timing) as sim:
        yield from clients(sim)


def _failed_attempts(k8s: Clients, name: str) -> int:
    events = k8s.core.list_namespaced_event(
        k8s.namespace, field_selector=f"involvedObject.name={name},reason=FailedScheduling").items
    return int(events[0].count or 0) if events else 0


def test_pods_leaving_fast_cost_a_pending_pod_few_attempts(one_node: Clients) -> None:
    k8s, ns = one_node, one_node.namespace
    k8s.core.create_namespaced_pod(ns, pod_body("blocker", gpus=8))
    wait_pod(k8s, "blocker", lambda p: p.spec.node_name, what="blocker placed")
    k8s.core.create_namespaced_pod(ns, pod_body("waiting", gpus=8))
    wait_for(lambda: _failed_attempts(k8s, "waiting") == 1, what="first failed attempt")
    # 30 pods of another scheduler leave one after another: each is an event that could help.
    for index in range(30):
        k8s.core.create_namespaced_pod(ns, pod_body(f"other-{index}", schedulerName="absent-scheduler"))
    began = time.monotonic()
    for index in range(30):
        k8s.core.delete_namespaced_pod(f"other-{index}", ns)
    took = time.monotonic() - began
    time.sleep(2 * backoff_seconds(99) * FACTOR)  # every attempt the deletions earned is made
    # Without back-off nearly every deletion was an attempt (12 counted here). With it: the
    # first attempt, one at the first deletion (its 1 s back-off long over), those whose
    # doubling back-off fits in the time the deletions took, and one after the last of them.
    # Counted from how long they took, so a slow machine cannot fail it.
    fitting = sum(1 for n in range(2, 32) if FACTOR * sum(map(backoff_seconds, range(2, n + 1))) <= took)
    attempts = _failed_attempts(k8s, "waiting")
    assert 2 <= attempts <= fitting + 3, f"{attempts} attempts for 30 deletions in {took:.2f} s"
    # The room it waits for: placed within its back-off (at most 0.5 s here) of the blocker leaving.
    k8s.core.delete_namespaced_pod("blocker", ns)
    pod = wait_pod(k8s, "waiting", lambda p: p.spec.node_name, what="waiting pod placed")
    assert condition(pod, "PodScheduled").status == "True"
