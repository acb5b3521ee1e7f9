"""The InferenceService's side of its rollout runs (spec: the rollout groups page; reference
§4, §6): opening a `Rollout` child when a change moves grouped components, superseding it
when a newer revision arrives mid-run, forwarding the InferenceReplicas' counts, the pause
and (while parked) `spec.rollout` to it, and turning its allowances into each grouped
InferenceReplica's `Coordination`.

The decisions are `planning.service.rollout.run_change` and the Rollout's own planning;
this module carries them out. Components in no group roll out on their own, as before.
"""

from __future__ import annotations

import json
from typing import Any

from temporalio import workflow
from temporalio.exceptions import WorkflowAlreadyStartedError

from models.inferenceservice import InferenceService
from planning.replica.budget import update_policy
from planning.replica.coordination import Coordination, opening
from planning.service.components import ComponentPlan
from planning.service.rollout import RunChange, RunSeen, run_change
from workflows.names import ROLLOUT, rollout_workflow_id
from workflows.parent import deliver
from workflows.replica.messages import ReplicaReport
from workflows.rollout.messages import (
    SIGNAL_PAUSE,
    SIGNAL_PROGRESS,
    SIGNAL_RESPEC,
    SIGNAL_SUPERSEDE,
    ComponentCounts,
    RolloutInput,
    RolloutReport,
)
from workflows.service import canary_requests
from workflows.service.messages import (
    RolloutTracking,
    ServiceState,
)

RUN_TRACKED_BEFORE_START = "rollout-run-tracked-before-start"
"""`workflow.patched` id: a new run is tracked before its start is awaited. The run's first
report can reach this workflow in the same task as the news that the run started (when that task
was delayed: a worker died); signals are handled first in a task, so histories from before
dropped that report as a stranger's, and the components held on `Plan` until the run reported
again (its next report is due only when something changes or its backstop timer fires)."""

COORDINATION_GROUP_REF = "coordination-group-ref"
"""`workflow.patched` id: the coordination an InferenceReplica receives names its group and the
group's phase (its `status.coordinationGroupRef`)."""


def grouped_components(isvc: InferenceService) -> list[str]:
    rollout = isvc.spec.rollout
    return [c for g in (rollout.groups or []) for c in g.components] if rollout is not None else []


def asked(state: ServiceState, isvc: InferenceService, plans: list[ComponentPlan]) -> dict[str, str]:
    """Grouped components whose spec asks for another revision than the one serving."""
    grouped = set(grouped_components(isvc))
    found = {}
    for plan in plans:
        report = state.replicas.get(plan.name)
        current = report.status.current_revision if report is not None and not report.deleted else None
        if plan.name in grouped and plan.omenative and current is not None and current != plan.revision_name:
            found[plan.name] = plan.revision_name
    return found


def decide(state: ServiceState, isvc: InferenceService, plans: list[ComponentPlan]) -> RunChange:
    tracking = state.rollout
    active = tracking.target_names if tracking.run is not None else None
    last = tracking.target_names if tracking.run is None and tracking.target_names else None
    grouped = set(grouped_components(isvc))
    wanted = {plan.name: plan.revision_name for plan in plans if plan.name in grouped and plan.omenative}
    return run_change(asked(state, isvc, plans), active, last, wanted)


def desired(state: ServiceState, plan: ComponentPlan) -> int:
    return state.transient.get(plan.name, plan.min_replicas)


def revision_hash_of(revision: str) -> str:
    """`<isvc>-<component>-rev-<hash>` -> `<hash>` (a bare hash stays as it is)."""
    return revision.rsplit("-rev-", 1)[-1]


def set_min_replicas(isvc: InferenceService, components: list[str]) -> dict[str, int]:
    """`minReplicas` as set in the InferenceService (runtime defaults do not count, §1.3)."""
    found: dict[str, int] = {}
    for name in components:
        spec = getattr(isvc.spec, name, None)
        if spec is not None and spec.min_replicas is not None:
            found[name] = spec.min_replicas
    return found


async def open_run(
    state: ServiceState, isvc: InferenceService, plans: list[ComponentPlan], change: RunChange
) -> None:
    """Supersede the active run if asked, then start the new one (ID: this generation)."""
    tracking = state.rollout
    run = state.generation
    if change.supersede and tracking.run is not None:
        # A run that closed meanwhile needs no telling.
        await deliver(rollout_workflow_id(isvc.namespace, isvc.name, tracking.run, state.home), SIGNAL_SUPERSEDE, run)
        if not change.open:
            # The spec asks again for what serves: nothing to move, no run to open.
            state.rollout = RolloutTracking(pairing=tracking.pairing)
            return
    by_name = {plan.name: plan for plan in plans}
    moved = [by_name[name] for name in change.open]
    previous = {
        p.name: report.status.current_revision or ""
        for p in moved
        if (report := state.replicas.get(p.name)) is not None
    }
    rollout = isvc.spec.rollout
    run_input = RolloutInput(
        namespace=isvc.namespace,
        isvc=isvc.name,
        isvc_uid=state.isvc_uid,
        run=run,
        rollout=rollout.model_dump(mode="json", by_alias=True, exclude_none=True) if rollout else {},
        targets={p.name: p.revision_hash for p in moved},
        target_names=dict(change.open),
        previous=previous,
        replicas={p.name: desired(state, p) for p in moved},
        strategies={p.name: update_policy(p.effective.lifecycle, state.cluster.update_policy).strategy.value for p in moved},
        paused=state.pause.value if state.pause is not None else None,
        parent_workflow_id=workflow.info().workflow_id,
        pairing_from=tracking.pairing,
        pairing_protocol=rollout.pairing_protocol if rollout is not None else None,
        min_replicas=set_min_replicas(isvc, [p.name for p in moved]),
        stable={name: revision_hash_of(revision) for name, revision in previous.items() if revision},
        annotations=dict(isvc.metadata.annotations or {}),
    )
    names = ", ".join(f"{p.name} -> {p.revision_name}" for p in moved)
    opened = RolloutTracking(
        pairing=tracking.pairing,
        run=run,
        targets=dict(run_input.targets),
        target_names=dict(change.open),
        forwarded={"pause": _fingerprint(run_input.paused), "respec": _fingerprint(run_input.rollout)},
    )
    tracked_early = workflow.patched(RUN_TRACKED_BEFORE_START)
    if tracked_early:
        state.rollout = opened
    try:
        await workflow.start_child_workflow(
            ROLLOUT,
            run_input,
            id=rollout_workflow_id(isvc.namespace, isvc.name, run, state.home),
            # Continue-as-new of this workflow must not end the run.
            parent_close_policy=workflow.ParentClosePolicy.ABANDON,
            static_summary=f"Rollout run {run} of {isvc.name}: {names}",
        )
    except WorkflowAlreadyStartedError:
        pass  # opened by an earlier run of this workflow: adopt it
    if not tracked_early:
        state.rollout = opened


def at_rest(state: ServiceState, isvc: InferenceService) -> None:
    """No run active nor asked for: the grouped components serve the spec's pairing token."""
    rollout = isvc.spec.rollout
    state.rollout.pairing = rollout.pairing_protocol if rollout is not None else None


COUNTS_ADDITIONS = ("stable_missing", "on_revisions")


def _fingerprint(payload: Any) -> str:
    if isinstance(payload, ComponentCounts):
        # Fields added after runs existed count only once set, so a running service resends nothing.
        unset = {name for name in COUNTS_ADDITIONS if not getattr(payload, name)}
        return payload.model_dump_json(exclude=unset or None)
    if hasattr(payload, "model_dump_json"):
        return str(payload.model_dump_json())
    return json.dumps(payload, sort_keys=True)


def counts_of(tracking: RolloutTracking, component: str, report: ReplicaReport, replicas: int) -> ComponentCounts:
    """A component's counts as the run reads them: the revision as the run's target hash
    when the InferenceReplica already moves to it."""
    status = report.status
    target_name = tracking.target_names.get(component)
    on_target = status.update_revision == target_name
    # A failed Instance on the target, or a failed attempt at it (its retry block), fails the group.
    failing = report.failed_on_update > 0 or any(block.target_revision == target_name for block in status.retry_blocks)
    return ComponentCounts(
        component=component,
        revision=tracking.targets[component] if on_target else status.update_revision,
        replicas=replicas,
        updated=status.updated_replicas,
        updated_serving=status.updated_ready_replicas,
        serving=status.serving_replicas,
        failed=1 if failing else 0,
        surge_serving=report.surge_serving if on_target else 0,
        stable_missing=report.stable_revision_missing,
        on_revisions=dict(report.on_revision),
    )


async def forward(state: ServiceState, isvc: InferenceService, plans: list[ComponentPlan]) -> None:
    """Tell the active run what changed since it last heard: counts, pause, parked spec."""
    tracking = state.rollout
    if tracking.run is None:
        return
    run_id = rollout_workflow_id(isvc.namespace, isvc.name, tracking.run, state.home)
    by_name = {plan.name: plan for plan in plans}
    outgoing: list[tuple[str, str, Any]] = []
    for component in tracking.targets:
        report, plan = state.replicas.get(component), by_name.get(component)
        if report is not None and plan is not None:
            counts = counts_of(tracking, component, report, desired(state, plan))
            outgoing.append((component, SIGNAL_PROGRESS, counts))
    pause = state.pause.value if state.pause is not None else None
    outgoing.append(("pause", SIGNAL_PAUSE, pause))
    if tracking.report is not None and tracking.report.parked_reason is not None:
        rollout = isvc.spec.rollout
        outgoing.append(("respec", SIGNAL_RESPEC, rollout.model_dump(mode="json", by_alias=True, exclude_none=True) if rollout else {}))
    for key, signal, payload in outgoing:
        fingerprint = _fingerprint(payload)
        if tracking.forwarded.get(key) == fingerprint:
            continue
        if not await deliver(run_id, signal, payload):
            # The run has closed (its last report may still be on its way): stop coordinating.
            tracking.run = None
            return
        tracking.forwarded[key] = fingerprint
    if not await canary_requests.forward(state, run_id):
        tracking.run = None


def on_report(tracking: RolloutTracking, report: RolloutReport) -> bool:
    """Keep the report of the active run, or the late last words of the run just closed (a
    failed signal closed it here first); a closed run stops coordinating. False: stale."""
    latest = tracking.report.run if tracking.report is not None else None
    late = tracking.run is None and report.run == latest and report.outcome is not None
    if report.run != tracking.run and not late:
        return False  # a superseded run's last words, or a closed run's news
    tracking.report = report
    if report.outcome is not None:
        tracking.run = None
    return True


def coordination(tracking: RolloutTracking, component: str) -> Coordination | None:
    """What a grouped component's InferenceReplica may do now; None outside an active run."""
    if tracking.run is None or component not in tracking.targets:
        return None
    target = tracking.targets[component]
    report = tracking.report
    allowance = report.allowances.get(component) if report is not None else None
    if allowance is None:
        closed = opening(tracking.run, target)
        if report is not None and report.parked_reason is not None:
            reason = f"rollout run {tracking.run} parked ({report.parked_reason}): {report.parked_message}"
            return Coordination(closed.run, target, 0, closed.gate, reason)
        return closed
    row = next((r for r in report.rows if r.component == component), None) if report is not None else None
    # Histories recorded before the group's phase reached the InferenceReplica sent configs without it.
    shown = row is not None and workflow.patched(COORDINATION_GROUP_REF)
    return Coordination(
        tracking.run, target, allowance.limit, allowance.gate, allowance.reason,
        allowance.max_surge, allowance.max_unavailable, allowance.drain_hold,
        group=row.group if shown and row is not None else None,
        group_phase=row.group_phase if shown and row is not None else None,
        stable=allowance.stable,
        rollback_to=allowance.rollback_to,
    )


def run_seen(tracking: RolloutTracking) -> RunSeen | None:
    """The run as status shows it: opening until its first report; None before any run."""
    report = tracking.report
    if report is None:
        if tracking.run is None:
            return None
        return RunSeen(tracking.run, None, dict(tracking.target_names), None, [], [])
    return RunSeen(
        run=report.run,
        started_at=report.started_at,
        targets={name: tracking.target_names.get(name, rev) for name, rev in report.targets.items()},
        plan_digest=report.plan_digest,
        group_digests=list(report.group_digests),
        group_phases=list(report.group_phases),
        parked_reason=report.parked_reason,
        parked_message=report.parked_message,
        outcome=report.outcome,
    )
