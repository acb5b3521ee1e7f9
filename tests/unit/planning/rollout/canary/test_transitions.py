"""Transitions while running: capacity loss, ready timeouts, newer revisions, rollback, pause,
retry (§1.4 step 4, §1.5, §1.6, §3.1, §5)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from planning.rollout.canary import texts
from planning.rollout.canary.state import CanaryState, Failure
from tests.unit.planning.rollout.canary.rows import (
    CANARY,
    MANUAL_THEN_FULL,
    STABLE,
    at,
    canary_of,
    entered,
    fresh,
    go,
    observe,
    ready_for,
    with_promote,
    with_retry,
    with_rollback,
)

pytestmark = pytest.mark.unit

TIMED = canary_of(
    {"capacity": "50%", "traffic": 20, "pause": {"duration": "10m"}}, {"capacity": "100%", "traffic": 100}
)
READY = ready_for(TIMED, 0)
SHORT = {"engine": 1, "decoder": 1}
NEWER = {"engine": "e3", "decoder": "d3"}


# --- capacity loss after serving (§1.4 step 4) -----------------------------------


def test_capacity_loss_keeps_step_phase_and_traffic_and_starts_a_capacity_wait() -> None:
    dip = go(TIMED, entered(TIMED, 0, at(0)), observe(SHORT), 100)
    assert (dip.state.current_step, dip.state.phase, dip.traffic_weight) == (0, "Canarying", 20)
    assert dip.state.capacity_wait_since == at(100)
    assert [e.reason for e in dip.events] == [texts.CAPACITY_LOST]
    assert dip.wake_at == at(100 + 900)
    back = go(TIMED, dip.state, observe(READY), 200)
    assert back.state.capacity_wait_since is None
    assert [e.reason for e in back.events] == [texts.CAPACITY_RECOVERED]
    # The timed gate's clock kept running through the dip.
    assert go(TIMED, back.state, observe(READY), 600).state.current_step == 1


@pytest.mark.parametrize(
    "dips, checked_at, phase",
    [
        ([(100, 200)], 1099, "Canarying"),
        ([(100, None)], 999, "Canarying"),
        ([(100, None)], 1000, "Failed"),
        ([(100, 200), (500, None)], 1300, "Canarying"),
        ([(100, 200), (500, None)], 1400, "Failed"),
    ],
    ids=[
        "recovered dip",
        "dip within budget",
        "dip past the timeout",
        "a later dip has a fresh budget",
        "fresh budget used up",
    ],
)
def test_capacity_timeout_counts_from_each_dip(
    dips: list[tuple[float, float | None]], checked_at: float, phase: str
) -> None:
    long = canary_of(
        {"capacity": "50%", "traffic": 20, "pause": {"duration": "3h"}}, {"capacity": "100%", "traffic": 100}
    )
    state = entered(long, 0, at(0))
    for lost, recovered in dips:
        state = go(long, state, observe(SHORT), lost).state
        if recovered is not None:
            state = go(long, state, observe(READY), recovered).state
    final = go(long, state, observe(SHORT), checked_at).state
    assert final.phase == phase
    if phase == "Failed":
        assert final.failed == Failure("CapacityTimeout", at(checked_at))
        assert final.observed_traffic_weight == 20  # traffic kept


def test_pending_capacity_timeout_fails_and_the_failed_hold_keeps_instances_and_its_time() -> None:
    failed = go(TIMED, fresh(), observe(SHORT), 900)
    assert failed.state.failed == Failure("CapacityTimeout", at(900))
    assert {c: cap.count for c, cap in failed.capacities.items()} == {"engine": 2, "decoder": 1}
    held = go(TIMED, failed.state, observe(READY), 5000)
    assert held.state.phase == "Failed" and held.state.failed == Failure("CapacityTimeout", at(900))
    assert held.events == () and held.wake_at is None and held.sample is None


def test_no_timeout_when_none_is_set() -> None:
    assert go(TIMED, fresh(), observe(SHORT), 10**6, timeout=None).state.phase == "Pending"


# --- newer target revision (§1.5) ------------------------------------------------


@pytest.mark.parametrize(
    "state",
    [
        entered(TIMED, 1, at(0)),
        replace(entered(TIMED, 0, at(0)), phase="Failed", failed=Failure("CapacityTimeout", at(1))),
        replace(fresh(), analysis_failed_checks=1, mailbox=with_promote(fresh()).mailbox),
    ],
    ids=["mid-canary", "Failed hold is cleared", "counters and requests reset"],
)
def test_a_newer_target_restarts_at_step_one_with_the_same_stable(state: CanaryState) -> None:
    decision = go(TIMED, state, observe({}, targets=NEWER, run_id="run-8"), 50)
    new = decision.state
    assert (new.phase, new.current_step, new.failed, new.analysis_failed_checks) == ("Pending", 0, None, 0)
    assert dict(new.canary_revisions) == NEWER and dict(new.stable_revisions) == STABLE
    assert new.target_id == "run-8" and new.mailbox.promote is None
    assert new.capacity_wait_since == at(50)
    assert decision.events[0].reason == texts.RESTARTED


def test_after_completion_a_new_revision_canaries_against_the_completed_one() -> None:
    done = replace(fresh(), phase="Stable", current_step=2)
    new = go(TIMED, done, observe({}, targets=NEWER), 5).state
    assert dict(new.stable_revisions) == CANARY


# --- rollback (§1.5, §3.1) -------------------------------------------------------


def rolled_back(cause: str = "manual") -> CanaryState:
    state = with_rollback(entered(TIMED, 0, at(0))) if cause == "manual" else entered(TIMED, 0, at(0))
    if cause == "manual":
        return go(TIMED, state, observe(READY), 10).state
    return state


def test_rollback_records_zero_weight_at_once_then_rolled_back_when_stable_serves() -> None:
    start = go(TIMED, with_rollback(entered(TIMED, 0, at(0))), observe(READY), 10)
    assert (start.state.phase, start.traffic_weight, start.rollback_started) == ("RollingBack", 0, "manual")
    assert {c: (cap.limit, cap.rollback_to) for c, cap in start.capacities.items()} == {
        "engine": (0, "e1"),
        "decoder": (0, "d1"),
    }
    assert dict(start.state.rolled_back_revisions) == CANARY
    still = go(TIMED, start.state, observe({}, on_canary={"engine": 1}), 20)
    assert still.state.phase == "RollingBack" and still.outcome is None
    done = go(TIMED, still.state, observe({}, on_canary={}), 30)
    assert (done.state.phase, done.outcome) == ("RolledBack", "RolledBack")
    assert [(e.type, e.reason, e.message) for e in done.events] == [
        ("Normal", texts.RUN_CLOSED, "run run-7 closed: RolledBack")
    ]


@pytest.mark.parametrize(
    "targets, restarts",
    [(CANARY, False), (STABLE, False), ({"engine": "e1", "decoder": "d2"}, False), (NEWER, True)],
    ids=["the rejected revision", "the stable revision", "stable and rejected mixed", "a third revision"],
)
def test_after_rollback_the_component_stays_on_stable_until_another_revision(
    targets: dict[str, str], restarts: bool
) -> None:
    done = replace(rolled_back(), phase="RolledBack")
    decision = go(TIMED, done, observe({}, targets=targets, on_canary={}), 40)
    assert (decision.state.phase == "Pending") is restarts


@pytest.mark.parametrize("phase", ["Pending", "Canarying", "Paused", "Promoting", "Failed"])
def test_a_rollback_request_acts_in_every_rollback_phase(phase: str) -> None:
    state = replace(with_rollback(entered(TIMED, 0, at(0))), phase=phase)  # type: ignore[arg-type]
    assert go(TIMED, state, observe(READY), 5).state.phase == "RollingBack"


def test_a_rollback_without_the_stable_revision_fails_stable_revision_missing() -> None:
    decision = go(TIMED, with_rollback(entered(TIMED, 0, at(0))), observe(READY, retained=False), 10)
    assert decision.state.failed == Failure("StableRevisionMissing", at(10))
    assert decision.traffic_weight == 20  # Failed keeps traffic
    again = go(TIMED, decision.state, observe(READY, retained=False), 60)
    assert again.state.failed == Failure("StableRevisionMissing", at(10)) and again.events == ()


def test_a_spec_back_on_the_stable_revision_rolls_the_canary_back() -> None:
    decision = go(TIMED, entered(TIMED, 0, at(0)), observe(READY, targets=STABLE), 10)
    assert (decision.state.phase, decision.rollback_started) == ("RollingBack", "manual")


# --- global pause (§5) -------------------------------------------------------------


def test_pause_holds_the_step_and_a_promote_waits_until_resume() -> None:
    state = with_promote(entered(MANUAL_THEN_FULL, 0, at(0)))
    ready = ready_for(MANUAL_THEN_FULL, 0)
    held = go(MANUAL_THEN_FULL, state, observe(ready, paused=True), 10)
    assert held.state.current_step == 0 and held.state.mailbox.promote is not None
    assert held.wake_at is None
    resumed = go(MANUAL_THEN_FULL, held.state, observe(ready), 20)
    assert resumed.state.current_step == 1


def test_clocks_keep_running_through_a_pause_and_act_on_resume() -> None:
    held = go(TIMED, entered(TIMED, 0, at(0)), observe(READY, paused=True), 700)
    assert held.state.current_step == 0
    assert go(TIMED, held.state, observe(READY), 701).state.current_step == 1
    dip = go(TIMED, fresh(), observe(SHORT, paused=True), 1000)
    assert dip.state.phase == "Pending"  # the capacity timeout ran out during the pause
    assert go(TIMED, dip.state, observe(SHORT), 1001).state.failed == Failure("CapacityTimeout", at(1001))


def test_a_rollback_request_waits_while_paused() -> None:
    state = with_rollback(entered(TIMED, 0, at(0)))
    assert go(TIMED, state, observe(READY, paused=True), 10).state.phase == "Canarying"
    assert go(TIMED, state, observe(READY), 10).state.phase == "RollingBack"


def test_no_sample_while_paused() -> None:
    from tests.unit.planning.rollout.canary.rows import analysis

    canary = canary_of(
        {"capacity": "50%", "traffic": 20, "analysis": analysis()}, {"capacity": "100%", "traffic": 100}
    )
    assert go(canary, entered(canary, 0, at(0)), observe(READY, paused=True), 100).sample is None


# --- retry (§3.1) -----------------------------------------------------------------


@pytest.mark.parametrize(
    "phase, retries",
    [("Failed", True), ("RolledBack", True), ("RollingBack", False)],
    ids=["from Failed", "from RolledBack", "never restarts an in-progress rollback"],
)
def test_retry_restarts_from_step_one_with_fresh_counters(phase: str, retries: bool) -> None:
    state = replace(
        with_retry(with_rollback(entered(TIMED, 1, at(0)))),
        phase=phase,  # type: ignore[arg-type]
        failed=Failure("AnalysisStalled", at(1)) if phase == "Failed" else None,
        rolled_back_revisions=dict(CANARY) if phase != "Failed" else {},
        analysis_failed_checks=2,
        last_evaluation_time=at(1),
    )
    decision = go(TIMED, state, observe({}, on_canary={"engine": 1}), 30)
    if retries:
        new = decision.state
        assert (new.phase, new.current_step, new.failed, new.analysis_failed_checks) == (
            "Pending",
            0,
            None,
            0,
        )
        assert new.last_evaluation_time is None and new.mailbox.rollback is None
        assert dict(new.canary_revisions) == CANARY
        assert decision.events[0].reason == texts.RETRIED
    else:
        assert decision.state.phase == "RollingBack" and decision.state.mailbox.retry is not None


def test_retry_waits_while_paused() -> None:
    state = replace(
        with_retry(entered(TIMED, 0, at(0))), phase="Failed", failed=Failure("CapacityTimeout", at(1))
    )
    assert go(TIMED, state, observe(READY, paused=True), 5).state.phase == "Failed"
    assert go(TIMED, state, observe(READY), 5).state.phase == "Canarying"
