"""The Instance's status view and when its parent hears about a change."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from models.instance import InstancePhase, InstanceSpec
from models.pods import InstancePods, PodSummary
from planning.instance.reports import pods_held
from planning.instance.state import InstanceState, build_status, report_fingerprint

pytestmark = pytest.mark.unit
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def gang_state(**fields: object) -> InstanceState:
    spec = InstanceSpec(
        namespace="ns",
        isvc="chat",
        component="engine",
        index=3,
        revision="r2",
        leader_pod_spec={},
        worker_pod_spec={},
        worker_count=1,
    )
    return InstanceState(spec=spec, **fields)  # type: ignore[arg-type]


def serving_pod(name: str, uid: str) -> PodSummary:
    return PodSummary(
        name=name,
        uid=uid,
        phase="Running",
        containers_ready=True,
        ready=True,
        serving="True",
        pod_ip="10.0.0.2",
    )


def observed(*pods: PodSummary) -> InstancePods:
    return InstancePods(namespace="ns", isvc="chat", component="engine", index=3, pods=pods)


def test_status_counts_current_members() -> None:
    state = gang_state(
        phase=InstancePhase.READY,
        members={"chat-engine-3-leader-0": "a", "chat-engine-3-worker-0": "b"},
        running_revision="r1",
        pods=observed(serving_pod("chat-engine-3-leader-0", "a"), serving_pod("chat-engine-3-worker-0", "b")),
    )
    status = build_status(state, NOW)
    assert (status.desired_pods, status.total_pods, status.serving_pods, status.available_pods) == (
        2,
        2,
        2,
        2,
    )
    assert status.serving and status.available and status.ready
    assert status.running_revision == "r1" and status.target_revision == "r2"
    assert status.pod_names == ["chat-engine-3-leader-0", "chat-engine-3-worker-0"]


def test_half_a_gang_does_not_count() -> None:
    state = gang_state(
        members={"chat-engine-3-leader-0": "a", "chat-engine-3-worker-0": "b"},
        pods=observed(serving_pod("chat-engine-3-leader-0", "a")),
    )
    status = build_status(state, NOW)
    assert status.serving_pods == 1 and not status.serving


def test_draining_instance_is_not_serving() -> None:
    state = gang_state(
        draining=True,
        members={"chat-engine-3-leader-0": "a", "chat-engine-3-worker-0": "b"},
        pods=observed(serving_pod("chat-engine-3-leader-0", "a"), serving_pod("chat-engine-3-worker-0", "b")),
    )
    status = build_status(state, NOW)
    assert status.draining and not status.serving and not status.available


@pytest.mark.parametrize(
    ("deleted_uids", "total", "ready", "held"),
    [
        ([], 2, 2, 2),  # the delete not returned yet, or runs from before: as observed
        (["a"], 1, 1, 1),
        (["a", "b"], 0, 0, 1),  # all deleted: one pod of the scale-down budget, not two
        (["a-old"], 2, 2, 2),  # an earlier incarnation's uid: these pods are others
    ],
)
def test_pods_the_deletion_deleted_count_as_terminating(
    deleted_uids: list[str], total: int, ready: int, held: int
) -> None:
    state = gang_state(
        phase=InstancePhase.DELETING,
        members={"chat-engine-3-leader-0": "a", "chat-engine-3-worker-0": "b"},
        pods=observed(serving_pod("chat-engine-3-leader-0", "a"), serving_pod("chat-engine-3-worker-0", "b")),
        deleted_uids=deleted_uids,
    )
    status = build_status(state, NOW)
    assert (status.total_pods, status.ready_pods, pods_held(status)) == (total, ready, held)
    assert all(not pod.terminating for pod in state.pods.pods)  # type: ignore[union-attr]  # the observation kept


def test_fingerprint_ignores_time_but_not_counts_or_phase() -> None:
    state = gang_state()
    first = report_fingerprint(build_status(state, NOW))
    assert report_fingerprint(build_status(state, NOW.replace(hour=5))) == first
    state.phase = InstancePhase.FAILED
    assert report_fingerprint(build_status(state, NOW)) != first


def test_state_round_trips_for_continue_as_new() -> None:
    state = gang_state(members={"x": "1"}, incarnation=4, pods=observed(serving_pod("x", "1")))
    again = InstanceState.model_validate_json(state.model_dump_json())
    assert again == state
