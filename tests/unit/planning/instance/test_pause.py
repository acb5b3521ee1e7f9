"""What a pause lets one Instance do (spec reference §5, §9): table tests of the pure rules."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from models.inferenceservice import ComponentSpec
from models.instance import InstancePauseMode, InstancePhase, InstanceSpec, RestartPolicy
from planning.instance.health import HOLD_PAUSED
from planning.instance.pause import (
    PodFailureAction,
    hold_update,
    instances_to_tell,
    on_pod_failure,
    pending_may_rebuild,
    readiness_holds,
    repairs_allowed,
    retry_timers_run,
    surge_may_drain,
)
from planning.instance.rules import ReadinessClock
from planning.instance.state import InstanceState, build_status
from planning.replica.budget import update_policy
from planning.replica.template import ClusterLifecycle, InstanceIdentity, instance_spec

pytestmark = pytest.mark.unit

P = InstancePhase
RECREATE = RestartPolicy.RECREATE_INSTANCE_ON_POD_RESTART
NONE = RestartPolicy.NONE
T0 = datetime(2026, 1, 1, tzinfo=UTC)

# (mode, updates held, surge may drain, repairs, Pending rebuilt, clock holds)
DEPTHS: list[tuple[InstancePauseMode | None, bool, bool, bool, bool, list[str]]] = [
    (None, False, True, True, True, []),
    ("Recover", True, False, True, False, [HOLD_PAUSED]),
    ("Freeze", True, False, False, False, [HOLD_PAUSED]),
]


@pytest.mark.parametrize(("mode", "held", "drain", "repairs", "rebuild", "holds"), DEPTHS)
def test_what_each_depth_allows(
    mode: InstancePauseMode | None, held: bool, drain: bool, repairs: bool, rebuild: bool, holds: list[str]
) -> None:
    assert hold_update(mode) is held
    assert surge_may_drain(mode) is drain
    assert repairs_allowed(mode) is repairs
    assert pending_may_rebuild(mode) is rebuild
    assert readiness_holds(mode) == holds


@pytest.mark.parametrize(
    ("name", "mode", "policy", "lost_all", "action"),
    [
        ("unpaused multi-pod restarts", None, RECREATE, False, PodFailureAction.RESTART),
        ("recover multi-pod restarts (repair goes on)", "Recover", RECREATE, False, PodFailureAction.RESTART),
        ("recover, all pods lost, restarts", "Recover", RECREATE, True, PodFailureAction.RESTART),
        ("freeze multi-pod waits", "Freeze", RECREATE, False, PodFailureAction.WAIT),
        ("freeze, all pods lost, waits", "Freeze", RECREATE, True, PodFailureAction.WAIT),
        ("policy None, container restart left to the kubelet", None, NONE, False, PodFailureAction.KUBELET),
        (
            "policy None, kubelet restart proceeds when frozen",
            "Freeze",
            NONE,
            False,
            PodFailureAction.KUBELET,
        ),
        ("policy None, lost unpaused goes Pending", None, NONE, True, PodFailureAction.PENDING),
        ("policy None, lost at recover goes Pending", "Recover", NONE, True, PodFailureAction.PENDING),
        ("policy None, lost when frozen goes Pending", "Freeze", NONE, True, PodFailureAction.PENDING),
    ],
)
def test_pod_failure_of_a_ready_instance(
    name: str, mode: InstancePauseMode | None, policy: RestartPolicy, lost_all: bool, action: PodFailureAction
) -> None:
    assert on_pod_failure(mode, policy, lost_all) == action, name


@pytest.mark.parametrize(
    ("mode", "phase", "runs"),
    [
        (None, P.FAILED, True),
        ("Recover", P.FAILED, True),
        ("Freeze", P.FAILED, False),
        (None, P.READY, True),
        ("Recover", P.READY, False),
        ("Freeze", P.READY, False),
        ("Recover", P.PENDING, False),
        (None, P.PENDING, True),
    ],
)
def test_retry_timers_wake_only_what_may_act(
    mode: InstancePauseMode | None, phase: InstancePhase, runs: bool
) -> None:
    assert retry_timers_run(mode, phase) is runs


def test_pause_stops_the_readiness_clock_and_resume_grants_a_full_window() -> None:
    timeout = 1800.0
    clock = ReadinessClock(T0).observe(readiness_holds(None), T0)
    assert clock.deadline(timeout) == T0 + timedelta(seconds=timeout)
    # 25 minutes in, a pause: no deadline while it lasts, however long.
    paused_at = T0 + timedelta(minutes=25)
    clock = clock.observe(readiness_holds("Recover"), paused_at)
    assert clock.hold == HOLD_PAUSED and clock.deadline(timeout) is None
    clock = clock.observe(readiness_holds("Recover"), paused_at + timedelta(hours=3))
    assert clock.deadline(timeout) is None
    # Resume: the whole 30 minutes again from the moment of resume, not the 5 that were left.
    resumed_at = paused_at + timedelta(hours=4)
    clock = clock.observe(readiness_holds(None), resumed_at)
    assert clock.hold is None and clock.deadline(timeout) == resumed_at + timedelta(seconds=timeout)


def test_pause_hold_comes_first_so_the_operation_waits_paused() -> None:
    clock = ReadinessClock(T0).observe(readiness_holds("Freeze") + ["Unschedulable"], T0)
    assert clock.hold == HOLD_PAUSED


@pytest.mark.parametrize(
    ("told", "mode", "indexes", "removing", "expected"),
    [
        (None, None, [0, 1], [], []),
        (None, "Recover", [1, 0], [], [0, 1]),
        ("Recover", "Recover", [0, 1], [], []),
        ("Recover", "Freeze", [0, 1, 2], [2], [0, 1]),
        ("Freeze", None, [3, 0, 3], [], [0, 3]),
        (None, "Freeze", [], [], []),
    ],
)
def test_instances_to_tell(
    told: InstancePauseMode | None,
    mode: InstancePauseMode | None,
    indexes: list[int],
    removing: list[int],
    expected: list[int],
) -> None:
    assert instances_to_tell(told, mode, indexes, removing) == expected


def _spec(pause_mode: InstancePauseMode | None = None) -> InstanceSpec:
    engine = ComponentSpec.model_validate({"runner": {"name": "engine", "image": "sglang:1"}})
    identity = InstanceIdentity("prod", "chat", "engine", 0, "abc", "chat-engine-abc", pause_mode=pause_mode)
    cluster = ClusterLifecycle()
    return instance_spec(identity, engine, cluster, update_policy(engine.lifecycle, cluster.update_policy))


@pytest.mark.parametrize("mode", [None, "Recover", "Freeze"])
def test_a_new_instance_learns_the_pause_from_its_spec(mode: InstancePauseMode | None) -> None:
    assert _spec(mode).pause_mode == mode


def test_pause_and_a_held_update_survive_continue_as_new() -> None:
    state = InstanceState(
        spec=_spec(), pause_mode="Freeze", paused_update=_spec().model_copy(update={"revision": "b"})
    )
    again = InstanceState.model_validate_json(state.model_dump_json())
    assert again == state and again.pause_mode == "Freeze"
    assert again.paused_update is not None and again.paused_update.revision == "b"
    # A state carried from before pauses existed loads unpaused.
    legacy = state.model_dump(mode="json", exclude={"pause_mode", "paused_update"})
    assert InstanceState.model_validate(legacy).pause_mode is None


def test_status_shows_the_pause() -> None:
    assert build_status(InstanceState(spec=_spec(), pause_mode="Recover"), T0).pause_mode == "Recover"
