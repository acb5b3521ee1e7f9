"""Migrations as the InferenceReplica workflow carries them out (`planning.replica.migrations`).

Each pass folds in the `migrate` orders and `cancel_migration` requests that arrived, plans
every ticket of the component, and acts: starts the replacement (an `Instance` child at the
lowest unused index, its pods kept off the source node), drains the source once the
replacement serves settled, deletes the replacement of a failed migration, records the
Events, and tells each ticket's `Migration` workflow of its change (`migration_changed`).

Imported by the workflow modules inside `workflow.unsafe.imports_passed_through()`.
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import replace
from datetime import datetime, timedelta

from models.instance import InstancePhase, UpdateStrategyType
from models.kube_ops import ListInstancePodsInput
from models.migration import MigrationPhase
from planning.replica.handover import cleaning_up
from planning.replica.migration_views import placed_away
from planning.replica.migrations import (
    MigrationContext,
    MigrationTicket,
    SurgeStart,
    fail_all,
    not_started,
    plan_migrations,
    retained,
)
from planning.replica.publish import digest
from planning.replica.template import instance_ready_timeout_seconds
from workflows import kube_calls
from workflows.parent import deliver
from workflows.replica import view
from workflows.replica.children import RunChildren, send_all, spec_for, start_instance
from workflows.replica.deletions import tell_to_delete
from workflows.replica.messages import ReplicaState
from workflows.replica.object import record

SIGNAL_MIGRATION_CHANGED = "migration_changed"
"""The `Migration` workflow's signal for a `MigrationProgress` (its contract names it too)."""
MIGRATED = "Migrated"
"""Delete reason of a source whose replacement serves: the Instance's own history names it."""
MIGRATION_FAILED = "MigrationFailed"
"""Delete reason of the replacement of a migration that failed or was cancelled."""


def fold_orders(state: ReplicaState) -> None:
    """Take in the `migrate` orders and cancels that arrived since the last pass."""
    config = state.config
    timeout = instance_ready_timeout_seconds(config.effective, config.cluster)
    tickets = {ticket.uuid: ticket for ticket in state.migrations}
    for order in state.migration_orders:
        request = order.request
        uuid = request.uuid or ""
        known = tickets.get(uuid)
        # Sent again: tell its workflow again, with the caps in force now.
        state.migrations_told.pop(uuid, None)
        if known is not None:
            tickets[uuid] = replace(known, audit=order.audit, workflow_id=order.workflow_id or known.workflow_id)
            continue
        tickets[uuid] = MigrationTicket(
            uuid=uuid,
            instance=request.instance,
            from_node=request.from_node,
            accepted_at=order.accepted_at,
            deadline=order.accepted_at + timedelta(seconds=timeout) if timeout else None,
            hint_target_nodes=tuple(request.hint_target_nodes),
            reason=request.reason,
            requested_by=request.requested_by,
            workflow_id=order.workflow_id,
            audit=order.audit,
        )
    for cancel in state.migration_cancels:
        ticket = tickets.get(cancel.uuid)
        if ticket is not None and ticket.active:
            tickets[cancel.uuid] = replace(ticket, cancel_requested=cancel.by)
    state.migration_orders = []
    state.migration_cancels = []
    state.migrations = list(tickets.values())


def update_surge_in_flight(state: ReplicaState) -> bool:
    """An update's surge moves an Instance now (a SurgeThenDrain, or a multi-pod handover)."""
    if state.gang_surges:
        return True
    return any(
        fact.operation == "Update" and fact.operation_strategy == UpdateStrategyType.SURGE_THEN_DRAIN
        for fact in view.raw_facts(state)
    )


def context(
    state: ReplicaState, run: RunChildren, now: datetime, listed_nodes: dict[int, list[str]]
) -> MigrationContext:
    config = state.config
    lifecycle = config.effective.lifecycle
    mode = lifecycle.migration_policy.mode if lifecycle and lifecycle.migration_policy else None
    failed = {
        index: (status.last_failure.pod_name or "", status.last_failure.reason or "")
        for index, status in state.instances.items()
        if status.phase == InstancePhase.FAILED and status.last_failure is not None
    }
    return MigrationContext(
        component=config.component,
        now=now,
        mode=mode or "Auto",
        paused=config.paused,
        min_ready_seconds=view.policy(config).min_ready_seconds,
        update_surge_in_flight=update_surge_in_flight(state),
        nodes={index: status.node_names or listed_nodes.get(index, []) for index, status in state.instances.items()},
        failed_pods=failed,
        # An index whose Instance reported its end in this run may still be closing: a
        # replacement started there would find it running (`children.start_instance`).
        reserved_indexes=[
            *state.removing,
            *state.launched,
            *cleaning_up(state.gang_surges),
            *sorted(run.ended),
        ],
        drain_deadlines=view.drain_deadlines(state),
        revision_names=view.names(state),
    )


async def sources_nodes(state: ReplicaState) -> dict[int, list[str]]:
    """The nodes of each waiting migration's source whose reports never named them (an
    Instance Ready since before reports carried its nodes): read from its pods."""
    config = state.config
    wanted = sorted(
        {
            ticket.instance
            for ticket in state.migrations
            if ticket.phase == MigrationPhase.ACCEPTED
            and ticket.instance in state.instances
            and not state.instances[ticket.instance].node_names
            and state.instances[ticket.instance].ready
        }
    )
    found: dict[int, list[str]] = {}
    for index in wanted:
        listed = await kube_calls.list_instance_pods(
            ListInstancePodsInput(namespace=config.namespace, isvc=config.isvc, component=config.component, index=index),
            summary=f"read the nodes of {config.ir_name} instance {index} (a migration's source)",
        )
        found[index] = sorted({pod.node_name for pod in listed.pods if pod.node_name})
    return found


async def advance(state: ReplicaState, run: RunChildren, now: datetime) -> datetime | None:
    """One pass over the migrations; returns when a decision can change by itself."""
    fold_orders(state)
    if not state.migrations:
        return None
    listed_nodes = await sources_nodes(state)
    plan = plan_migrations(state.migrations, view.raw_facts(state), context(state, run, now, listed_nodes))
    state.migrations = retained(plan.tickets, now)
    sends: list[Awaitable[None]] = []
    if plan.start is not None:
        sends.append(start_surge(state, run, plan.start))
    for index in plan.drain:
        sends.append(remove(state, index, MIGRATED))
    for index in plan.delete:
        sends.append(remove(state, index, MIGRATION_FAILED))
    await send_all(sends)
    if plan.start is not None and plan.start.index not in state.launched and plan.start.index not in state.instances:
        # The index's previous Instance was still closing: nothing started, so the request
        # waits for the next pass to choose again.
        state.migrations = [not_started(t) if t.uuid == plan.start.uuid else t for t in state.migrations]
    for event in plan.events:
        await record(state, event)
    await tell(state)
    return plan.wake_at


async def start_surge(state: ReplicaState, run: RunChildren, surge: SurgeStart) -> None:
    """Start the replacement, its pods kept off the source node (and on the hinted ones)."""
    spec = spec_for(state, surge.index, surge.revision)
    placed = spec.model_copy(
        update={
            "leader_pod_spec": placed_away(spec.leader_pod_spec, surge.avoid_node, surge.prefer_nodes),
            "worker_pod_spec": placed_away(spec.worker_pod_spec, surge.avoid_node, surge.prefer_nodes)
            if spec.worker_pod_spec is not None
            else None,
        }
    )
    await start_instance(state, run, surge.index, surge.revision, spec=placed)


async def remove(state: ReplicaState, index: int, reason: str) -> None:
    if index in state.removing:
        return
    await send_all(tell_to_delete(state, [index], reason))


def moving_sources(state: ReplicaState) -> set[int]:
    """Sources of migrations in flight: their drain is the migration's, not a handover's."""
    return {ticket.instance for ticket in state.migrations if ticket.moving}


async def tell(state: ReplicaState) -> None:
    """Send each ticket's `Migration` workflow its progress, once per change."""
    config = state.config
    live = {ticket.uuid for ticket in state.migrations}
    state.migrations_told = {uuid: told for uuid, told in state.migrations_told.items() if uuid in live}
    sends: list[Awaitable[bool]] = []
    names = view.names(state)
    for ticket in state.migrations:
        if ticket.workflow_id is None:
            continue
        nodes = state.instances[ticket.surge_instance].node_names if ticket.surge_instance in state.instances else []
        progress = ticket.progress(config.component, nodes)
        if progress.revision is not None:
            progress = progress.model_copy(update={"revision": names.get(progress.revision, progress.revision)})
        fingerprint = digest(progress.model_dump(mode="json"))
        if state.migrations_told.get(ticket.uuid) == fingerprint:
            continue
        state.migrations_told[ticket.uuid] = fingerprint
        sends.append(deliver(ticket.workflow_id, SIGNAL_MIGRATION_CHANGED, progress))
    await send_all(sends)


async def end_all(state: ReplicaState, now: datetime) -> None:
    """The InferenceReplica is being deleted: every active migration ends `Failed`."""
    fold_orders(state)
    if not any(ticket.active for ticket in state.migrations):
        return
    state.migrations = fail_all(state.migrations, now, "the InferenceService is being deleted")
    await tell(state)

