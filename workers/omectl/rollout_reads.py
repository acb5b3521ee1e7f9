"""What `omectl rollout` reads from Temporal: the workflows' query answers and the histories of
a service's `Rollout` runs. The only I/O of the rollout commands; the views are built from
what these return (`rollout_tree`, `rollout_explain`, `rollout_story`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowQueryFailedError
from temporalio.service import RPCError, RPCStatusCode

from models.inferencereplica import InferenceReplicaStatus
from workers.omectl import reads
from workers.omectl.rollout_story import run_number
from workers.omectl.rollout_tree import StatusSnapshot
from workers.omectl.session import CommandFailed
from workflows.names import ROLLOUT, irep_workflow_id, isvc_workflow_id, rollout_workflow_id
from workflows.replica.messages import QUERY_STATUS as REPLICA_STATUS
from workflows.service.messages import (
    QUERY_EXPLAIN,
    QUERY_ROLLOUT_STATUS,
    ExplainView,
    RolloutStatusView,
)

LISTED_AT_MOST = 200
"""Rollout runs listed per service: far more than `--runs` ever asks for, bounded all the same."""


def not_found(error: Exception) -> bool:
    return isinstance(error, RPCError) and error.status == RPCStatusCode.NOT_FOUND


async def snapshot(client: Client, namespace: str, name: str) -> StatusSnapshot:
    """The service's `status` and `rollout_status`, and each OMENative component's InferenceReplica `status`."""
    workflow_id = isvc_workflow_id(namespace, name)
    service = await reads.service_status(client, workflow_id)
    rollout = await reads.query(client, workflow_id, QUERY_ROLLOUT_STATUS, RolloutStatusView)
    replicas: dict[str, InferenceReplicaStatus] = {}
    unread: set[str] = set()
    for component, status in service.status.components.items():
        if status.lifecycle is None:
            continue  # a Deployment-mode component has no InferenceReplica
        replica = client.get_workflow_handle(irep_workflow_id(namespace, name, component))
        try:
            replicas[component] = await replica.query(REPLICA_STATUS, result_type=InferenceReplicaStatus)
        except (RPCError, WorkflowQueryFailedError):
            unread.add(component)  # retired, or not started yet: the service's totals still show it
    return StatusSnapshot(service=service, rollout=rollout, replicas=replicas, unread=frozenset(unread))


async def explain(client: Client, namespace: str, name: str, component: str) -> tuple[ExplainView, StatusSnapshot]:
    """The `explain` answer for `component`, with the readings its views also draw on."""
    read = await snapshot(client, namespace, name)
    if component not in read.service.status.components:
        known = ", ".join(read.service.status.components) or "none yet"
        raise CommandFailed(f"InferenceService {namespace}/{name} has no component {component!r} (it has: {known})")
    handle = client.get_workflow_handle(isvc_workflow_id(namespace, name))
    explained = await handle.query(QUERY_EXPLAIN, component, result_type=ExplainView)
    return explained, read


@dataclass(frozen=True)
class RunHistory:
    workflow_id: str
    events: Sequence[HistoryEvent]
    started: datetime | None
    closed: datetime | None


async def rollout_histories(client: Client, namespace: str, name: str, runs: int) -> list[RunHistory]:
    """The histories of the service's last `runs` Rollout runs, newest first (each run's
    continue-as-new chain in order)."""
    prefix = rollout_workflow_id(namespace, name, 0)[: -len("0")]
    query = f'WorkflowType = "{ROLLOUT}" AND WorkflowId STARTS_WITH "{prefix}"'
    executions: dict[str, list[tuple[datetime, str, datetime | None]]] = {}
    try:
        async for found in client.list_workflows(query, limit=LISTED_AT_MOST):
            executions.setdefault(found.id, []).append((found.start_time, found.run_id, found.close_time))
    except RPCError as error:
        if error.status != RPCStatusCode.UNIMPLEMENTED:
            raise
        return await histories_by_generation(client, namespace, name, runs)
    newest = sorted(executions, key=lambda workflow_id: run_number(workflow_id) or -1, reverse=True)[:runs]
    found_runs = []
    for workflow_id in newest:
        chain = sorted(executions[workflow_id])
        events: list[HistoryEvent] = []
        for _, run_id, _ in chain:
            events += (await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()).events
        found_runs.append(RunHistory(workflow_id, events, chain[0][0], chain[-1][2]))
    return found_runs


async def histories_by_generation(client: Client, namespace: str, name: str, runs: int) -> list[RunHistory]:
    """Without a visibility store (Temporal's time-skipping test server): a run's ID is the
    generation that opened it, so walk the generations down from the service's own."""
    service = await reads.service_status(client, isvc_workflow_id(namespace, name))
    found: list[RunHistory] = []
    for generation in range(service.generation, 0, -1):
        handle = client.get_workflow_handle(rollout_workflow_id(namespace, name, generation))
        try:
            described = await handle.describe()
        except RPCError as error:
            if not_found(error):
                continue
            raise
        history = await handle.fetch_history()
        found.append(RunHistory(handle.id, history.events, described.start_time, described.close_time))
        if len(found) == runs:
            break
    return found


async def service_history(client: Client, namespace: str, name: str, since: datetime | None) -> list[HistoryEvent]:
    """The InferenceService's history since `since` (every run of its continue-as-new chain
    still open or closed after it): where the operators' requests are."""
    workflow_id = isvc_workflow_id(namespace, name)
    run_ids: list[tuple[datetime, str]] = []
    try:
        async for found in client.list_workflows(f'WorkflowId = "{workflow_id}"', limit=LISTED_AT_MOST):
            if since is None or found.close_time is None or found.close_time >= since:
                run_ids.append((found.start_time, found.run_id))
    except RPCError as error:
        if error.status != RPCStatusCode.UNIMPLEMENTED:
            raise
        run_ids = []
    events: list[HistoryEvent] = []
    if not run_ids:
        return list((await client.get_workflow_handle(workflow_id).fetch_history()).events)
    for _, run_id in sorted(run_ids):
        events += (await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()).events
    return events
