"""Reading the workflows: their `status` (and InferenceReplica `spec`) queries, and which run,
from Temporal's visibility API. `omectl get` and `apply --wait` read only this: what the
workflows answer, never a guess from the Kubernetes objects they project."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from temporalio.client import Client, WorkflowQueryFailedError
from temporalio.service import RPCError, RPCStatusCode

from models.inferencereplica import InferenceReplicaSpec, InferenceReplicaStatus
from planning.trafficmap.view import TrafficMapView
from workers.omectl.session import CommandFailed
from workflows.names import INFERENCE_REPLICA, INFERENCE_SERVICE, TRAFFIC_MAP
from workflows.replica.messages import QUERY_SPEC
from workflows.replica.messages import QUERY_STATUS as REPLICA_STATUS
from workflows.service.messages import QUERY_STATUS as SERVICE_STATUS
from workflows.service.messages import ServiceStatusView
from workflows.trafficmap.messages import QUERY_STATUS as TRAFFICMAP_STATUS

T = TypeVar("T")


@dataclass(frozen=True)
class Running:
    workflow_id: str
    started: datetime | None


def visibility_query(workflow_type: str, prefix: str, isvc: str | None = None) -> str:
    """Running workflows of a type whose IDs start with `prefix` (`irep/{ns}/`), optionally of
    one InferenceService (the `InferenceService` search attribute)."""
    query = f'WorkflowType="{workflow_type}" AND ExecutionStatus="Running" AND WorkflowId STARTS_WITH "{prefix}"'
    if isvc:
        query += f' AND InferenceService="{isvc}"'
    return query


async def running(client: Client, workflow_type: str, prefix: str, isvc: str | None = None) -> list[Running]:
    found = [
        Running(execution.id, execution.start_time)
        async for execution in client.list_workflows(visibility_query(workflow_type, prefix, isvc))
    ]
    return sorted(found, key=lambda run: run.workflow_id)


async def started(client: Client, workflow_id: str) -> datetime | None:
    """When the workflow started; a workflow that does not exist ends the command (exit 1)."""
    try:
        described = await client.get_workflow_handle(workflow_id).describe()
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:
            raise CommandFailed(f"no workflow {workflow_id}: {error.message}") from error
        raise
    return described.start_time


async def query(client: Client, workflow_id: str, name: str, result_type: type[T]) -> T:
    """A query's answer; a workflow that does not exist or cannot answer ends the command."""
    handle = client.get_workflow_handle(workflow_id)
    try:
        answer: T = await handle.query(name, result_type=result_type)
        return answer
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:
            raise CommandFailed(f"no workflow {workflow_id}: {error.message}") from error
        raise
    except WorkflowQueryFailedError as error:
        raise CommandFailed(f"query {name} of {workflow_id} failed: {error.message}") from error


async def service_status(client: Client, workflow_id: str) -> ServiceStatusView:
    return await query(client, workflow_id, SERVICE_STATUS, ServiceStatusView)


async def replica_status(client: Client, workflow_id: str) -> InferenceReplicaStatus:
    return await query(client, workflow_id, REPLICA_STATUS, InferenceReplicaStatus)


@dataclass(frozen=True)
class ReplicaAnswer:
    workflow_id: str
    status: InferenceReplicaStatus
    spec: InferenceReplicaSpec | None
    started: datetime | None


async def replica(client: Client, workflow_id: str, started_at: datetime | None = None) -> ReplicaAnswer:
    status = await query(client, workflow_id, REPLICA_STATUS, InferenceReplicaStatus)
    try:
        spec: InferenceReplicaSpec | None = await query(client, workflow_id, QUERY_SPEC, InferenceReplicaSpec)
    except CommandFailed:
        spec = None  # a worker from before the `spec` query: DESIRED shows `-`
    return ReplicaAnswer(workflow_id, status, spec, started_at)


async def replicas(client: Client, namespace: str, isvc: str | None = None) -> list[ReplicaAnswer]:
    runs = await running(client, INFERENCE_REPLICA, f"irep/{namespace}/", isvc)
    return list(await asyncio.gather(*(replica(client, run.workflow_id, run.started) for run in runs)))


async def services(client: Client, namespace: str) -> list[tuple[ServiceStatusView, datetime | None]]:
    runs = await running(client, INFERENCE_SERVICE, f"isvc/{namespace}/")
    views = await asyncio.gather(*(service_status(client, run.workflow_id) for run in runs))
    return list(zip(views, (run.started for run in runs), strict=True))


async def trafficmaps(client: Client, namespace: str) -> list[TrafficMapView]:
    runs = await running(client, TRAFFIC_MAP, f"trafficmap/{namespace}/")
    return list(await asyncio.gather(*(query(client, run.workflow_id, TRAFFICMAP_STATUS, TrafficMapView) for run in runs)))


async def trafficmap(client: Client, workflow_id: str) -> TrafficMapView:
    return await query(client, workflow_id, TRAFFICMAP_STATUS, TrafficMapView)
