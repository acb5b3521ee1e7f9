"""The `Rollout` workflow: one change's progression through the rollout groups of an
InferenceService (spec: the rollout groups page; reference §4, §6, §7).

`rollout/{ns}/{isvc}/{run}`, started by the InferenceService when a change gives a grouped
component a new revision while an older one serves. It pins the plan at start (a later edit
to `spec.rollout` applies to the next run), then on every count its parent forwards it
plans each moved component's allowance (`planning.rollout.gates`) and reports it back; the
parent hands the allowances to the InferenceReplicas, which move no further. It records
`CoordinationGroupFailed` when a group fails and `RolloutPlanParked` when the plan does not
resolve (a parked run waits for a fixed `spec.rollout`; it never falls back to
blue-green). It ends `Completed` when every moved component serves its target, or
`Superseded` when its parent opens a newer run.

Observe (signals) -> plan (pure functions) -> act (Events, the report) -> wait (for news,
a soak's end, or the safety re-check).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, cast

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from models.inferenceservice import RolloutSpec
    from models.kube_ops import ObjectRef
    from planning.rollout.gates import Allowance, ComponentProgress, allowances
    from planning.rollout.pairing import with_pairing
    from planning.rollout.plan import Parked, ParkReason, RolloutPlan, resolve_plan
    from planning.rollout.runs import done, failed_groups
    from workflows import search_attributes, waiting
    from workflows.events import isvc_ref, record_event
    from workflows.names import ROLLOUT
    from workflows.parent import deliver
    from workflows.rollout.messages import (
        QUERY_STATUS,
        SIGNAL_PAUSE,
        SIGNAL_PROGRESS,
        SIGNAL_RESPEC,
        SIGNAL_ROLLOUT_CHANGED,
        SIGNAL_SUPERSEDE,
        ComponentCounts,
        RolloutInput,
        RolloutReport,
        RolloutState,
        RolloutView,
    )
    from workflows.rollout.view import progress_of, record_finishes, report, view

FINAL_REPORT_TRIES = 3
FINAL_REPORT_RETRY = timedelta(seconds=30)
SAFETY_RECHECK = timedelta(minutes=30)
"""Counts arrive as signals; the timer only re-sends the report in case one was lost."""


def resolve(rollout: dict[str, Any] | None) -> RolloutPlan | Parked:
    plan = resolve_plan(RolloutSpec.model_validate(rollout or {}))
    if plan is None:
        return Parked("PlanInvalid", "spec.rollout declares no groups")
    return plan


@workflow.defn(name=ROLLOUT)
class RolloutWorkflow:
    """Input `RolloutInput` (or `RolloutState` after continue-as-new); result the final `RolloutView`."""

    @workflow.init
    def __init__(self, arg: RolloutInput | RolloutState) -> None:
        self.state = arg if isinstance(arg, RolloutState) else RolloutState(input=arg, paused=arg.paused)
        self.seq = 0
        self.undelivered = False
        """The last report could not be delivered (the parent is gone or busy restarting)."""

    @workflow.signal(name=SIGNAL_PROGRESS)
    def progress(self, counts: ComponentCounts) -> None:
        self.state.counts[counts.component] = counts
        self.seq += 1

    @workflow.signal(name=SIGNAL_PAUSE)
    def pause(self, depth: str | None) -> None:
        self.state.paused = depth
        self.seq += 1

    @workflow.signal(name=SIGNAL_SUPERSEDE)
    def supersede(self, newer_run: int) -> None:
        self.state.superseded_by = newer_run
        self.seq += 1

    @workflow.signal(name=SIGNAL_RESPEC)
    def respec(self, rollout: dict[str, Any]) -> None:
        self.state.latest_rollout = rollout
        self.seq += 1

    @workflow.query(name=QUERY_STATUS)
    def status(self) -> RolloutView:
        plan = self.plan()
        progress = progress_of(self.state, plan.grouped if isinstance(plan, RolloutPlan) else ())
        found = (
            with_pairing(plan, progress, allowances(plan, progress, workflow.now()), self.state.input.pairing_from)
            if isinstance(plan, RolloutPlan)
            else []
        )
        return view(self.state, plan, progress, found)

    def plan(self) -> RolloutPlan | Parked:
        state = self.state
        if state.pinned is not None:
            pinned = resolve(state.pinned)
            assert isinstance(pinned, RolloutPlan)
            return pinned
        return Parked(cast(ParkReason, state.parked_reason or "PlanInvalid"), state.parked_message or "")

    def pin(self) -> RolloutPlan | Parked:
        """Pin the plan: at start from the run's spec, while parked from the newest one."""
        state = self.state
        if state.pinned is None:
            candidate = state.latest_rollout if state.latest_rollout is not None else state.input.rollout
            plan = resolve(candidate)
            if isinstance(plan, RolloutPlan):
                state.pinned, state.parked_reason, state.parked_message = candidate, None, None
            elif (plan.reason, plan.message) != (state.parked_reason, state.parked_message):
                state.parked_reason, state.parked_message, state.parked_announced = plan.reason, plan.message, False
        return self.plan()

    @workflow.run
    async def run(self, arg: RolloutInput | RolloutState) -> RolloutView:
        state = self.state
        if state.started_at is None:
            state.started_at = workflow.now()
        workflow.upsert_search_attributes(
            [search_attributes.INFERENCE_SERVICE.value_set(state.input.isvc), search_attributes.PHASE.value_set("Progressing")]
        )
        while True:
            seen = self.seq
            wake_at = await self.step()
            if state.outcome is not None:
                await self.report_closed()
                workflow.upsert_search_attributes([search_attributes.PHASE.value_set(state.outcome)])
                return self.status()
            if workflow.info().is_continue_as_new_suggested():
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(state)
            await self.wait_for_news(seen, wake_at)

    async def report_closed(self) -> None:
        """The parent must hear that the run closed, or it would go on coordinating: a final
        report that did not go through is tried again a few times before the run ends."""
        for _ in range(FINAL_REPORT_TRIES):
            if not self.undelivered:
                return
            await workflow.sleep(FINAL_REPORT_RETRY)
            await self.step()

    async def wait_for_news(self, seen: int, wake_at: datetime | None) -> None:
        await waiting.wait_for_news(lambda: self.seq != seen, wake_at, SAFETY_RECHECK)

    async def step(self) -> datetime | None:
        """One pass: pin (or park), plan the allowances, record what is new, report."""
        state = self.state
        plan = self.pin()
        now = workflow.now()
        found: list[Allowance] = []
        progress: dict[str, ComponentProgress] = {}
        if isinstance(plan, RolloutPlan):
            progress = progress_of(state, plan.grouped)
            record_finishes(progress, state, now)
            progress = progress_of(state, plan.grouped)
            found = with_pairing(plan, progress, allowances(plan, progress, now), state.input.pairing_from)
            await self.record_failures(plan, progress)
            if state.superseded_by is not None:
                state.outcome = "Superseded"
            elif done(progress, state.input.targets):
                state.outcome = "Completed"
        else:
            await self.announce_park(plan)
            if state.superseded_by is not None:
                state.outcome = "Superseded"
        await self.send_report(report(state, workflow.info().workflow_id, plan, progress, found))
        wakes = [a.wake_at for a in found if a.wake_at is not None]
        return min(wakes) if wakes else None

    async def record_failures(self, plan: RolloutPlan, progress: dict[str, ComponentProgress]) -> None:
        """One `CoordinationGroupFailed` per group failure; the other components go on."""
        state = self.state
        failed_now = failed_groups(plan, progress)
        for group in failed_now:
            if group.index in state.failed_groups:
                continue
            names = ", ".join(c for c in group.components if progress[c].failed)
            message = (
                f"rollout run {state.input.run}: group {group.index} ({', '.join(group.components)}) failed: "
                f"a failed Instance in {names}; the other components go on"
            )
            await record_event(self.isvc(), "CoordinationGroupFailed", message, "Warning")
        # A group that recovers may fail again later and is told again.
        state.failed_groups = [g.index for g in failed_now]

    async def announce_park(self, parked: Parked) -> None:
        state = self.state
        if state.parked_announced:
            return
        message = f"rollout run {state.input.run} parked ({parked.reason}): {parked.message}"
        await record_event(self.isvc(), "RolloutPlanParked", message, "Warning")
        state.parked_announced = True

    async def send_report(self, outgoing: RolloutReport) -> None:
        state = self.state
        fingerprint = outgoing.model_dump_json()
        parent = state.input.parent_workflow_id
        if fingerprint == state.reported or parent is None:
            return
        self.undelivered = not await deliver(parent, SIGNAL_ROLLOUT_CHANGED, outgoing)
        if not self.undelivered:
            state.reported = fingerprint

    def isvc(self) -> ObjectRef:
        return isvc_ref(self.state.input.isvc, self.state.input.namespace, self.state.input.isvc_uid)
