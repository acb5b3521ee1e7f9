"""The InferenceReplica workflow's projections outward: the object's status, the UI's phase,
and the totals and condition its parent InferenceService reads.

`build_status` renders them from the facts (`workflows.replica.view`); `publish` writes the
status and reports to the parent, paced by `planning.replica.publish`; `report` is also the
last word of a deleted InferenceReplica. Nothing here starts or signals an Instance.

Imported by the workflow modules inside `workflow.unsafe.imports_passed_through()`.
"""

from __future__ import annotations

from collections.abc import Awaitable
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow

from models.inferencereplica import CoordinationGroupRefRow, InferenceReplicaStatus
from models.instance import InstancePhase, InstanceStatus
from models.kube_ops import PatchStatusInput
from planning.replica.budget import minimum_serving
from planning.replica.conditions import (
    PlannedCondition,
    component_condition,
    drain_overdue_condition,
    gang_scheduling_condition,
    next_drain_deadline,
    ready_condition,
    ready_timeout_condition,
    rollout_progress,
)
from planning.replica.coordination import Coordination
from planning.replica.facts import replica_counts
from planning.replica.handover import handover_rows
from planning.replica.migration_views import migration_records, migration_rows, policy_condition
from planning.replica.overlay import as_deleting, earliest
from planning.replica.publish import condition_key, decide_publish, digest
from planning.replica.rollback import revision_counts, stable_missing
from planning.replica.status import project_status, with_transitions
from planning.replica.template import instance_ready_timeout_seconds
from workflows import kube_calls, metrics, search_attributes
from workflows.names import rollout_workflow_id
from workflows.parent import deliver
from workflows.replica import view
from workflows.replica.batches import pods_per_instance
from workflows.replica.children import send_all
from workflows.replica.messages import SIGNAL_REPLICA_CHANGED, ReplicaReport, ReplicaState
from workflows.replica.object import ir_ref

CLEARED_WHEN_UNSET = ("rolloutHold", "coordinationGroupRef")
"""Status fields that come and go: absent from the status, they are removed from the object."""
DRAIN_NOTICE = timedelta(seconds=1)
"""A drain is overdue just after its deadline: the status is looked at a moment later."""


CONDITIONS_ADDED = {"DrainOverdue": "DrainsWithinDeadline"}
"""Conditions added after InferenceReplicas ran, and their reason at rest: left out of the
status fingerprints while at rest, so a run continued from before writes nothing new."""


def addition_at_rest(kind: str, reason: str | None) -> bool:
    return CONDITIONS_ADDED.get(kind) == reason


def without_additions_at_rest(body: dict[str, Any]) -> dict[str, Any]:
    """`body` as the fingerprint sees it: without the added conditions while at rest."""
    conditions = body.get("conditions")
    if not conditions:
        return body
    kept = [c for c in conditions if not addition_at_rest(c.get("type", ""), c.get("reason"))]
    return {**body, "conditions": kept}


def launched_rows(state: ReplicaState) -> list[InstanceStatus]:
    """The Instances started and not heard from yet, as their first report would show them
    (a single-pod Instance sends none: `InstanceState.launched_by_parent`), or as `Deleting`
    once told to go (`counts_launched_removals`: it may send none until its end); none in runs
    that did not take `shows_launched`."""
    if not state.shows_launched:
        return []
    config = state.config
    rows = [
        InstanceStatus(
            namespace=config.namespace,
            isvc=config.isvc,
            component=config.component,
            index=index,
            phase=InstancePhase.CREATING,
            incarnation=1,
            target_revision=revision,
            desired_pods=pods_per_instance(state, revision),
        )
        for index, revision in state.launched.items()
        if index not in state.instances
    ]
    asked = state.requested_deletes if state.counts_launched_removals else {}
    return [
        as_deleting(row, asked[row.index].since, asked[row.index].deadline) if row.index in asked else row
        for row in rows
    ]


def build_status(state: ReplicaState, now: datetime) -> tuple[InferenceReplicaStatus, PlannedCondition]:
    """The InferenceReplica status, and the InferenceService's `<Component>Ready` condition."""
    config = state.config
    policy = view.policy(config)
    desired = state.last_desired if state.last_desired is not None else view.desired(config)
    facts = [fact for fact in view.facts(state) if fact.index not in state.removing]
    # While rolling back, the revision Instances move to is the stable one (`view.target_hash`).
    target = view.target_hash(state)
    counts = replica_counts(facts, target, now, policy.min_ready_seconds)
    minimum = minimum_serving(policy, desired)
    progress = rollout_progress(facts, target, policy.partition) if facts else None
    planned = [
        ready_condition(desired, counts, minimum, progress),
        gang_scheduling_condition(config.effective.is_multi_pod, bool(state.podgroup_crd)),
        ready_timeout_condition(instance_ready_timeout_seconds(config.effective, config.cluster)),
    ]
    # Constant (False) unless an Instance reports a drain deadline, so a history from before
    # the condition writes its status at the same moments.
    planned.append(drain_overdue_condition(list(view.drain_deadlines(state).items()), now))
    migration_policy = policy_condition(state.migrations)
    if migration_policy is not None:
        planned.append(migration_policy)
    names = view.names(state)
    status = project_status(
        isvc=config.isvc,
        component=config.component,
        generation=config.generation,
        instances=[*view.reports(state).values(), *launched_rows(state)],
        counts=counts,
        revisions=view.shown_revisions(state),
        retry_blocks=[view.named(block, names) for block in view.retry_blocks(state)],
        hold=state.hold,
        conditions=planned,
        previous_conditions=state.conditions,
        now=now,
        row_of=state.memo.rows,
    )
    ref = group_ref(config.namespace, config.isvc, config.coordination, config.home)
    if ref is not None:
        status = status.model_copy(update={"coordination_group_ref": ref})
    if state.gang_surges:
        # A handover's source knows nothing of it: its row shows the replacement's progress.
        rows = handover_rows(status.instance_statuses, state.gang_surges)
        status = status.model_copy(update={"instance_statuses": rows})
    if state.migrations:
        rows = migration_rows(status.instance_statuses, state.migrations)
        status = status.model_copy(
            update={"instance_statuses": rows, "migrations": migration_records(state.migrations)}
        )
    return status, component_condition(config.component, desired, counts, minimum)


def group_ref(
    namespace: str, isvc: str, coordination: Coordination | None, home: str | None = None
) -> CoordinationGroupRefRow | None:
    """`coordinationGroupRef`: the run and group moving this component, once the run pinned its plan."""
    if coordination is None or coordination.group is None:
        return None
    return CoordinationGroupRefRow(
        rollout=rollout_workflow_id(namespace, isvc, coordination.run, home),
        run=coordination.run,
        group=coordination.group,
        phase=coordination.group_phase or "Progressing",
    )


def phase_of(state: ReplicaState, status: InferenceReplicaStatus) -> str:
    """One word for the UI's `OmePhase` column."""
    ready = status.condition("Ready")
    if state.deleting:
        return "Deleting"
    if state.config.paused:
        return "Paused"
    if ready is None:
        return "Progressing"
    if ready.reason == "RolloutInProgress":
        return "Updating"
    if ready.reason == "InstanceFailed":
        return "Failed"
    return "Ready" if ready.status == "True" else "Progressing"


async def publish(state: ReplicaState, now: datetime) -> datetime | None:
    """Write the status, tell the parent, and keep the UI's phase current.

    Paced by `planning.replica.publish`: a large component's count-only changes are written
    at most every few seconds. Returns when a held-back write is due (None: none is).
    """
    status, component = build_status(state, now)
    state.conditions = status.conditions
    body = status.to_manifest()
    fingerprint = digest(without_additions_at_rest(body))
    phase = phase_of(state, status)
    key = digest([condition_key([c for c in status.conditions if not addition_at_rest(c.type, c.reason)]), (component.type, component.status, component.reason), phase])
    decision = decide_publish(
        changed=fingerprint != state.written_status or key != state.published_key,
        urgent=key != state.published_key,
        last_written_at=state.status_written_at,
        instances=len(state.instances),
        now=now,
    )
    upcoming = next_drain_deadline(list(view.drain_deadlines(state).items()), now)
    drain_wake = upcoming + DRAIN_NOTICE if upcoming is not None else None
    if not decision.write:
        return earliest(decision.wake_at, drain_wake)
    state.status_written_at = now
    state.published_key = key
    # The status write and the report to the parent go out in the same workflow task.
    sends: list[Awaitable[object]] = []
    if fingerprint != state.written_status:
        state.written_status = fingerprint
        sends.append(write_status(state, status, body))
    sends.append(report(state, deleted=False, status=status, component=component))
    await send_all(sends)
    return earliest(decision.wake_at, drain_wake)


async def write_status(state: ReplicaState, status: InferenceReplicaStatus, body: dict[str, Any]) -> None:
    """Patch the object's status to `body` (a missing object is no error)."""
    ready = status.condition("Ready")
    hold = status.rollout_hold
    # A merge patch keeps what it does not name: a cleared hold or group ref is sent as null.
    cleared = {key: None for key in CLEARED_WHEN_UNSET if key not in body}
    await kube_calls.patch_status(
        PatchStatusInput(ref=ir_ref(state), status={**body, **cleared}, missing_ok=True),
        summary=f"status of {state.config.ir_name}: {status.ready_replicas}/{state.last_desired} Ready"
        + (f", {ready.reason}" if ready is not None else "")
        + (f", hold {hold.gate}: {hold.reason}" if hold is not None else ""),
        local=state.writes_status_locally,
    )


def surge_serving(state: ReplicaState) -> int:
    """Instances at the drain step of a SurgeThenDrain to the update revision (a rollback's
    stable one while rolling back), still serving; not one told to delete."""
    target = view.target_hash(state)
    return sum(
        1
        for status in view.reports(state).values()
        if status.operation is not None
        and status.operation.step == "SurgeDrain"
        and status.target_revision == target
        and status.serving
    )


def failed_on_update(state: ReplicaState) -> int:
    """Instances Failed on, or on their way to, the update revision (a rollback's while rolling
    back); not one told to delete."""
    target = view.target_hash(state)
    return sum(
        1
        for status in view.reports(state).values()
        if status.phase == InstancePhase.FAILED and status.target_revision == target
    )


def on_revision(state: ReplicaState) -> dict[str, int]:
    """While rolling back: Instances per revision hash they run or move to; empty otherwise."""
    if not view.steering(state).rolling_back:
        return {}
    return revision_counts(view.facts(state))


def stable_revision_missing(state: ReplicaState) -> bool:
    """The revision the rollout run names to return to is not retained here."""
    config = state.config
    return stable_missing(config.revision_hash, config.coordination, state.specs) is not None


async def report(
    state: ReplicaState,
    deleted: bool,
    status: InferenceReplicaStatus | None = None,
    component: PlannedCondition | None = None,
) -> None:
    """Tell the parent the totals and its `<Component>Ready` condition (never the rows:
    per-Instance rows are not mirrored on the InferenceService, spec reference §7)."""
    config = state.config
    now = workflow.now()
    if status is None or component is None:
        status, component = build_status(state, now)
    # The InferenceService keeps its own transition times (planning.service.status).
    (condition,) = with_transitions([], [component], now, config.generation)
    phase = "Deleted" if deleted else phase_of(state, status)
    if deleted:
        # The state gauges go with the object (the controller renders them from it); the
        # deferred-Instances gauge lives in this worker's runtime: zero it, or the last wave stays shown.
        metrics.scale_down_wave(config.namespace, config.isvc, config.component, 0, 0, False)
    message = ReplicaReport(
        component=config.component,
        status=status.model_copy(update={"instance_statuses": []}),
        condition=condition,
        phase=phase,
        deleted=deleted,
        # What only a rollout run reads, sent only while one coordinates this component.
        surge_serving=surge_serving(state) if config.coordination is not None else 0,
        failed_on_update=failed_on_update(state) if config.coordination is not None else 0,
        on_revision=on_revision(state),
        stable_revision_missing=stable_revision_missing(state),
    )
    # Counts at 0 (and the rollback's fields unset) leave the fingerprint as reports had it
    # before they existed.
    unchanged: dict[str, Any] = {"condition": {"last_transition_time"}}
    for count in ("surge_serving", "failed_on_update", "on_revision", "stable_revision_missing"):
        if not getattr(message, count):
            unchanged[count] = True
    if status.coordination_group_ref is None:
        unchanged["status"] = {"coordination_group_ref"}
    dumped = message.model_dump(mode="json", exclude=unchanged)
    dumped["status"] = without_additions_at_rest(dumped["status"])
    fingerprint = digest(dumped)
    if fingerprint == state.reported:
        return
    state.reported = fingerprint
    workflow.upsert_search_attributes([search_attributes.PHASE.value_set(phase)])
    parent = config.parent_workflow_id
    if parent is None:
        return
    await deliver(parent, SIGNAL_REPLICA_CHANGED, message)
