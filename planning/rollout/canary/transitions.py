"""The canary's moves from one phase to another, each with its Event (spec reference §1.4,
§1.5, §1.6, §2.5, §2.7). The machine (`machine`) decides when; these say what changes.

- Entering a step: its traffic is recorded and `stepEnteredTime` set, once every component
  has its count ready on the new revision.
- Advancing: the next step begins (`Pending`, a fresh capacity wait, per-step counters back
  to 0); after the last step's gate, `Promoting` until `scaleDownDelaySeconds` after the last
  step's new Instances were ready, then `Stable` with `currentStep` = number of steps.
- Failing: `Failed`, Instances and recorded traffic kept; `failed.time` is set once.
- Rolling back: the canary's weight is recorded as 0 at once, `RollingBack` until no
  Instance is on the canary revision, then `RolledBack` and `RolloutRunClosed`. A stable
  revision no longer retained fails the canary instead (`StableRevisionMissing`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime, timedelta

from models.duration import format_duration
from models.inferenceservice import GroupCanary
from planning.rollout.canary import texts
from planning.rollout.canary.decision import CanaryEvent
from planning.rollout.canary.observation import ComponentObservation
from planning.rollout.canary.state import CanaryState, Failure
from planning.rollout.canary.steps import gate_of, gate_phase, last_index, step_at, step_label
from planning.rollout.canary.texts import EventType, FailureReason, RollbackCause

Moved = tuple[CanaryState, tuple[CanaryEvent, ...]]


def _hash(state: CanaryState) -> str:
    return state.canary_revision_hash


def enter_step(canary: GroupCanary, state: CanaryState, now: datetime) -> Moved:
    step = step_at(canary, state.current_step)
    entered = replace(
        state,
        step_entered_time=now,
        observed_traffic_weight=step.traffic,
        capacity_wait_since=None,
        phase=gate_phase(canary, state.current_step),
    )
    message = (
        f"canary {_hash(state)} {step_label(canary, state.current_step)} ready: capacity {step.capacity} "
        f"serves on the new revision; traffic {step.traffic}% recorded; gate {gate_of(step)}"
    )
    return entered, (CanaryEvent("Normal", texts.STEP_READY, message),)


def promoting_end(canary: GroupCanary, state: CanaryState) -> datetime | None:
    """`scaleDownDelaySeconds` after the last step's new Instances were ready."""
    if state.step_entered_time is None:
        return None
    return state.step_entered_time + timedelta(seconds=max(0, canary.scale_down_delay_seconds or 0))


def advance(canary: GroupCanary, state: CanaryState, now: datetime, why: str) -> Moved:
    label = step_label(canary, state.current_step)
    if state.current_step >= last_index(canary):
        end = promoting_end(canary, state)
        message = f"canary {_hash(state)} {label} passed ({why}); promoting"
        if end is not None and end > now:
            message += f" until scaleDownDelaySeconds ends in {format_duration((end - now).total_seconds())}"
        return replace(state, phase="Promoting"), (CanaryEvent("Normal", texts.PROMOTING, message),)
    following = state.current_step + 1
    step = step_at(canary, following)
    moved = replace(
        state,
        current_step=following,
        phase="Pending",
        step_entered_time=None,
        capacity_wait_since=now,
        analysis_failed_checks=0,
        step_samples=0,
        last_verdict=None,
        last_pass_time=None,
        pending_sample=None,
    )
    message = (
        f"canary {_hash(state)} {label} passed ({why}); {step_label(canary, following)} moves capacity "
        f"{step.capacity} to the new revision (traffic {step.traffic}% once ready)"
    )
    return moved, (CanaryEvent("Normal", texts.STEP_ADVANCED, message),)


def complete(canary: GroupCanary, state: CanaryState) -> Moved:
    done = replace(
        state,
        phase="Stable",
        current_step=len(canary.steps),
        observed_traffic_weight=100,
        capacity_wait_since=None,
        pending_sample=None,
    )
    message = f"canary {_hash(state)} completed all {len(canary.steps)} steps; it is the stable revision now"
    return done, (CanaryEvent("Normal", texts.COMPLETED, message),)


def fail(state: CanaryState, reason: FailureReason, now: datetime, detail: str) -> Moved:
    """`Failed`; a canary already failed for the same reason keeps its time and says nothing new."""
    if state.phase == "Failed" and state.failed is not None and state.failed.reason == reason:
        return state, ()
    failed = replace(
        state,
        phase="Failed",
        failed=Failure(reason, now),
        pending_sample=None,
        mailbox=replace(state.mailbox, promote=None),  # promote refuses in Failed
    )
    message = (
        f"canary {_hash(state)} failed ({reason}): {detail}; Instances and recorded traffic are kept "
        "until a new revision, a rollback or a retry"
    )
    return failed, (CanaryEvent("Warning", texts.FAILED, message),)


def begin_rollback(
    state: CanaryState,
    components: Mapping[str, ComponentObservation],
    cause: RollbackCause,
    now: datetime,
    detail: str,
) -> Moved:
    missing = [c for c in state.canary_revisions if c in components and not components[c].stable_retained]
    if missing:
        gone = ", ".join(f"{c} {state.stable_revisions.get(c)}" for c in missing)
        return fail(
            state, "StableRevisionMissing", now, f"rollback cannot find the retained stable revision ({gone})"
        )
    rolling = replace(
        state,
        phase="RollingBack",
        observed_traffic_weight=0,
        rolled_back_revisions=dict(state.canary_revisions),
        rollback_cause=cause,
        failed=None,
        pre_step_hold=False,
        capacity_wait_since=None,
        pending_sample=None,
        mailbox=replace(state.mailbox, promote=None),
    )
    message = (
        f"canary {_hash(state)} rolling back to stable revision {state.stable_revisions.get(state.primary)} "
        f"(cause {cause}: {detail}); its traffic is recorded as 0%"
    )
    kind: EventType = "Warning" if cause == "analysis" else "Normal"
    return rolling, (CanaryEvent(kind, texts.ROLLING_BACK, message),)


def finish_rollback(state: CanaryState, components: Mapping[str, ComponentObservation]) -> Moved:
    """`RolledBack` once no Instance of any component is on the canary revision."""
    if state.phase != "RollingBack":
        return state, ()
    if any(c not in components or components[c].on_canary > 0 for c in state.canary_revisions):
        return state, ()
    message = texts.run_closed(state.target_id, "RolledBack")
    return replace(state, phase="RolledBack"), (CanaryEvent("Normal", texts.RUN_CLOSED, message),)
