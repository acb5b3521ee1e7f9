"""How a canary step advances: Pending, the four gates, the last step, completion (§1.4)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from planning.rollout.canary import texts
from planning.rollout.canary.machine import step
from tests.unit.planning.rollout.canary.rows import (
    FULL,
    MANUAL_THEN_FULL,
    analysis,
    at,
    canary_of,
    entered,
    fresh,
    go,
    observe,
    ready_for,
    verdict,
    with_promote,
)

pytestmark = pytest.mark.unit



def test_pending_until_ready_then_traffic_and_step_entered_time_are_recorded() -> None:
    canary = MANUAL_THEN_FULL
    waiting = go(canary, fresh(), observe({"engine": 1}), 30)
    assert (waiting.state.phase, waiting.traffic_weight, waiting.state.step_entered_time) == (
        "Pending",
        0,
        None,
    )
    assert waiting.state.capacity_wait_since == at(0)
    ready = go(canary, waiting.state, observe(ready_for(canary, 0)), 60)
    assert ready.state.phase == "Paused"
    assert ready.traffic_weight == ready.state.observed_traffic_weight == 10
    assert ready.state.step_entered_time == at(60)
    assert ready.state.capacity_wait_since is None
    assert [e.reason for e in ready.events] == [texts.STEP_READY]


@pytest.mark.parametrize(
    "first, seconds, promote, expected_step, expected_phase",
    [
        ({}, 0, False, 1, "Pending"),
        ({"pause": {"duration": "5m"}}, 0, False, 0, "Canarying"),
        ({"pause": {"duration": "5m"}}, 299, False, 0, "Canarying"),
        ({"pause": {"duration": "5m"}}, 300, False, 1, "Pending"),
        ({"pause": {"duration": "5m"}}, 300, True, 1, "Pending"),
        ({"pause": {}}, 10_000, False, 0, "Paused"),
        ({"pause": {}}, 1, True, 1, "Pending"),
        ({"analysis": analysis()}, 600, False, 0, "Canarying"),
        ({"analysis": analysis()}, 1, True, 0, "Canarying"),
    ],
    ids=[
        "Immediate advances at once",
        "Timed at its start",
        "Timed a second early",
        "Timed elapsed",
        "Timed ignores a promote",
        "Manual waits for ever",
        "Manual promoted",
        "Analysis without a pass",
        "Analysis ignores a plain promote",
    ],
)
def test_each_gate(
    first: dict[str, Any], seconds: float, promote: bool, expected_step: int, expected_phase: str
) -> None:
    canary = canary_of({"capacity": "25%", "traffic": 10, **first}, {"capacity": "50%", "traffic": 50}, FULL)
    state = entered(canary, 0, at(0))
    state = with_promote(state) if promote else state
    decision = go(canary, state, observe(ready_for(canary, 0)), seconds)
    assert (decision.state.current_step, decision.state.phase) == (expected_step, expected_phase)
    assert decision.state.mailbox.promote is None  # consumed, or dropped when it fits no gate


def test_a_timed_gate_counts_from_when_the_new_instances_were_ready() -> None:
    canary = canary_of({"capacity": "25%", "traffic": 10, "pause": {"duration": "1m"}}, FULL)
    late = go(canary, fresh(), observe(ready_for(canary, 0)), 100)  # ready 100 s after the step began
    assert late.state.step_entered_time == at(100)
    assert late.wake_at == at(160)
    assert go(canary, late.state, observe(ready_for(canary, 0)), 159).state.current_step == 0
    assert go(canary, late.state, observe(ready_for(canary, 0)), 160).state.current_step == 1


@pytest.mark.parametrize(
    "pause, sample_at, advances",
    [
        (None, 60, True),
        ({"duration": "5m"}, 60, False),
        ({"duration": "5m"}, 300, True),
        ({}, 60, True),
    ],
    ids=[
        "pass advances",
        "pass during the minimum bake",
        "pass after the bake",
        "pause {} ignored on analysis",
    ],
)
def test_analysis_advances_on_a_pass_no_earlier_than_the_bake(
    pause: dict[str, Any] | None, sample_at: float, advances: bool
) -> None:
    first: dict[str, Any] = {"capacity": "25%", "traffic": 10, "analysis": analysis()}
    if pause is not None:
        first["pause"] = pause
    canary = canary_of(first, FULL)
    state = entered(canary, 0, at(0), sample_sequence=3, pending_sample=3)
    decision = go(
        canary, state, observe(ready_for(canary, 0), sample=verdict(3, sample_at, "Pass")), sample_at
    )
    assert (decision.state.current_step == 1) is advances


def test_an_analysis_pass_before_the_initial_delay_does_not_advance() -> None:
    canary = canary_of({"capacity": "25%", "traffic": 10, "analysis": analysis(initial_delay="2m")}, FULL)
    state = entered(canary, 0, at(0), sample_sequence=1, pending_sample=1)
    decision = go(canary, state, observe(ready_for(canary, 0), sample=verdict(1, 60, "Pass")), 60)
    assert decision.state.current_step == 0


def test_immediate_steps_chain_in_one_call_while_their_capacity_is_ready() -> None:
    canary = canary_of({"capacity": "25%", "traffic": 5}, {"capacity": "25%", "traffic": 10}, FULL)
    decision = go(canary, fresh(), observe(ready_for(canary, 0)), 0)
    assert (decision.state.current_step, decision.state.phase) == (2, "Pending")
    reasons = [e.reason for e in decision.events]
    assert reasons == [texts.STEP_READY, texts.STEP_ADVANCED, texts.STEP_READY, texts.STEP_ADVANCED]


@pytest.mark.parametrize(
    "last",
    [{"pause": {}}, {"pause": {"duration": "5m"}}, {"analysis": analysis()}],
    ids=["Manual", "Timed", "Analysis"],
)
def test_any_gate_of_the_last_step_holds_the_canary_in_paused(last: dict[str, Any]) -> None:
    canary = canary_of({"capacity": "25%", "traffic": 10}, {**FULL, **last})
    state = replace(entered(canary, 0, at(0)), phase="Canarying", current_step=1, step_entered_time=None)
    decision = go(canary, state, observe(ready_for(canary, 1)), 1)
    assert (decision.state.current_step, decision.state.phase) == (1, "Paused")


@pytest.mark.parametrize(
    "delay, promoted_at, checked_at, phase",
    [
        (None, 100, 100, "Stable"),
        (300, 100, 100, "Promoting"),
        (300, 100, 299, "Promoting"),
        (300, 100, 300, "Stable"),
        (60, 100, 100, "Stable"),
    ],
    ids=[
        "no scaleDownDelay: completes at once",
        "Promoting for the rest of the delay",
        "a second before its end",
        "completes when the delay ends",
        "delay already over when the gate passed",
    ],
)
def test_scale_down_delay_counts_from_when_the_last_steps_instances_were_ready(
    delay: int | None, promoted_at: float, checked_at: float, phase: str
) -> None:
    canary = canary_of(
        {"capacity": "25%", "traffic": 10},
        {**FULL, "pause": {}},
        **({"scaleDownDelaySeconds": delay} if delay is not None else {}),
    )
    state = with_promote(entered(canary, 1, at(0)))
    promoted = go(canary, state, observe(ready_for(canary, 1)), promoted_at)
    decision = go(canary, promoted.state, observe(ready_for(canary, 1)), checked_at)
    assert decision.state.phase == phase
    if phase == "Stable":
        assert decision.state.current_step == len(canary.steps)
        assert decision.state.stable_revision_hash is None
    else:
        assert decision.wake_at == at(delay or 0)


def test_completion_is_reported_once_with_its_event() -> None:
    canary = canary_of({"capacity": "100%", "traffic": 100})
    decision = go(canary, fresh(), observe(ready_for(canary, 0)), 5)
    assert decision.outcome == "Completed"
    assert decision.events[-1].reason == texts.COMPLETED
    again = go(canary, decision.state, observe(ready_for(canary, 0)), 6)
    assert again.outcome is None and again.events == ()


def test_a_manual_promote_waits_in_the_mailbox_while_capacity_is_short() -> None:
    canary = MANUAL_THEN_FULL
    state = with_promote(entered(canary, 0, at(0)))
    short = go(canary, state, observe({"engine": 1}), 10)
    assert short.state.current_step == 0 and short.state.mailbox.promote is not None
    back = go(canary, short.state, observe(ready_for(canary, 0)), 20)
    assert back.state.current_step == 1 and back.state.promoted_through == "p1"


def test_a_promote_already_applied_is_inert() -> None:
    canary = MANUAL_THEN_FULL
    state = replace(with_promote(entered(canary, 0, at(0))), promoted_through="p1")
    decision = step(canary, state, observe(ready_for(canary, 0)), at(10), None)
    assert decision.state.current_step == 0 and decision.state.mailbox.promote is None
    assert decision.events == ()


def test_a_promote_that_fits_no_gate_is_dropped_with_a_warning() -> None:
    canary = canary_of({"capacity": "25%", "traffic": 10, "pause": {"duration": "5m"}}, FULL)
    decision = go(canary, with_promote(entered(canary, 0, at(0))), observe(ready_for(canary, 0)), 10)
    assert decision.state.current_step == 0 and decision.state.mailbox.promote is None
    assert [(e.type, e.reason) for e in decision.events] == [("Warning", texts.REQUEST_DROPPED)]
    assert "waits at its Timed gate" in decision.events[0].message


@pytest.mark.parametrize(
    "last_conclusive, expected_wake",
    [(None, 60), (30, 60), (50, 950)],
    ids=["next sample first", "next sample before the stall", "stall after the next sample"],
)
def test_an_analysis_gate_wakes_for_the_next_sample_or_the_stall(
    last_conclusive: float | None, expected_wake: float
) -> None:
    canary = canary_of({"capacity": "25%", "traffic": 10, "analysis": analysis()}, FULL)
    state = entered(
        canary,
        0,
        at(0),
        last_evaluation_time=at(0),
        last_conclusive_evaluation_time=None if last_conclusive is None else at(last_conclusive),
        pending_sample=9 if expected_wake == 950 else None,  # a sample in flight: no next one yet
        sample_sequence=9,
    )
    assert go(canary, state, observe(ready_for(canary, 0)), 55).wake_at == at(expected_wake)


def test_a_restart_that_completes_in_the_same_call_is_reported() -> None:
    canary = canary_of({"capacity": "100%", "traffic": 100})
    done = replace(fresh(), phase="Stable", current_step=1, observed_traffic_weight=100)
    newer = {"engine": "e3", "decoder": "d3"}
    decision = go(canary, done, observe(ready_for(canary, 0), targets=newer), 10)
    assert decision.state.phase == "Stable" and decision.outcome == "Completed"
    assert dict(decision.state.canary_revisions) == newer
