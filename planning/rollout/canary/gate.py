"""Whether an entered canary step passes its gate now (spec reference §1.4 steps 3 and 5,
§1.6, §2.5, §3.2).

Called for a step whose traffic is recorded and whose capacity is met, not globally paused:
1. A stalled analysis (inconclusive longer than the ready timeout) fails the canary
   (`AnalysisStalled`) or, with `onInconclusive: RollbackOnStall`, rolls it back.
2. The samples call for a rollback: `failureLimit` reached, or an inconclusive one under
   `onInconclusive: Rollback`.
3. `Promoting`: `Stable` once `scaleDownDelaySeconds` has run out since the last step's new
   Instances were ready.
4. The gate: Immediate passes; Timed once its duration has elapsed since the step was
   entered; Manual with a plain promote; Analysis with a passing sample after warm-up and
   bake, or a promote with the analysis override. A promote in the mailbox that does not
   fit the gate is dropped with a Warning (a request naming an older canary revision never
   advances anything); one whose ID is already `promotedThrough` is inert.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from models.inferenceservice import CanaryStep, GroupCanary
from planning.rollout.canary import texts
from planning.rollout.canary.decision import CanaryEvent
from planning.rollout.canary.observation import CanaryObservation
from planning.rollout.canary.requests import PromoteRequest
from planning.rollout.canary.sampling import analysis_outcome
from planning.rollout.canary.state import CanaryState
from planning.rollout.canary.steps import (
    Gate,
    gate_of,
    gate_phase,
    last_index,
    on_inconclusive,
    step_at,
    step_label,
    timed_seconds,
)
from planning.rollout.canary.timeouts import stall_deadline
from planning.rollout.canary.transitions import advance, begin_rollback, complete, fail, promoting_end


def usable_promote(state: CanaryState) -> PromoteRequest | None:
    """The mailbox's promote if it names the running canary and was not applied already."""
    promote = state.mailbox.promote
    if promote is None or promote.revision != state.canary_revision_hash:
        return None
    if promote.request_id and promote.request_id == state.promoted_through:
        return None
    return promote


def at_gate(
    canary: GroupCanary, state: CanaryState, seen: CanaryObservation, now: datetime, timeout: float | None
) -> tuple[CanaryState, tuple[CanaryEvent, ...], bool]:
    """An entered step with its capacity: timeouts, analysis, then whether its gate passes."""
    index = state.current_step
    config = step_at(canary, index)
    gate = gate_of(config)
    promoting = state.phase == "Promoting"
    stalled = stall_deadline(state, timeout)
    if gate == "Analysis" and not promoting and stalled is not None and now >= stalled:
        detail = f"{step_label(canary, index)} analysis inconclusive for longer than the ready timeout"
        if on_inconclusive(config) == "RollbackOnStall":
            state, events = begin_rollback(state, seen.components, "analysis", now, detail)
        else:
            state, events = fail(state, "AnalysisStalled", now, detail)
        return state, events, False
    outcome, why = analysis_outcome(canary, state)
    if outcome == "rollback":
        state, events = begin_rollback(state, seen.components, "analysis", now, why)
        return state, events, False
    if promoting:
        state, dropped = _settle_promote(canary, state, None, "the end of Promoting")
        end = promoting_end(canary, state)
        if index < last_index(canary):  # a repin added steps after the last one had passed
            state, events = advance(canary, state, now, "passed before a repin")
            return state, dropped + events, True
        if end is None or now >= end:
            state, events = complete(canary, state)
            return state, dropped + events, False
        return state, dropped, False
    passed, why, used = _passes(gate, state, outcome, now, config)
    state, dropped = _settle_promote(canary, state, used, f"its {gate} gate")
    if not passed:
        return replace(state, phase=gate_phase(canary, index)), dropped, False
    state, events = advance(canary, state, now, why)
    return state, dropped + events, True


def _settle_promote(
    canary: GroupCanary, state: CanaryState, used: PromoteRequest | None, waits_at: str
) -> tuple[CanaryState, tuple[CanaryEvent, ...]]:
    """The mailbox's promote is spent: applied (`promotedThrough`), inert, or dropped with a Warning."""
    promote = state.mailbox.promote
    if promote is None:
        return state, ()
    state = replace(state, mailbox=replace(state.mailbox, promote=None))
    if used is not None:
        return replace(state, promoted_through=used.request_id or used.revision), ()
    if promote.request_id and promote.request_id == state.promoted_through:
        return state, ()  # the request already applied, seen again: inert
    message = (
        f"promote of revision {promote.revision} no longer applies: "
        f"{step_label(canary, state.current_step)} of canary {state.canary_revision_hash} waits at {waits_at}"
    )
    return state, (CanaryEvent("Warning", texts.REQUEST_DROPPED, message),)


def _passes(
    gate: Gate, state: CanaryState, outcome: str | None, now: datetime, config: CanaryStep
) -> tuple[bool, str, PromoteRequest | None]:
    """(passed, why, the promote that passed it)."""
    promote = usable_promote(state)
    if gate == "Immediate":
        return True, "no gate", None
    if gate == "Timed":
        entered = state.step_entered_time
        elapsed = entered is not None and now >= entered + timedelta(seconds=timed_seconds(config))
        return elapsed, "timed gate elapsed", None
    if gate == "Manual":
        if promote is not None and not promote.override_analysis:
            return True, "promoted", promote
        return False, "", None
    if promote is not None and promote.override_analysis:
        return True, "analysis overridden by promote", promote
    return outcome == "advance", "analysis passed", None
