"""What the InferenceService's rollout queries answer (`rollout_status`, `explain`, `preview`),
computed from the runs' reports and the same planning the runs use; no I/O, no state change.
"""

from __future__ import annotations

from datetime import datetime

from models.duration import format_duration
from models.inferenceservice import InferenceService
from planning.replica.budget import update_policy
from planning.rollout.preview import preview
from planning.service.components import ComponentPlan
from planning.service.rollout import conditions as rollout_conditions
from workflows.rollout.messages import RolloutRow
from workflows.service.messages import (
    ExplainView,
    PreviewGroupView,
    PreviewView,
    RolloutStatusView,
    ServiceState,
)
from workflows.service.rollouts import desired, grouped_components, run_seen


def status_view(state: ServiceState, isvc: InferenceService) -> RolloutStatusView:
    tracking, report = state.rollout, state.rollout.report
    if report is None:
        if tracking.run is not None:
            return RolloutStatusView(reported="InProgress", run=tracking.run, active=True)
        reported = "NotConfigured" if not grouped_components(isvc) else "Succeeded"
        return RolloutStatusView(reported=reported)
    return RolloutStatusView(
        reported=report.reported if report.outcome is None else "Succeeded",
        run=report.run,
        active=tracking.run is not None,
        plan_digest=report.plan_digest,
        parked_reason=report.parked_reason,
        outcome=report.outcome,
        rows=list(report.rows),
    )


def explain_view(state: ServiceState, isvc: InferenceService, component: str, now: datetime) -> ExplainView:
    replica = state.replicas.get(component)
    hold = replica.status.rollout_hold if replica is not None else None
    base = ExplainView(
        component=component,
        grouped=component in grouped_components(isvc),
        gate=hold.gate if hold else None,
        reason=hold.reason if hold else None,
        since=hold.since if hold else None,
        target=hold.target if hold else None,
        updated=replica.status.updated_replicas if replica else 0,
        replicas=replica.status.replicas if replica else 0,
    )
    if not base.grouped:
        why = f"waits at {base.gate}: {base.reason}" if base.gate else "nothing holds it"
        return base.model_copy(update={"summary": f"{component} is in no rollout group and rolls out on its own; {why}"})
    tracking = state.rollout
    ready, drift = rollout_conditions(run_seen(tracking), isvc.spec.rollout)
    groups = isvc.spec.rollout.groups if isvc.spec.rollout is not None else None
    group = next((i for i, g in enumerate(groups or []) if component in g.components), None)
    report = tracking.report if tracking.run is not None else None
    allowance = report.allowances.get(component) if report is not None else None
    found = base.model_copy(
        update={
            "group": group,
            "run": tracking.run,
            "plan_ready": f"{ready.status}/{ready.reason}",
            "drift": f"{drift.status}/{drift.reason}",
        }
    )
    if tracking.run is None:
        return found.model_copy(update={"summary": f"no rollout run is active; {component} is at rest"})
    if allowance is None:
        why = report.parked_message if report is not None and report.parked_reason else "the run is pinning its plan"
        return found.model_copy(update={"gate": "Plan", "reason": why, "summary": f"{component} waits at Plan: {why}"})
    left = None
    if allowance.wake_at is not None and allowance.wake_at > now:
        left = format_duration(round((allowance.wake_at - now).total_seconds()))
    found = found.model_copy(
        update={
            "limit": allowance.limit,
            "gate": allowance.gate or found.gate,
            "reason": allowance.reason or found.reason,
            "release": allowance.release,
            "time_left": left,
        }
    )
    row = next((r for r in report.rows if r.component == component), None) if report is not None else None
    if row is not None and row.phase is not None:
        # A canary group's components move as its canary does: what it waits for is the answer.
        update = {"gate": row.gate, "reason": row.reason, "release": row.release, "summary": canary_summary(row)}
        return found.model_copy(update=update)
    if allowance.gate is None:
        summary = f"{component} may have {allowance.limit} Instances on the new revision now"
    else:
        summary = f"{component} waits at {allowance.gate}: {allowance.reason}"
        if allowance.release:
            summary += f"; released by {allowance.release}"
        if left:
            summary += f" ({left} left)"
    return found.model_copy(update={"summary": summary})


def preview_view(
    state: ServiceState, current: InferenceService | None, new: InferenceService, plans: list[ComponentPlan]
) -> PreviewView:
    """The plan `new` would run against what serves now."""
    moves = {}
    for plan in plans:
        report = state.replicas.get(plan.name)
        serving = report.status.current_revision if report is not None and not report.deleted else None
        if plan.omenative and serving is not None and serving != plan.revision_name:
            moves[plan.name] = plan.revision_name
    by_name = {plan.name: plan for plan in plans}
    old_token = current.spec.rollout.pairing_protocol if current is not None and current.spec.rollout else None
    new_token = new.spec.rollout.pairing_protocol if new.spec.rollout else None
    shown = preview(
        new.spec.rollout,
        moves,
        {name: desired(state, by_name[name]) for name in moves},
        {name: update_policy(by_name[name].effective.lifecycle, state.cluster.update_policy).surges for name in moves},
        pairing_change=old_token is not None and new_token is not None and old_token != new_token,
    )
    return PreviewView(
        accepted=True,
        moves=moves,
        groups=[
            PreviewGroupView(
                index=g.index, components=list(g.components), strategy=g.strategy, moves=list(g.moves),
                batches=g.batches, gates=list(g.gates), soak=g.soak,
            )
            for g in shown.groups
        ],
        stages=[list(stage) for stage in shown.stages],
        independent=list(shown.independent),
        parked=shown.parked,
        notes=list(shown.notes),
    )


def canary_summary(row: RolloutRow) -> str:
    """Where a canary component stands and what moves it on (spec reference §1.4, §3.4)."""
    summary = f"{row.component} is at canary step {row.step} ({row.phase}), traffic {row.traffic}"
    if row.reason:
        summary += f"; {row.reason}"
    if row.release:
        summary += f"; released by {row.release}"
    return summary
