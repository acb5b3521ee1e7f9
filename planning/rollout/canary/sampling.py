"""When the canary samples its metrics and what a verdict does (spec reference §2.4, §2.5).

Timeline: sampling starts when the step's new Instances are ready (`stepEnteredTime`), waits
`initialDelay`, then samples every `interval`, throttled by `lastEvaluationTime` (a sample is
never due sooner than `interval` after the last one, across steps too). A capacity drop
pauses sampling until the capacity is back; the warm-up and bake anchors do not move. At the
last step sampling goes on while `Promoting`, so a failing sample can still roll back. No
sample is asked for while globally paused or while one is in flight.

A verdict (judged by the analysis package: Fail if any metric breached, else Inconclusive if
any could not be judged, else Pass) is applied only if it answers the sample in flight:
- Fail: `analysisFailedChecks += 1`; the canary rolls back when it reaches `failureLimit`.
  Passes never reset it; it restarts at 0 with each step.
- Inconclusive never counts. `onInconclusive`: `Hold` holds (a stall fails the canary,
  `timeouts`), `Rollback` rolls back at once, `RollbackOnStall` holds and rolls back on a stall.
- Pass: the gate passes if the sample was taken after the warm-up and the minimum bake;
  an earlier pass does not count (the next one may).
Consequences are read from the state, so a verdict that lands during a pause acts on resume.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Literal

from models.inferenceservice import CanaryAnalysis, GroupCanary
from planning.rollout.canary.observation import SampleVerdict
from planning.rollout.canary.state import CanaryState
from planning.rollout.canary.steps import (
    bake_seconds,
    initial_delay_seconds,
    interval_seconds,
    on_inconclusive,
    step_at,
)

SAMPLING_PHASES = ("Canarying", "Paused", "Promoting")


@dataclass(frozen=True)
class SampleRequest:
    """Take one sample now; answer with a `SampleVerdict` carrying `sequence`."""

    sequence: int
    step: int
    canary_revision: str
    stable_revision: str | None
    analysis: CanaryAnalysis
    at: datetime


def warm_up_end(canary: GroupCanary, state: CanaryState) -> datetime | None:
    if state.step_entered_time is None:
        return None
    return state.step_entered_time + timedelta(
        seconds=initial_delay_seconds(step_at(canary, state.current_step))
    )


def bake_end(canary: GroupCanary, state: CanaryState) -> datetime | None:
    if state.step_entered_time is None:
        return None
    return state.step_entered_time + timedelta(seconds=bake_seconds(step_at(canary, state.current_step)))


def next_sample_at(canary: GroupCanary, state: CanaryState) -> datetime | None:
    """When the next sample is due; None when none is (no analysis, one in flight, capacity short, ...)."""
    step = step_at(canary, state.current_step)
    warm = warm_up_end(canary, state)
    if step.analysis is None or warm is None or state.pending_sample is not None:
        return None
    if state.phase not in SAMPLING_PHASES or state.pre_step_hold or state.capacity_wait_since is not None:
        return None
    if state.last_evaluation_time is None:
        return warm
    return max(warm, state.last_evaluation_time + timedelta(seconds=interval_seconds(step)))


def take_sample(
    canary: GroupCanary, state: CanaryState, now: datetime, paused: bool
) -> tuple[CanaryState, SampleRequest | None]:
    """The sample due now, numbered and recorded as in flight; None when none is due."""
    due = next_sample_at(canary, state)
    step = step_at(canary, state.current_step)
    if paused or due is None or now < due or step.analysis is None:
        return state, None
    sequence = state.sample_sequence + 1
    request = SampleRequest(
        sequence=sequence,
        step=state.current_step,
        canary_revision=state.canary_revision_hash,
        stable_revision=state.stable_revisions.get(state.primary),
        analysis=step.analysis,
        at=now,
    )
    return replace(state, sample_sequence=sequence, pending_sample=sequence), request


def apply_verdict(state: CanaryState, verdict: SampleVerdict | None) -> CanaryState:
    """`state` with the verdict counted, if it answers the sample in flight (else unchanged)."""
    if verdict is None or state.pending_sample is None or verdict.sequence != state.pending_sample:
        return state
    conclusive = verdict.verdict != "Inconclusive"
    return replace(
        state,
        pending_sample=None,
        step_samples=state.step_samples + 1,
        last_verdict=verdict.verdict,
        last_evaluation_time=verdict.time,
        last_conclusive_evaluation_time=verdict.time if conclusive else state.last_conclusive_evaluation_time,
        last_pass_time=verdict.time if verdict.verdict == "Pass" else state.last_pass_time,
        analysis_failed_checks=state.analysis_failed_checks + (1 if verdict.verdict == "Fail" else 0),
        metric_results=tuple(verdict.metric_results),
    )


AnalysisOutcome = Literal["advance", "rollback"]


def analysis_outcome(canary: GroupCanary, state: CanaryState) -> tuple[AnalysisOutcome | None, str]:
    """What the step's samples so far call for, and why (for the Event)."""
    step = step_at(canary, state.current_step)
    if step.analysis is None or state.step_entered_time is None:
        return None, ""
    limit = step.analysis.failure_limit
    if state.analysis_failed_checks >= limit:
        return "rollback", f"{state.analysis_failed_checks} failing sample(s) reached failureLimit {limit}"
    if state.last_verdict == "Inconclusive" and on_inconclusive(step) == "Rollback":
        return "rollback", "an inconclusive sample with onInconclusive: Rollback"
    warm, baked = warm_up_end(canary, state), bake_end(canary, state)
    passed = state.last_pass_time
    if passed is not None and warm is not None and baked is not None and passed >= max(warm, baked):
        return "advance", "a passing sample"
    return None, ""
