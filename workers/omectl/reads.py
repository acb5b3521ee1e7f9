"""Reading the workflows: their `status` (and InferenceReplica `spec`) queries, and which run,
from Temporal's visibility API. `omectl get` and `apply --wait` read only this: what the
workflows answer, never a guess from the Kubernetes objects they project."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Generic, TypeVar

from temporalio.client import Client, WorkflowQueryFailedError
from temporalio.service import RPCError, RPCStatusCode

from models.inferencereplica import InferenceReplicaSpec, InferenceReplicaStatus
from planning.trafficmap.view import TrafficMapView
from workers.omectl import session
from workers.omectl.session import CommandFailed
from workflows.names import INFERENCE_REPLICA, INFERENCE_SERVICE, TRAFFIC_MAP
from workflows.replica.messages import QUERY_SPEC
from workflows.replica.messages import QUERY_STATUS as REPLICA_STATUS
from workflows.service.messages import QUERY_STATUS as SERVICE_STATUS
from workflows.service.messages import ServiceStatusView
from workflows.trafficmap.messages import QUERY_STATUS as TRAFFICMAP_STATUS

T = TypeVar("T")

LISTING_CONCURRENCY = 16
"""At most this many workflows are queried at once for a listing."""


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
        described = await client.get_workflow_handle(workflow_id).describe(rpc_timeout=session.rpc_timeout())
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:
            raise CommandFailed(f"no workflow {workflow_id}: {error.message}") from error
        raise
    return described.start_time


async def query(client: Client, workflow_id: str, name: str, result_type: type[T]) -> T:
    """A query's answer; a workflow that does not exist or cannot answer ends the command."""
    handle = client.get_workflow_handle(workflow_id)
    try:
        answer: T = await handle.query(name, result_type=result_type, rpc_timeout=session.rpc_timeout())
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


@dataclass(frozen=True)
class Failed:
    """A workflow of a listing that did not answer: its row shows `-`, its error goes to stderr."""

    workflow_id: str
    error: str

    @property
    def name(self) -> str:
        return self.workflow_id.split("/", 2)[-1]


@dataclass(frozen=True)
class Listing(Generic[T]):
    """What the workflows of a listing answered, in workflow ID order, and which did not."""

    found: list[T]
    failed: list[Failed]


def message_of(error: Exception) -> str:
    if isinstance(error, CommandFailed):
        return error.message
    return str(getattr(error, "message", None) or error)


async def each(runs: Sequence[Running], read: Callable[[Running], Awaitable[T]]) -> Listing[T]:
    """`read` of every run, at most `LISTING_CONCURRENCY` at once; one failing fails its row only."""
    gate = asyncio.Semaphore(LISTING_CONCURRENCY)

    async def one(run: Running) -> T:
        async with gate:
            return await read(run)

    results = await asyncio.gather(*(one(run) for run in runs), return_exceptions=True)
    found: list[T] = []
    failed: list[Failed] = []
    for run, result in zip(runs, results, strict=True):
        if isinstance(result, BaseException):
            if not isinstance(result, Exception):
                raise result
            failed.append(Failed(run.workflow_id, message_of(result)))
        else:
            found.append(result)
    return Listing(found, failed)


async def replicas(client: Client, namespace: str, isvc: str | None = None) -> Listing[ReplicaAnswer]:
    runs = await running(client, INFERENCE_REPLICA, f"irep/{namespace}/", isvc)
    return await each(runs, lambda run: replica(client, run.workflow_id, run.started))


async def services(client: Client, namespace: str) -> Listing[tuple[ServiceStatusView, datetime | None]]:
    runs = await running(client, INFERENCE_SERVICE, f"isvc/{namespace}/")

    async def read(run: Running) -> tuple[ServiceStatusView, datetime | None]:
        return await service_status(client, run.workflow_id), run.started

    return await each(runs, read)


async def trafficmaps(client: Client, namespace: str) -> Listing[TrafficMapView]:
    runs = await running(client, TRAFFIC_MAP, f"trafficmap/{namespace}/")
    return await each(runs, lambda run: query(client, run.workflow_id, TRAFFICMAP_STATUS, TrafficMapView))


async def trafficmap(client: Client, workflow_id: str) -> TrafficMapView:
    return await query(client, workflow_id, TRAFFICMAP_STATUS, TrafficMapView)
