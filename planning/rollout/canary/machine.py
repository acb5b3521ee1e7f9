"""The canary progression as one pure transition function (spec reference §1.4, §1.5, §1.6,
§2.4, §2.5, §3.1, §5).

`step(canary, state, seen, now, ready_timeout)` is called by the Rollout workflow on every
event (a component's counts, a timer, a sample verdict, an accepted request, pause or
resume) and returns a `CanaryDecision`. It reads, in order:

1. The verdict of the sample in flight (`sampling.apply_verdict`; any other is ignored).
2. The target revisions: a newer one restarts the canary at step 1 with the same stable
   revision (clearing `Failed`); a return to the stable revision rolls back; after a
   rollback nothing restarts until a revision other than the stable and the rejected one.
3. Unless globally paused (requests wait): a retry of a `Failed`/`RolledBack` canary, then a
   rollback request.
4. The step: capacity (`Pending` until every component has its count ready; a dip after
   serving keeps the phase and traffic and opens a fresh capacity wait), then, unless
   paused (the step is held, its clocks keep running), ready timeouts, analysis
   consequences and the gate, advancing as many steps as pass at once.
5. Rolling back: `RolledBack` once no Instance is on the canary revision.
6. The next sample, if due.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Literal

from models.inferenceservice import GroupCanary
from planning.rollout.canary import texts
from planning.rollout.canary.capacity import shortfalls, step_capacities
from planning.rollout.canary.decision import CanaryDecision, CanaryEvent
from planning.rollout.canary.gate import at_gate, usable_promote
from planning.rollout.canary.observation import CanaryObservation
from planning.rollout.canary.sampling import apply_verdict, next_sample_at, take_sample
from planning.rollout.canary.schedule import held_capacities, wake_at
from planning.rollout.canary.state import CanaryState, restarted
from planning.rollout.canary.steps import step_at, step_label
from planning.rollout.canary.texts import ACTIVE_PHASES, RETRY_PHASES, ROLLBACK_PHASES
from planning.rollout.canary.timeouts import capacity_deadline
from planning.rollout.canary.transitions import Moved, begin_rollback, enter_step, fail, finish_rollback


def step(
    canary: GroupCanary,
    state: CanaryState,
    seen: CanaryObservation,
    now: datetime,
    ready_timeout: float | None,
) -> CanaryDecision:
    before = state
    events: list[CanaryEvent] = []
    state = apply_verdict(state, seen.sample)
    for move in (_follow_target, _take_requests, _progress):
        state, found = move(canary, state, seen, now, ready_timeout)
        events.extend(found)
    state, found = finish_rollback(state, seen.components)
    events.extend(found)
    state, sample = take_sample(canary, state, now, seen.paused)
    # Compared by phase and revisions: a restart can finish a new canary in the same call.
    same_canary = dict(state.canary_revisions) == dict(before.canary_revisions)
    rolled = ("RollingBack", "RolledBack")
    rollback_started = None
    if state.phase in rolled and (before.phase not in rolled or not same_canary):
        rollback_started = state.rollback_cause
    outcome: Literal["Completed", "RolledBack"] | None = None
    if state.phase in ("Stable", "RolledBack") and (state.phase != before.phase or not same_canary):
        outcome = "Completed" if state.phase == "Stable" else "RolledBack"
    return CanaryDecision(
        state=state,
        capacities=held_capacities(canary, state, seen),
        traffic_weight=state.observed_traffic_weight,
        sample=sample,
        next_sample_at=next_sample_at(canary, state),
        wake_at=wake_at(canary, state, seen, now, ready_timeout),
        events=tuple(events),
        rollback_started=rollback_started,
        outcome=outcome,
    )


def _follow_target(
    canary: GroupCanary, state: CanaryState, seen: CanaryObservation, now: datetime, timeout: float | None
) -> Moved:
    wanted = {c: seen.components[c].target for c in state.canary_revisions if c in seen.components}
    newest = {**state.canary_revisions, **wanted}
    if newest == dict(state.canary_revisions):
        return state, ()
    if state.phase in ("RollingBack", "RolledBack"):
        # The component stays on stable until a revision other than the stable and the rejected one.
        if all(
            h in (state.stable_revisions.get(c), state.rolled_back_revisions.get(c))
            for c, h in newest.items()
        ):
            return state, ()
    elif state.phase != "Stable" and all(h == state.stable_revisions.get(c) for c, h in newest.items()):
        return begin_rollback(
            state, seen.components, "manual", now, "the spec asks for the stable revision again"
        )
    fresh = restarted(state, seen.run_id, newest, now)
    message = (
        f"canary restarted at {step_label(canary, 0)} with revision {fresh.canary_revision_hash} "
        f"(was {state.canary_revision_hash}); stable revision stays {fresh.stable_revisions.get(fresh.primary)}"
    )
    return fresh, (CanaryEvent("Normal", texts.RESTARTED, message),)


def _take_requests(
    canary: GroupCanary, state: CanaryState, seen: CanaryObservation, now: datetime, timeout: float | None
) -> Moved:
    box = state.mailbox
    if seen.paused:
        return state, ()  # requests wait while globally paused (§5)
    if box.retry is not None and state.phase in RETRY_PHASES:
        fresh = restarted(state, state.target_id, state.canary_revisions, now)
        message = f"canary {state.canary_revision_hash} retried from {step_label(canary, 0)} with fresh counters and clocks"
        return fresh, (CanaryEvent("Normal", texts.RETRIED, message),)
    if box.retry is not None and state.phase != "RollingBack":
        state = replace(state, mailbox=replace(box, retry=None))  # nothing to retry any more
    if box.rollback is not None and state.phase in ROLLBACK_PHASES:
        return begin_rollback(state, seen.components, "manual", now, "rollback requested")
    return state, ()


def _progress(
    canary: GroupCanary, state: CanaryState, seen: CanaryObservation, now: datetime, timeout: float | None
) -> Moved:
    """Steps through as many steps as pass now (Immediate ones chain)."""
    events: list[CanaryEvent] = []
    for _ in range(len(canary.steps) + 2):
        if state.phase not in ACTIVE_PHASES:
            break
        state, found, going_on = _one_pass(canary, state, seen, now, timeout)
        events.extend(found)
        if not going_on:
            break
    return state, tuple(events)


def _one_pass(
    canary: GroupCanary, state: CanaryState, seen: CanaryObservation, now: datetime, timeout: float | None
) -> tuple[CanaryState, tuple[CanaryEvent, ...], bool]:
    label = step_label(canary, state.current_step)
    short = shortfalls(
        tuple(state.canary_revisions),
        step_capacities(step_at(canary, state.current_step), seen.components),
        seen.components,
    )
    events: tuple[CanaryEvent, ...] = ()
    if short:
        if state.capacity_wait_since is None:
            # Capacity lost after serving: phase and traffic stay, a fresh capacity budget starts.
            state = replace(state, capacity_wait_since=now)
            message = f"canary {state.canary_revision_hash} {label} lost capacity ({', '.join(short)} ready on the new revision); sampling waits"
            events = (CanaryEvent("Warning", texts.CAPACITY_LOST, message),)
        if not state.step_entered:
            state = replace(state, phase="Pending")
        deadline = capacity_deadline(state, timeout)
        if not seen.paused and deadline is not None and now >= deadline:
            state, failed = fail(
                state, "CapacityTimeout", now, f"{label} capacity not ready ({', '.join(short)})"
            )
            events += failed
        return state, events, False
    if state.capacity_wait_since is not None:
        if state.step_entered:
            message = f"canary {state.canary_revision_hash} {label} capacity is back on the new revision"
            events = (CanaryEvent("Normal", texts.CAPACITY_RECOVERED, message),)
        state = replace(state, capacity_wait_since=None)
    if not state.step_entered:
        if state.pre_step_hold:
            promote = usable_promote(state)
            if seen.paused or promote is None:
                return replace(state, phase="Paused"), events, False
            state = replace(
                state,
                pre_step_hold=False,
                promoted_through=promote.request_id or promote.revision,
                mailbox=replace(state.mailbox, promote=None),
            )
            message = f"canary {state.canary_revision_hash} {label} released from its CanaryPreStep hold by a promote"
            events += (CanaryEvent("Normal", texts.PRE_STEP_RELEASED, message),)
        elif seen.paused:
            return state, events, False
        state, entered = enter_step(canary, state, now)
        return state, events + entered, True
    if seen.paused:
        return state, events, False  # the step is held; its clocks keep running
    state, decided, going_on = at_gate(canary, state, seen, now, timeout)
    return state, events + decided, going_on
