"""Repinning a running rollout onto the live plan (spec reference §4).

A request names the plan digest the operator saw (`rp1:<12 hex>`, from `rollout explain`)
or `now` (no digest check). Ours is an Update on the Rollout: a refusal answers it with the
CLI's text and records nothing; a digest that no longer matches the live render, or a live
source that does not render, is rejected with a Warning `RolloutRepinRejected`; an applied
repin records a Normal `RolloutPlanRepinned`. A request for the plan already pinned changes
nothing and records no Event.

A repin may change a group's progression settings (a canary's steps, prometheus,
scaleDownDelaySeconds, readyTimeout; blue-green; rolling update) but not the topology: the
number of groups, their progression kinds, components and order, soak and maintainRatio.
The run keeps its ID, start time and targets. The canary keeps its step index, clamped to
the new last step; a finished canary stays finished. When the (clamped) step's traffic is
above the recorded weight, the canary is held before the step (`preStepHold`, HOLD
`CanaryPreStep`): its capacity still converges (`Pending`, then `Paused`), and the step is
entered (its traffic recorded) only on a promote naming the canary revision. Digests and
plans come from `planning.rollout.plan`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Literal

from models.inferenceservice import GroupCanary, RolloutSpec
from planning.rollout.canary import texts
from planning.rollout.canary.decision import CanaryEvent
from planning.rollout.canary.state import CanaryState
from planning.rollout.canary.steps import last_index
from planning.rollout.plan import Parked, RolloutPlan, resolve_plan

RepinResult = Literal["applied", "rejected", "refused", "unchanged"]


@dataclass(frozen=True)
class RepinOutcome:
    result: RepinResult
    message: str
    """The refusal or rejection text, or the applied Event's message."""
    plan: RolloutPlan
    """The plan pinned afterwards (the live one when applied)."""
    canary: CanaryState | None
    event: CanaryEvent | None = None


def topology(plan: RolloutPlan) -> tuple[Any, ...]:
    """What a repin must not change."""
    return tuple((g.progression, g.components, g.soak_seconds, g.ratio_tolerance) for g in plan.groups)


def clamp(state: CanaryState, canary: GroupCanary, now: datetime) -> CanaryState:
    """The running canary under the repinned `canary` plan."""
    if state.phase in ("Stable", "RollingBack", "RolledBack"):
        return state  # finished stays finished
    index = min(state.current_step, last_index(canary))
    traffic = canary.steps[index].traffic
    state = replace(state, current_step=index)
    if state.phase == "Failed":
        return state  # held as it is; a retry starts over on the new steps
    if traffic > state.observed_traffic_weight:
        return replace(
            state,
            pre_step_hold=True,
            phase="Pending",
            step_entered_time=None,
            capacity_wait_since=state.capacity_wait_since or now,
            pending_sample=None,
        )
    if state.step_entered:
        return replace(state, observed_traffic_weight=traffic)  # a lower weight is recorded at once
    return state


def repin(
    request: str,
    pinned: RolloutPlan,
    live: RolloutSpec | None,
    run_id: str | None,
    canary: CanaryState | None,
    now: datetime,
) -> RepinOutcome:
    def refused(text: str, result: RepinResult = "refused") -> RepinOutcome:
        return RepinOutcome(result, text, pinned, canary)

    def rejected(text: str) -> RepinOutcome:
        return RepinOutcome(
            "rejected", text, pinned, canary, CanaryEvent("Warning", texts.REPIN_REJECTED, text)
        )

    if run_id is None:
        return refused(texts.REPIN_NO_RUN)
    if canary is not None and canary.mailbox.blocks:
        return refused(texts.REPIN_MAILBOX)
    plan = resolve_plan(live)
    if plan is None:
        return refused(texts.REPIN_EMPTY)
    if isinstance(plan, Parked):
        return rejected(texts.repin_unrenderable(plan.reason))
    if request != texts.REPIN_NOW and request != plan.digest:
        return rejected(texts.repin_digest_mismatch(request, plan.digest))
    if plan.digest == pinned.digest:
        return refused(texts.REPIN_ALREADY_PINNED, "unchanged")
    if topology(plan) != topology(pinned):
        return refused(texts.REPIN_TOPOLOGY)
    canaries = [g.canary for g in plan.groups if g.canary is not None]
    if len(canaries) > 1:
        return refused(texts.REPIN_CANARY_GROUPS)
    moved = canary if canary is None or not canaries else clamp(canary, canaries[0], now)
    message = texts.repin_applied(run_id, pinned.digest, plan.digest)
    return RepinOutcome("applied", message, plan, moved, CanaryEvent("Normal", texts.PLAN_REPINNED, message))
