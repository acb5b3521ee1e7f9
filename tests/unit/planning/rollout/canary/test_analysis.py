"""Sampling timeline and the consequences of a verdict (§2.4, §2.5, §1.6 stall)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from planning.rollout.canary import texts
from planning.rollout.canary.observation import Verdict
from planning.rollout.canary.state import CanaryState
from tests.unit.planning.rollout.canary.rows import (
    FULL,
    analysis,
    at,
    canary_of,
    entered,
    go,
    observe,
    ready_for,
    verdict,
    with_promote,
)

pytestmark = pytest.mark.unit



def analysis_canary(**options: object) -> object:
    return canary_of({"capacity": "25%", "traffic": 10, "analysis": analysis(**options)}, FULL)  # type: ignore[arg-type]


CANARY = canary_of({"capacity": "25%", "traffic": 10, "analysis": analysis(initial_delay="2m")}, FULL)
READY = ready_for(CANARY, 0)


@pytest.mark.parametrize(
    "seconds, last_evaluation, due",
    [(60, None, False), (120, None, True), (150, 100, False), (160, 100, True), (500, 100, True)],
    ids=[
        "during warm-up",
        "warm-up over",
        "throttled by lastEvaluationTime",
        "interval since the last",
        "overdue",
    ],
)
def test_a_sample_is_due_after_initial_delay_then_every_interval(
    seconds: float, last_evaluation: float | None, due: bool
) -> None:
    state = entered(
        CANARY, 0, at(0), last_evaluation_time=None if last_evaluation is None else at(last_evaluation)
    )
    decision = go(CANARY, state, observe(READY), seconds)
    assert (decision.sample is not None) is due
    if decision.sample is not None:
        assert decision.sample.sequence == decision.state.pending_sample == 1
        assert (decision.sample.step, decision.sample.canary_revision, decision.sample.stable_revision) == (
            0,
            "e2",
            "e1",
        )
        assert decision.next_sample_at is None  # one at a time
    else:
        expected = at(120) if last_evaluation is None else at(max(120, last_evaluation + 60))
        assert decision.next_sample_at == expected == decision.wake_at


@pytest.mark.parametrize(
    "delivered, applied",
    [([5], True), ([4], False), ([6], False), ([5, 5], True)],
    ids=["the sample in flight", "an older one", "an unknown one", "the same verdict twice"],
)
def test_only_the_verdict_of_the_sample_in_flight_counts_and_only_once(
    delivered: list[int], applied: bool
) -> None:
    state = entered(CANARY, 0, at(0), sample_sequence=5, pending_sample=5)
    for sequence in delivered:
        state = go(CANARY, state, observe(READY, sample=verdict(sequence, 130, "Fail")), 130).state
    assert state.analysis_failed_checks == (1 if applied else 0)
    assert state.step_samples == (1 if applied else 0)


def feed(canary: object, verdicts: list[Verdict], start: CanaryState | None = None) -> CanaryState:
    state = start or entered(canary, 0, at(0))  # type: ignore[arg-type]
    for n, outcome in enumerate(verdicts):
        now = 60.0 * (n + 1)
        state = replace(state, sample_sequence=n + 1, pending_sample=n + 1)
        state = go(canary, state, observe(READY, sample=verdict(n + 1, now, outcome)), now).state  # type: ignore[arg-type]
        if state.phase not in ("Canarying", "Paused"):
            break
    return state


@pytest.mark.parametrize(
    "limit, verdicts, failed_checks, phase",
    [
        (2, ["Fail"], 1, "Canarying"),
        (2, ["Fail", "Fail"], 2, "RollingBack"),
        (3, ["Fail", "Inconclusive", "Fail"], 2, "Canarying"),
        (1, ["Inconclusive", "Inconclusive", "Fail"], 1, "RollingBack"),
    ],
    ids=["below the limit", "reaches failureLimit", "inconclusive never counts", "failureLimit 1"],
)
def test_failing_samples_roll_back_at_failure_limit(
    limit: int, verdicts: list[Verdict], failed_checks: int, phase: str
) -> None:
    canary = analysis_canary(failure_limit=limit)
    state = feed(canary, verdicts)
    assert (state.analysis_failed_checks, state.phase) == (failed_checks, phase)
    if phase == "RollingBack":
        assert state.rollback_cause == "analysis" and state.observed_traffic_weight == 0


def test_passes_never_reset_the_failure_count() -> None:
    # A bake keeps the step here while passes come in between the failures.
    canary = canary_of(
        {
            "capacity": "25%",
            "traffic": 10,
            "pause": {"duration": "1h"},
            "analysis": analysis(failure_limit=2),
        },
        FULL,
    )
    state = feed(canary, ["Fail", "Pass", "Pass"])
    assert (state.analysis_failed_checks, state.phase) == (1, "Canarying")
    assert feed(canary, ["Fail"], state).phase == "RollingBack"


def test_the_failure_count_restarts_at_each_step() -> None:
    canary = canary_of(
        {"capacity": "25%", "traffic": 10, "analysis": analysis(failure_limit=3)},
        {"capacity": "50%", "traffic": 50, "analysis": analysis(failure_limit=3)},
        FULL,
    )
    state = feed(canary, ["Fail", "Fail", "Pass"])
    assert (state.current_step, state.analysis_failed_checks) == (1, 0)


@pytest.mark.parametrize(
    "mode, phase, failure",
    [
        (None, "Canarying", None),
        ("Hold", "Canarying", None),
        ("Rollback", "RollingBack", None),
        ("RollbackOnStall", "Canarying", None),
    ],
    ids=["default Hold", "Hold", "Rollback", "RollbackOnStall"],
)
def test_on_inconclusive_before_a_stall(mode: str | None, phase: str, failure: str | None) -> None:
    canary = analysis_canary(on_inconclusive=mode)
    state = feed(canary, ["Inconclusive"])
    assert state.phase == phase
    assert state.analysis_failed_checks == 0


@pytest.mark.parametrize(
    "mode, phase, reason",
    [(None, "Failed", "AnalysisStalled"), ("RollbackOnStall", "RollingBack", None)],
    ids=["Hold fails", "RollbackOnStall rolls back"],
)
def test_a_stall_longer_than_the_ready_timeout(mode: str | None, phase: str, reason: str | None) -> None:
    baked = {
        "capacity": "25%",
        "traffic": 10,
        "pause": {"duration": "2h"},
        "analysis": analysis(on_inconclusive=mode),
    }
    canary = canary_of(baked, FULL)  # the bake keeps the step here after its pass
    state = feed(canary, ["Pass", "Inconclusive"])  # conclusive at 60 s, then only inconclusive
    held = go(canary, state, observe(READY), 959)
    assert held.state.phase == "Canarying"
    stalled = go(canary, held.state, observe(READY), 960)  # 900 s after the last conclusive sample
    assert stalled.state.phase == phase
    assert (stalled.state.failed.reason if stalled.state.failed else None) == reason
    if phase == "Failed":
        assert stalled.state.failed is not None and stalled.state.failed.time == at(960)
        assert stalled.events[-1].reason == texts.FAILED
    else:
        assert stalled.rollback_started == "analysis"


def test_a_capacity_drop_pauses_sampling_but_keeps_the_warm_up_anchor() -> None:
    state = entered(CANARY, 0, at(0))
    dropped = go(CANARY, state, observe({"engine": 0, "decoder": 1}), 130)
    assert dropped.sample is None and dropped.next_sample_at is None
    assert dropped.state.step_entered_time == at(0)
    assert dropped.state.phase == "Canarying"
    back = go(CANARY, dropped.state, observe(READY), 140)
    assert back.sample is not None and back.state.step_entered_time == at(0)


def test_no_stall_while_the_capacity_is_short_only_the_capacity_timeout() -> None:
    state = entered(CANARY, 0, at(0))
    dropped = go(CANARY, state, observe({"engine": 0, "decoder": 1}), 800).state
    later = go(CANARY, dropped, observe({"engine": 0, "decoder": 1}), 1000)
    assert later.state.phase == "Canarying"
    timed_out = go(CANARY, later.state, observe({"engine": 0, "decoder": 1}), 1700)
    assert timed_out.state.failed is not None and timed_out.state.failed.reason == "CapacityTimeout"


def test_the_last_step_keeps_sampling_while_promoting_and_a_failure_rolls_back() -> None:
    canary = canary_of(
        {"capacity": "25%", "traffic": 10},
        {**FULL, "analysis": analysis(failure_limit=1)},
        scaleDownDelaySeconds=600,
    )
    ready = ready_for(canary, 1)
    state = replace(entered(canary, 1, at(0)), sample_sequence=1, pending_sample=1)
    promoting = go(canary, state, observe(ready, sample=verdict(1, 60, "Pass")), 60)
    assert promoting.state.phase == "Promoting"
    sampled = go(canary, promoting.state, observe(ready), 120)
    assert sampled.sample is not None
    failed = go(
        canary, sampled.state, observe(ready, sample=verdict(sampled.sample.sequence, 125, "Fail")), 125
    )
    assert failed.state.phase == "RollingBack" and failed.rollback_started == "analysis"


def test_override_promote_passes_an_analysis_gate_without_warm_up_or_bake() -> None:
    canary = canary_of(
        {
            "capacity": "25%",
            "traffic": 10,
            "pause": {"duration": "1h"},
            "analysis": analysis(initial_delay="10m"),
        },
        FULL,
    )
    decision = go(
        canary, with_promote(entered(canary, 0, at(0)), override=True), observe(ready_for(canary, 0)), 1
    )
    assert decision.state.current_step == 1
    assert "analysis overridden by promote" in decision.events[0].message
