"""What a run shows: the report to its InferenceService and the `status` query's rows,
built from the pinned plan, the counts received and the allowances planned (no I/O).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import TypeAdapter

from models.inferenceservice import GroupCanary
from models.instance import UpdateStrategyType
from planning.replica.budget import SURGE_STRATEGIES
from planning.rollout.canary.state import CanaryState
from planning.rollout.canary.waiting import waiting
from planning.rollout.gates import Allowance, ComponentProgress
from planning.rollout.plan import GroupPlan, Parked, RolloutPlan
from planning.rollout.runs import allowance_of, group_phase, reported, strategy_column
from workflows.rollout.messages import AllowanceView, RolloutReport, RolloutRow, RolloutState, RolloutView

IN_PLACE = frozenset({UpdateStrategyType.IN_PLACE_IF_POSSIBLE.value, UpdateStrategyType.IN_PLACE_ONLY.value})


def progress_of(state: RolloutState, grouped: tuple[str, ...]) -> dict[str, ComponentProgress]:
    """Each grouped component as the plan counts it: counts of another revision than the
    run's target count as nothing moved yet."""
    targets, found = state.input.targets, {}
    for name in grouped:
        counts = state.counts.get(name)
        target = targets.get(name)
        replicas = state.input.replicas.get(name, 0)
        strategy = state.input.strategies.get(name, UpdateStrategyType.SURGE_THEN_DRAIN.value)
        on_target = counts is not None and target is not None and counts.revision == target
        found[name] = ComponentProgress(
            name=name,
            replicas=counts.replicas if counts is not None else replicas,
            changed=target is not None,
            updated=counts.updated if on_target and counts else 0,
            updated_serving=counts.updated_serving if on_target and counts else 0,
            serving=counts.serving if counts is not None else replicas,
            failed=counts.failed if on_target and counts else 0,
            surge_serving=counts.surge_serving if on_target and counts else 0,
            finished_at=state.finished_at.get(name),
            in_place=strategy in IN_PLACE,
            surges=UpdateStrategyType(strategy) in SURGE_STRATEGIES,
        )
    return found


def report(
    state: RolloutState,
    workflow_id: str,
    plan: RolloutPlan | Parked,
    progress: dict[str, ComponentProgress],
    found: list[Allowance],
) -> RolloutReport:
    """What the parent hears: the plan, each group's phase, each moved component's allowance
    (with a rolling-update group's budgets) and the `rollout status` rows."""
    assert state.started_at is not None
    shown = view(state, plan, progress, found)
    base = RolloutReport(
        run=state.input.run, workflow_id=workflow_id, started_at=state.started_at, targets=state.input.targets,
        outcome=state.outcome, reported=shown.reported, rows=shown.rows,
    )
    if isinstance(plan, RolloutPlan):
        base.canary = status_of(state, plan, state.input.pairing_protocol)
    base.answers = list(state.answers)
    if isinstance(plan, Parked):
        return base.model_copy(update={"parked_reason": plan.reason, "parked_message": plan.message})
    return base.model_copy(
        update={
            "plan_digest": plan.digest,
            "group_digests": [g.digest for g in plan.groups],
            "group_phases": phases_of(state, plan, progress),
            "allowances": {a.component: allowance_view(plan, a) for a in found},
        }
    )


def phases_of(state: RolloutState, plan: RolloutPlan, progress: dict[str, ComponentProgress]) -> list[str]:
    """Each group's phase: a canary group's is its canary's (§1.5), the others' their counts'."""
    paused = state.paused is not None
    return [
        str(state.canaries[str(g.index)]["phase"]) if str(g.index) in state.canaries else group_phase(g, progress, paused)
        for g in plan.groups
    ]


def allowance_view(plan: RolloutPlan, allowance: Allowance) -> AllowanceView:
    group = plan.group_of(allowance.component)
    hold = allowance.hold
    return AllowanceView(
        limit=allowance.limit,
        gate=hold.gate.value if hold else None,
        reason=hold.reason if hold else None,
        release=hold.release or None if hold else None,
        wake_at=allowance.wake_at,
        max_surge=group.max_surge if group is not None else None,
        max_unavailable=group.max_unavailable if group is not None else None,
        drain_hold=allowance.drain_hold.reason if allowance.drain_hold is not None else None,
        rollback_to=allowance.rollback_to,
        stable=allowance.stable,
    )


def view(
    state: RolloutState, plan: RolloutPlan | Parked, progress: dict[str, ComponentProgress], found: list[Allowance]
) -> RolloutView:
    base = RolloutView(run=state.input.run, started_at=state.started_at, reported="Unknown", outcome=state.outcome)
    if isinstance(plan, Parked):
        return base.model_copy(update={"parked_reason": plan.reason, "reported": "Paused"})
    phases = phases_of(state, plan, progress)
    rows = []
    for group, phase in zip(plan.groups, phases, strict=True):
        canary = canary_of(state, group)
        wait = waiting(group.canary, canary) if group.canary is not None and canary is not None else None
        for name in group.components:
            c = progress[name]
            allowance = allowance_of(found, name)
            hold = allowance.hold if allowance is not None else None
            gate, reason, release = (
                (hold.gate.value, hold.reason, hold.release or None) if hold
                else (wait.gate, wait.reason, wait.release) if wait
                else (None, None, None)
            )
            row = RolloutRow(
                group=group.index,
                component=name,
                strategy=strategy_column(plan, group),
                group_phase=phase,
                gate=gate,
                reason=reason,
                release=release,
                capacity=f"{c.updated}/{c.replicas}",
                ready=f"{c.updated_serving}/{c.replicas}",
                previous=state.input.previous.get(name),
                target=state.input.target_names.get(name) or state.input.targets.get(name),
                issues=["InstanceFailed"] if c.failed else [],
            )
            if group.canary is not None and canary is not None:
                row = row.model_copy(update=canary_columns(state, group.canary, canary, name))
            rows.append(row)
    return base.model_copy(update={"plan_digest": plan.digest, "rows": rows, "reported": reported(phases)})


def record_finishes(progress: dict[str, ComponentProgress], state: RolloutState, now: datetime) -> None:
    """Record when each moved component finished, last: one that stops serving its target on
    every Instance forgets it, so a sequence's soak counts from its next finish."""
    for name, c in progress.items():
        if not c.changed:
            continue
        if c.finished and name not in state.finished_at:
            state.finished_at[name] = now
        elif not c.finished:
            state.finished_at.pop(name, None)


CANARY_STATE: TypeAdapter[CanaryState] = TypeAdapter(CanaryState)


def canary_of(state: RolloutState, group: GroupPlan) -> CanaryState | None:
    """A canary group's canary as the run last kept it (None for the other groups)."""
    stored = state.canaries.get(str(group.index))
    return CANARY_STATE.validate_python(stored) if group.canary is not None and stored is not None else None


def status_of(state: RolloutState, plan: RolloutPlan, pairing: str | None) -> dict[str, Any]:
    """`status.components.<primary>`'s `rolloutPhase`, `canary` and `traffic` per canary group."""
    shown: dict[str, Any] = {}
    for group in plan.groups:
        canary = canary_of(state, group)
        if canary is not None:
            shown[canary.primary] = canary.to_status(state.input.isvc, pairing)
    return shown


def canary_columns(state: RolloutState, spec: GroupCanary, canary: CanaryState, component: str) -> dict[str, Any]:
    """PHASE, STEP and TRAFFIC of a canary group's row (§3.4); its GATE, REASON and release come
    from `planning.rollout.canary.waiting`."""
    total = len(spec.steps)
    weight = 0 if canary.phase in ("RollingBack", "RolledBack") else canary.observed_traffic_weight
    counts = state.counts.get(component)
    revision = canary.canary_revisions.get(component)
    ready_new = counts.updated_serving if counts is not None and counts.revision == revision else 0
    serving = counts.serving if counts is not None else 0
    observed = round(100 * ready_new / serving) if serving else 0
    return {
        "phase": canary.phase,
        "step": f"{min(canary.current_step + 1, total)}/{total}",
        "traffic": f"{weight}% -> {observed}%",
    }
