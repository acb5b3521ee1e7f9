"""Operator requests to a canary, as pure checks: accepted (the request waits in the state's
mailbox until the machine can act) or refused with the reference's exact text (spec
reference §3.1, §3.2, §5).

Our mapping of OME's annotations and CLI verbs: each request is a Temporal Update (a
validator calls the check; a refusal is the Update's error, so nothing lands in history;
acceptance stores the returned state and wakes the workflow) and also a signal of the same
name, whose refusal, having no answer, becomes a Warning Event (`refusal_event`) and the
`status` query's `last_rejected_request`. The checks are the CLI's guarded-action
preconditions; the machine then consumes requests with the annotation semantics (they wait
while globally paused; a promote naming an older canary revision never advances anything).

- promote: the gate must match (plain -> `Manual`; `override_analysis` -> `Analysis`;
  `Timed` and `Immediate` never), the step entered (traffic recorded) and still at its gate,
  no previous request pending, not globally paused. At the last step the canary waits at
  its gate in `Paused` (§1.4), and we accept the promote there: the reference's CLI
  refuses (it expects `Promoting`, its documented limitation), but our Update is the
  annotation path, which the controller applies at that gate. During a CanaryPreStep hold
  (after a repin) only a promote naming the canary revision is accepted, and it releases
  the hold rather than passing a gate (§4).
- rollback: accepted in `Pending`, `Canarying`, `Paused`, `Promoting`, `Failed`. It lingers
  until a different target revision appears or a retry; after an analysis rollback (which
  leaves none) promote and rollback find no active work.
- retry: only from `Failed` or `RolledBack`, naming a canary revision of the group (the
  primary's when unnamed); never restarts an in-progress rollback; waits while paused.
- pause / resume (the CLI's): pause needs active work and refuses over a present pause and
  over a pending promote or rollback unless they are discarded with it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from models.inferenceservice import GroupCanary
from planning.rollout.canary import texts
from planning.rollout.canary.decision import CanaryEvent
from planning.rollout.canary.requests import Mailbox, PromoteRequest, RetryRequest, RollbackRequest
from planning.rollout.canary.state import CanaryState
from planning.rollout.canary.steps import gate_of, last_index, step_at, step_label

ACTIVE_WORK = (*texts.ACTIVE_PHASES, "Failed", "RollingBack")


@dataclass(frozen=True)
class Steered:
    accepted: bool
    message: str
    """The refusal text, or what was accepted."""
    state: CanaryState | None
    """The state holding the request (unchanged when refused)."""


def _refuse(state: CanaryState | None, text: str) -> Steered:
    return Steered(False, text, state)


def refusal_event(refusal: str) -> CanaryEvent:
    """What a refused signal leaves behind (a signal has no answer)."""
    return CanaryEvent("Warning", texts.REQUEST_REJECTED, refusal)


def has_active_work(state: CanaryState | None) -> bool:
    return state is not None and state.phase in ACTIVE_WORK


def promote(
    canary: GroupCanary,
    state: CanaryState | None,
    revision: str | None = None,
    override_analysis: bool = False,
    request_id: str = "",
    paused: bool = False,
    canary_groups: int = 1,
) -> Steered:
    if canary_groups > 1:
        return _refuse(state, texts.REFUSED_STALE)
    if state is None:
        return _refuse(state, texts.REFUSED_NO_WORK)
    if state.mailbox.blocks:
        return _refuse(state, texts.REFUSED_MAILBOX)
    if state.phase in ("Stable", "RollingBack", "RolledBack"):
        return _refuse(state, texts.REFUSED_NO_WORK)
    if paused:
        return _refuse(state, texts.REFUSED_PAUSED)
    running = state.canary_revision_hash
    if revision is not None and revision != running:
        return _refuse(state, texts.refused_revision(revision, running))
    request = PromoteRequest(running, override_analysis, request_id)
    label = step_label(canary, state.current_step)
    if state.pre_step_hold:
        if revision is None:
            return _refuse(state, texts.refused_pre_step(running))
        message = f"promote accepted: {label} of canary {running} leaves its CanaryPreStep hold once its capacity is ready"
        return Steered(True, message, replace(state, mailbox=replace(state.mailbox, promote=request)))
    gate = gate_of(step_at(canary, state.current_step))
    wanted = "Analysis" if override_analysis else "Manual"
    at_gate = state.step_entered and state.phase in ("Canarying", "Paused")
    if gate != wanted or not at_gate or state.current_step > last_index(canary):
        return _refuse(state, texts.REFUSED_GATE)
    if override_analysis:
        message = f"Analysis override: {label} of canary {running} passes without warm-up, sampling or bake"
    else:
        message = f"promote accepted: {label} of canary {running} passes its manual gate"
    return Steered(True, message, replace(state, mailbox=replace(state.mailbox, promote=request)))


def rollback(
    state: CanaryState | None, request_id: str = "", paused: bool = False, canary_groups: int = 1
) -> Steered:
    if canary_groups > 1:
        return _refuse(state, texts.REFUSED_STALE)
    if state is None:
        return _refuse(state, texts.REFUSED_NO_WORK)
    if state.mailbox.blocks:
        return _refuse(state, texts.REFUSED_MAILBOX)
    if state.phase not in texts.ROLLBACK_PHASES:
        return _refuse(state, texts.REFUSED_NO_WORK)
    if paused:
        return _refuse(state, texts.REFUSED_PAUSED)
    message = (
        f"rollback accepted: canary {state.canary_revision_hash} returns to stable revision "
        f"{state.stable_revisions.get(state.primary)}"
    )
    return Steered(
        True, message, replace(state, mailbox=replace(state.mailbox, rollback=RollbackRequest(request_id)))
    )


def retry(
    state: CanaryState | None, revision: str | None = None, request_id: str = "", paused: bool = False
) -> Steered:
    if state is None or state.phase not in texts.RETRY_PHASES:
        return _refuse(state, texts.REFUSED_NO_WORK)
    running = state.canary_revision_hash
    if revision is not None and revision not in state.canary_revisions.values():
        return _refuse(state, texts.refused_revision(revision, running))
    request = RetryRequest(revision or running, request_id)
    message = f"retry accepted: canary {running} restarts from step 1 with fresh counters and clocks"
    if paused:
        message += " once the pause is lifted"
    return Steered(True, message, replace(state, mailbox=replace(state.mailbox, retry=request)))


def pause(state: CanaryState | None, paused: bool, discard_pending: bool = False) -> Steered:
    if paused:
        return _refuse(state, texts.REFUSED_ALREADY_PAUSED)
    if not has_active_work(state):
        return _refuse(state, texts.REFUSED_NO_WORK)
    assert state is not None
    if state.mailbox.blocks and not discard_pending:
        return _refuse(state, texts.REFUSED_MAILBOX)
    kept = state
    if discard_pending:
        kept = replace(state, mailbox=Mailbox(retry=state.mailbox.retry))
    return Steered(True, "pause accepted: the canary holds its step; its clocks keep running", kept)


def resume(state: CanaryState | None, paused: bool) -> Steered:
    if not paused:
        return _refuse(state, texts.REFUSED_NOT_PAUSED)
    return Steered(True, "resume accepted: clocks that ran out during the pause act now", state)
