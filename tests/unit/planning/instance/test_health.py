"""Readiness levels, failure classification, holds and losses of an Instance's pods."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from models.instance import InstanceSpec
from models.pods import ContainerSummary, PodSummary
from planning.instance.health import (
    HOLD_NODE_UNKNOWN,
    HOLD_QUOTA,
    HOLD_UNSCHEDULABLE,
    assess_bring_up,
    assess_ready,
    is_counting,
    levels,
    pods_on_dead_nodes,
)

pytestmark = pytest.mark.unit

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def pod(name: str = "p-0", uid: str = "u0", **fields: Any) -> PodSummary:
    values: dict[str, Any] = {
        "name": name,
        "uid": uid,
        "scheduled": True,
        "node_name": "n1",
        "node_ready": "True",
    }
    values.update(fields)
    return PodSummary(**values)


def ready(
    name: str = "p-0", uid: str = "u0", since: float = 0.0, serving: bool = True, **fields: Any
) -> PodSummary:
    return pod(
        name,
        uid,
        phase="Running",
        containers_ready=True,
        ready=serving,
        ready_since=at(since),
        serving="True" if serving else None,
        pod_ip="10.0.0.1",
        **fields,
    )


def waiting(reason: str, name: str = "p-0", uid: str = "u0") -> PodSummary:
    return pod(
        name, uid, containers=(ContainerSummary(name="engine", state="waiting", waiting_reason=reason),)
    )


SPEC = InstanceSpec(
    namespace="ns", isvc="chat", component="engine", index=0, revision="r1", leader_pod_spec={}
)


@pytest.mark.parametrize(
    ("reason", "counting"),
    [
        ("ImagePullBackOff", True),
        ("ErrImagePull", True),
        ("InvalidImageName", True),
        ("CreateContainerConfigError", True),
        ("InvalidPodSpec", True),
        ("CrashLoopBackOff", False),
        ("DeadlineExceeded", False),
        ("Unschedulable", False),
        ("RunContainerError", False),
    ],
)
def test_counting_reasons(reason: str, counting: bool) -> None:
    assert is_counting(reason) is counting


class TestLevels:
    def test_ready_serving_available(self) -> None:
        pods = [ready("a", "1"), ready("b", "2", serving=False)]
        counts = levels(pods, ["a", "b"], 2, 0.0, at(10))
        assert (counts.ready_pods, counts.serving_pods, counts.available_pods) == (2, 1, 1)
        assert counts.ready and not counts.serving and not counts.available

    def test_min_ready_seconds_delays_available(self) -> None:
        counts = levels([ready(since=5)], ["p-0"], 1, 30.0, at(20))
        assert counts.serving and not counts.available
        assert counts.next_available_at == at(35)
        assert levels([ready(since=5)], ["p-0"], 1, 30.0, at(35)).available

    def test_not_listed_on_headless_service_is_not_available(self) -> None:
        counts = levels([ready()], ["p-0"], 1, 0.0, at(1), endpoints_listed=())
        assert counts.serving and not counts.available
        assert levels([ready()], ["p-0"], 1, 0.0, at(1), endpoints_listed=("p-0",)).available

    def test_terminating_pod_is_not_ready(self) -> None:
        counts = levels([ready(terminating=True)], ["p-0"], 1, 0.0, at(1))
        assert counts.ready_pods == 0 and counts.total == 0

    def test_only_members_count(self) -> None:
        counts = levels([ready("old-0"), ready("new-0")], ["new-0"], 1, 0.0, at(1))
        assert counts.ready_pods == 1 and counts.total == 2

    def test_earlier_incarnation_with_the_same_name_does_not_count(self) -> None:
        stale = [ready("a", "old-uid")]
        assert levels(stale, {"a": "new-uid"}, 1, 0.0, at(1)).ready_pods == 0
        assert levels(stale, {"a": ""}, 1, 0.0, at(1)).ready_pods == 1
        assert levels([ready("a", "new-uid")], {"a": "new-uid"}, 1, 0.0, at(1)).serving

    def test_ready_since_is_latest_member(self) -> None:
        counts = levels([ready("a", "1", since=3), ready("b", "2", since=9)], ["a", "b"], 2, 0.0, at(10))
        assert counts.ready_since == at(9)
        assert levels([ready("a", "1")], ["a", "b"], 2, 0.0, at(10)).ready_since is None


class TestBringUp:
    def test_stuck_pull_fails_only_after_grace_and_counts(self) -> None:
        first = assess_bring_up(SPEC, [waiting("ErrImagePull")], {"p-0": "u0"}, {}, at(0), at(10))
        assert first.failure is None and first.wake_at == at(70)
        later = assess_bring_up(
            SPEC, [waiting("ErrImagePull")], {"p-0": "u0"}, first.first_seen, at(0), at(70)
        )
        assert later.failure is not None
        assert later.failure.reason == "ErrImagePull" and later.failure.counting
        assert later.failure.pod_name == "p-0" and later.failure.container_name == "engine"

    def test_crash_loop_fails_without_counting_and_keeps_exit_code(self) -> None:
        looping = pod(
            containers=(
                ContainerSummary(
                    name="engine",
                    state="waiting",
                    waiting_reason="CrashLoopBackOff",
                    last_terminated_exit_code=137,
                ),
            )
        )
        seen = {"p-0/engine/CrashLoopBackOff": at(0)}
        check = assess_bring_up(SPEC, [looping], {"p-0": "u0"}, seen, at(0), at(61))
        assert check.failure is not None and not check.failure.counting and check.failure.exit_code == 137

    def test_counting_failure_preferred(self) -> None:
        pods = [waiting("CrashLoopBackOff", "a", "1"), waiting("ImagePullBackOff", "b", "2")]
        seen = {"a/engine/CrashLoopBackOff": at(0), "b/engine/ImagePullBackOff": at(0)}
        check = assess_bring_up(SPEC, pods, {"a": "1", "b": "2"}, seen, at(0), at(100))
        assert check.failure is not None and check.failure.reason == "ImagePullBackOff"

    def test_failure_seen_before_the_attempt_is_ignored(self) -> None:
        seen = {"p-0/engine/ErrImagePull": at(-500)}
        check = assess_bring_up(SPEC, [waiting("ErrImagePull")], {"p-0": "u0"}, seen, at(0), at(30))
        assert check.failure is None

    def test_pod_of_an_earlier_attempt_is_not_ours(self) -> None:
        # Its failure is not this attempt's; and our own pod of that name is gone.
        check = assess_bring_up(
            SPEC, [waiting("ErrImagePull", uid="old")], {"p-0": "new"}, {}, at(0), at(500)
        )
        assert check.failure is None and check.missing == ["p-0"]

    def test_predecessor_holding_the_name(self) -> None:
        going = pod(uid="old", terminating=True)
        assert assess_bring_up(SPEC, [going], {"p-0": ""}, {}, at(0), at(1)).holds == []
        stuck = pod(uid="old", terminating=True, node_ready="Unknown")
        check = assess_bring_up(SPEC, [stuck], {"p-0": ""}, {}, at(0), at(1))
        assert check.holds == [HOLD_NODE_UNKNOWN] and check.missing == []

    def test_our_terminating_pod_is_missing(self) -> None:
        check = assess_bring_up(SPEC, [pod(terminating=True)], {"p-0": "u0"}, {}, at(0), at(1))
        assert check.missing == ["p-0"]

    def test_no_stuck_grace_means_only_the_deadline(self) -> None:
        no_grace = SPEC.model_copy(update={"stuck_pod_grace_seconds": None})
        seen = {"p-0/engine/ErrImagePull": at(0)}
        assert (
            assess_bring_up(no_grace, [waiting("ErrImagePull")], {"p-0": "u0"}, seen, at(0), at(900)).failure
            is None
        )

    def test_unschedulable_holds_then_fails_after_grace(self) -> None:
        pending = pod(
            scheduled=False,
            node_name=None,
            unschedulable_reason="Unschedulable",
            unschedulable_message="0/3 nodes",
        )
        early = assess_bring_up(SPEC, [pending], {"p-0": "u0"}, {}, at(0), at(60))
        assert early.holds == [HOLD_UNSCHEDULABLE] and early.failure is None and early.wake_at == at(960)
        late = assess_bring_up(SPEC, [pending], {"p-0": "u0"}, early.first_seen, at(0), at(960))
        assert (
            late.failure is not None and late.failure.reason == "Unschedulable" and not late.failure.counting
        )

    def test_kueue_gate_is_a_quota_hold(self) -> None:
        gated = pod(scheduled=False, node_name=None, scheduling_gated=True)
        assert assess_bring_up(SPEC, [gated], {"p-0": "u0"}, {}, at(0), at(1)).holds == [HOLD_QUOTA]

    def test_unknown_node_is_a_hold(self) -> None:
        lost = pod(node_ready="Unknown")
        assert assess_bring_up(SPEC, [lost], {"p-0": "u0"}, {}, at(0), at(1)).holds == [HOLD_NODE_UNKNOWN]

    def test_terminal_pod_is_recycled_and_deleted_pod_recreated(self) -> None:
        done = pod(phase="Failed")
        check = assess_bring_up(SPEC, [done], {"p-0": "u0", "p-1": "u1"}, {}, at(0), at(1))
        assert check.recycle == ["p-0"] and check.missing == ["p-1"]

    def test_not_yet_created_pod_is_not_missing(self) -> None:
        assert assess_bring_up(SPEC, [], {"p-0": ""}, {}, at(0), at(1)).missing == []


class TestReady:
    members = {"l-0": "1", "w-0": "2"}

    def test_healthy(self) -> None:
        check = assess_ready([ready("l-0", "1"), ready("w-0", "2")], self.members, {}, at(1))
        assert check.failed_pods == [] and check.failure is None

    def test_deleted_worker(self) -> None:
        check = assess_ready([ready("l-0", "1")], self.members, {}, at(1))
        assert check.failed_pods == ["w-0"] and not check.lost_all
        assert check.failure is not None and check.failure.reason == "PodDeleted"

    def test_replaced_pod_counts_as_deleted(self) -> None:
        check = assess_ready([ready("l-0", "1"), ready("w-0", "other")], self.members, {}, at(1))
        assert check.failed_pods == ["w-0"]

    def test_container_restart(self) -> None:
        restarted = ready(
            "w-0",
            "2",
            restart_count=1,
            containers=(
                ContainerSummary(
                    name="engine",
                    restart_count=1,
                    last_terminated_reason="Error",
                    last_terminated_exit_code=1,
                ),
            ),
        )
        check = assess_ready([ready("l-0", "1"), restarted], self.members, {"w-0": 0}, at(1))
        assert check.failure is not None and check.failure.reason == "Error" and check.failure.exit_code == 1
        assert assess_ready([ready("l-0", "1"), restarted], self.members, {"w-0": 1}, at(1)).failed_pods == []

    def test_node_lost_everywhere_is_lost_all(self) -> None:
        pods = [ready("l-0", "1", node_ready="Unknown"), ready("w-0", "2", node_missing=True)]
        check = assess_ready(pods, self.members, {}, at(1))
        assert check.lost_all and check.failed_pods == ["l-0", "w-0"]
        assert check.failure is not None and check.failure.reason == "NodeLost"

    def test_terminal_pod(self) -> None:
        check = assess_ready(
            [ready("l-0", "1"), pod("w-0", "2", phase="Failed", pod_reason="Evicted")],
            self.members,
            {},
            at(1),
        )
        assert check.failure is not None and check.failure.reason == "Evicted"


def test_dead_node_terminating_pods_without_finalizers() -> None:
    pods = [
        pod("a", terminating=True, node_ready="Unknown"),
        pod("b", terminating=True, node_ready="Unknown", finalizers=("x",)),
        pod("c", terminating=True),
        pod("d", node_ready="Unknown"),
    ]
    assert [p.name for p in pods_on_dead_nodes(pods)] == ["a"]
