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
    from planning.rollout.canary import steering
    from planning.rollout.canary.repin import repin
    from planning.rollout.canary.texts import REFUSED_NO_WORK, REFUSED_STALE
    from planning.rollout.gates import Allowance, ComponentProgress, allowances
    from planning.rollout.pairing import with_pairing
    from planning.rollout.plan import Parked, ParkReason, RolloutPlan, resolve_plan
    from planning.rollout.runs import done, failed_groups
    from workflows import metrics, search_attributes, waiting
    from workflows.events import isvc_ref, record_event
    from workflows.names import ROLLOUT
    from workflows.parent import deliver
    from workflows.rollout import canary
    from workflows.rollout.messages import (
        ANSWERS_KEPT,
        QUERY_STATUS,
        SIGNAL_CANARY,
        SIGNAL_CLOSE,
        SIGNAL_PAUSE,
        SIGNAL_PROGRESS,
        SIGNAL_RESPEC,
        SIGNAL_ROLLOUT_CHANGED,
        SIGNAL_SUPERSEDE,
        UPDATE_CANARY,
        CanaryAnswer,
        CanaryRequest,
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

    @workflow.signal(name=SIGNAL_CLOSE)
    def close(self) -> None:
        self.state.closed = True
        self.seq += 1

    @workflow.signal(name=SIGNAL_RESPEC)
    def respec(self, rollout: dict[str, Any]) -> None:
        self.state.latest_rollout = rollout
        self.seq += 1

    @workflow.signal(name=SIGNAL_CANARY)
    def canary_request(self, request: CanaryRequest) -> None:
        """Applied at the next pass; a refusal is recorded as a Warning Event."""
        self.state.requests.append(request)
        self.seq += 1

    @workflow.update(name=UPDATE_CANARY)
    def canary_update(self, request: CanaryRequest) -> str:
        """The same request, answered: what it does, or (from the validator) the refusal."""
        self.state.requests.append(request)
        self.seq += 1
        return self.judge(request)[1]

    @canary_update.validator
    def validate_canary(self, request: CanaryRequest) -> None:
        accepted, answer = self.judge(request)
        if not accepted:
            raise ValueError(answer)

    def judge(self, request: CanaryRequest) -> tuple[bool, str]:
        """Accept or refuse `request` against the canary as it stands now (changing nothing)."""
        plan = self.plan()
        if not isinstance(plan, RolloutPlan):
            return False, REFUSED_NO_WORK
        if request.action == "repin":
            return True, "repin requested: answered when applied"
        group = canary.group_for(plan, request)
        if group is None:
            return False, REFUSED_STALE if len(canary.canary_groups(plan)) > 1 else REFUSED_NO_WORK
        steered = canary.steer(group, canary.load(self.state, group, workflow.now()), request, self.state.paused is not None)
        return steered.accepted, steered.message

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
        # The wait after a sample shows its verdict in the UI: the history reads as the analysis record.
        summary, self.state.sample_summary = self.state.sample_summary, None
        await waiting.wait_for_news(lambda: self.seq != seen, wake_at, SAFETY_RECHECK, summary=summary)

    async def pin_checked(self) -> RolloutPlan | Parked:
        """`pin`, and at the moment of pinning a canary's metrics source must be bound (§2.2)."""
        state = self.state
        was_pinned = state.pinned is not None
        plan = self.pin()
        if was_pinned or not isinstance(plan, RolloutPlan):
            return plan
        parked = await canary.park_reason(state, plan)
        if parked is None:
            return plan
        state.pinned = None
        if (parked.reason, parked.message) != (state.parked_reason, state.parked_message):
            state.parked_reason, state.parked_message, state.parked_announced = parked.reason, parked.message, False
        return parked

    async def step(self) -> datetime | None:
        """One pass: pin (or park), plan the allowances, record what is new, report."""
        state = self.state
        plan = await self.pin_checked()
        now = workflow.now()
        wakes: list[datetime] = []
        found: list[Allowance] = []
        progress: dict[str, ComponentProgress] = {}
        if isinstance(plan, RolloutPlan) and state.requests:
            await self.apply_requests(plan, now)
            plan = self.plan()  # a repin may have pinned another
        if isinstance(plan, RolloutPlan):
            progress = progress_of(state, plan.grouped)
            record_finishes(progress, state, now)
            progress = progress_of(state, plan.grouped)
            found = with_pairing(plan, progress, allowances(plan, progress, now), state.input.pairing_from)
            found += await self.step_canaries(plan, now, wakes)
            await self.record_failures(plan, progress)
            stepped = canary.canary_components(plan)
            moved = {name: target for name, target in state.input.targets.items() if name not in stepped}
            if state.closed:
                state.outcome = "Closed"
            elif state.superseded_by is not None:
                state.outcome = "Superseded"
            elif done(progress, moved) and canary.all_stable(state, plan):
                state.outcome = "Completed"
        else:
            await self.announce_park(plan)
            if state.closed:
                state.outcome = "Closed"
            elif state.superseded_by is not None:
                state.outcome = "Superseded"
        await self.send_report(report(state, workflow.info().workflow_id, plan, progress, found))
        wakes += [a.wake_at for a in found if a.wake_at is not None]
        return min(wakes) if wakes else None

    async def step_canaries(self, plan: RolloutPlan, now: datetime, wakes: list[datetime]) -> list[Allowance]:
        """Each canary group's pass (`workflows.rollout.canary`): the machine's decision and
        its Events, a sample when one is due; the allowances it grants."""
        state = self.state
        groups = canary.canary_groups(plan)
        if not groups:
            return []
        found: list[Allowance] = []
        for group in groups:
            decision = canary.decide(state, group, now)
            for event in decision.events:
                await record_event(self.isvc(), event.reason, event.message, event.type)
            found += canary.allowances(decision)
            if decision.wake_at is not None:
                wakes.append(decision.wake_at)
            if decision.sample is not None:
                state.sample_summary = await canary.take_sample(state, group, decision.sample, decision.state)
                wakes.append(workflow.now())  # its verdict enters the next pass at once
        return found

    async def apply_requests(self, plan: RolloutPlan, now: datetime) -> None:
        """The operator requests received since the last pass, in order; a refusal is recorded
        as a Warning Event with the refusal text (spec reference §3.2)."""
        state = self.state
        while state.requests:
            request = state.requests.pop(0)
            if request.action == "repin":
                await self.apply_repin(plan, request, now)
                continue
            if request.action == "discard":
                for group in canary.canary_groups(plan):
                    canary.save(state, group, canary.discard_pending(canary.load(state, group, now)))
                continue
            group = canary.group_for(plan, request)
            if group is None:
                text = REFUSED_STALE if len(canary.canary_groups(plan)) > 1 else REFUSED_NO_WORK
            else:
                steered = canary.steer(group, canary.load(state, group, now), request, state.paused is not None)
                if steered.accepted and steered.state is not None:
                    canary.save(state, group, steered.state)
                    self.answer(request, True, steered.message)
                    continue
                text = steered.message
            self.answer(request, False, text)
            refusal = steering.refusal_event(text)
            await record_event(self.isvc(), refusal.reason, f"{request.action}: {refusal.message}", refusal.type)

    async def apply_repin(self, plan: RolloutPlan, request: CanaryRequest, now: datetime) -> None:
        """Pin the live plan onto the running run (spec reference §4): its canary keeps its
        step, clamped; a topology change, a stale digest or an unrenderable source is refused."""
        state = self.state
        groups = canary.canary_groups(plan)
        group = groups[0] if len(groups) == 1 else None
        current = canary.load(state, group, now) if group is not None else None
        live = RolloutSpec.model_validate(request.rollout) if request.rollout is not None else None
        outcome = repin(request.revision or "", plan, live, str(state.input.run), current, now)
        metrics.rollout_repinned(state.input.namespace, outcome.result)
        if outcome.result == "applied":
            state.pinned = request.rollout
            new_group = next((g for g in outcome.plan.groups if g.canary is not None), None)
            if new_group is not None and outcome.canary is not None:
                canary.save(state, new_group, outcome.canary)
        self.answer(request, outcome.result == "applied", outcome.message)
        if outcome.event is not None:
            await record_event(self.isvc(), outcome.event.reason, outcome.event.message, outcome.event.type)

    def answer(self, request: CanaryRequest, accepted: bool, message: str) -> None:
        if request.request_id:
            answer = CanaryAnswer(request_id=request.request_id, action=request.action, accepted=accepted, message=message)
            self.state.answers = [*self.state.answers, answer][-ANSWERS_KEPT:]

    async def record_failures(self, plan: RolloutPlan, progress: dict[str, ComponentProgress]) -> None:
        """One `CoordinationGroupFailed` per group failure; the other components go on."""
        state = self.state
        # A canary group handles its own failures (§1.5): rollback or a failed hold.
        failed_now = [g for g in failed_groups(plan, progress) if g.canary is None]
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
