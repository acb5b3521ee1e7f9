"""`omectl get KIND [NAME] [-n NS] [-o wide|json|yaml]`: the workflows' answers as tables.

Kinds: `isvc`, `irep`, `instances`, `retry-blocks`, `migrations`, `trafficmap` (kubectl-style
aliases accepted). Without NAME every running workflow of the kind in the namespace is read
(Temporal's visibility API); `instances`, `retry-blocks` and `migrations` take the
InferenceService's name and show each of its components."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import typer
import yaml
from pydantic import BaseModel

from models.inferencereplica import InferenceReplicaStatus
from workers.omectl import reads
from workers.omectl.session import CommandFailed, client, option_namespace, run, stderr, stdout
from workers.omectl.views.instances import instances_table
from workers.omectl.views.irep import Replica, irep_table
from workers.omectl.views.isvc import isvc_table
from workers.omectl.views.migrations import migrations_table
from workers.omectl.views.retry_blocks import Blocks, retry_blocks_table
from workers.omectl.views.table import NONE, Table
from workers.omectl.views.trafficmap import entries_table, trafficmap_table
from workflows.names import isvc_workflow_id, trafficmap_workflow_id

KINDS = {
    "isvc": "isvc",
    "inferenceservice": "isvc",
    "inferenceservices": "isvc",
    "irep": "irep",
    "ir": "irep",
    "inferencereplica": "irep",
    "inferencereplicas": "irep",
    "instances": "instances",
    "instance": "instances",
    "retry-blocks": "retry-blocks",
    "migrations": "migrations",
    "migration": "migrations",
    "trafficmap": "trafficmap",
    "trafficmaps": "trafficmap",
    "tm": "trafficmap",
}


class Output(StrEnum):
    wide = "wide"
    json = "json"
    yaml = "yaml"


HELP = """Show what the workflows answer, as the reference's tables.

\b
KIND is one of isvc, irep, instances, retry-blocks, migrations, trafficmap.
NAME is the InferenceService's (for irep: the InferenceReplica's, `<isvc>-<component>`).

\b
Examples:
  omectl get isvc -n spread-demo
  omectl get irep qwen3-0-6b-engine -n spread-demo -o wide
  omectl get instances qwen3-0-6b -n spread-demo
  omectl get retry-blocks qwen3-0-6b -n spread-demo
  omectl get trafficmap chat -n prod -o yaml
"""


def dumped(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    if isinstance(value, list):
        return [dumped(item) for item in value]
    return value


def answered(workflow_id: str, component: str, key: str, value: Any) -> dict[str, Any]:
    """What `-o json|yaml` prints per InferenceReplica: which workflow and component answered
    the status (or the part of it the kind shows), not a bare list."""
    return {"workflow_id": workflow_id, "component": component, key: dumped(value)}


def each_replica(found: Sequence[Read], key: str, part: Callable[[InferenceReplicaStatus], Any]) -> list[dict[str, Any]]:
    return [answered(read.answer.workflow_id, component_of(read.answer), key, part(read.answer.status)) for read in found]


def with_failed(table: Table, failed: Sequence[reads.Failed], first: Callable[[reads.Failed], str], by_name: bool) -> Table:
    """The table with a `-` row for each workflow that did not answer (named by `first`), in
    name order where the table is one row per workflow."""
    if not failed:
        return table
    rows = [row for row in table.rows if "EMPTY" not in row]  # `EMPTY` stands for no row at all
    rows += [(first(one), *([NONE] * (len(table.headers) - 1))) for one in failed]
    if by_name:
        rows.sort(key=lambda row: row[0])
    return Table(table.headers, tuple(rows))


def report(failed: Sequence[reads.Failed]) -> None:
    """Each failed workflow's error on stderr; then exit 1 (the table is partial)."""
    for one in failed:
        stderr.print(f"error: {one.workflow_id}: {one.error}", markup=False)
    if failed:
        raise CommandFailed(f"{len(failed)} workflow(s) did not answer; their rows show -")


def emit(table: Table, answers: Any, output: Output | None) -> None:
    if output == Output.json:
        stdout.print(json.dumps(dumped(answers), indent=2), markup=False)
    elif output == Output.yaml:
        stdout.print(yaml.safe_dump(dumped(answers), sort_keys=False).rstrip(), markup=False)
    else:
        stdout.print(table.render(), markup=False)


def as_replica(answer: reads.ReplicaAnswer) -> Replica:
    spec = answer.spec
    name = answer.workflow_id.split("/", 2)[-1]
    return Replica(
        name=name,
        parent=spec.inference_service if spec is not None else "-",
        component=spec.component if spec is not None else "-",
        status=answer.status,
        desired=spec.replicas if spec is not None else None,
        paused=spec.paused if spec is not None else None,
        started=answer.started,
    )


@dataclass(frozen=True)
class Read:
    """An InferenceReplica's answer with what its service says of it: the generation in force
    (its status is stale below it) and whether the service is being deleted."""

    answer: reads.ReplicaAnswer
    generation: int | None = None
    deleting: bool = False

    @property
    def current(self) -> bool:
        observed = self.answer.status.observed_generation
        return observed is not None and (self.generation is None or observed >= self.generation)

    @property
    def freshness(self) -> str:
        """`Current`, `Stale` or `Unobserved` (the migrations table's third part, §13)."""
        if self.answer.status.observed_generation is None:
            return "Unobserved"
        return "Current" if self.current else "Stale"


def service_of(answer: reads.ReplicaAnswer) -> str | None:
    return answer.spec.inference_service if answer.spec is not None else None


async def _replicas(namespace: str, isvc: str | None) -> tuple[list[Read], list[reads.Failed]]:
    temporal = await client()
    unanswered: set[str] = set()
    if isvc is not None:
        # A missing InferenceService is an error rather than an empty table; its view says
        # which generation is in force and whether it is being deleted.
        view = await reads.service_status(temporal, isvc_workflow_id(namespace, isvc))
        views = {view.name: view}
    else:
        listed = await reads.services(temporal, namespace)
        views = {view.name: view for view, _ in listed.found}
        unanswered = {one.name for one in listed.failed}
    replicas = await reads.replicas(temporal, namespace, isvc)
    found = []
    for answer in replicas.found:
        parent = service_of(answer) or ""
        parent_view = views.get(parent)
        if parent_view is not None:
            found.append(Read(answer, parent_view.generation, parent_view.deleting))
        else:
            # A service that did not answer: nothing of it is shown releasable.
            found.append(Read(answer, None, parent in unanswered))
    return found, replicas.failed


def failed_component(one: reads.Failed) -> str:
    return one.workflow_id.rsplit("-", 1)[-1]


def component_of(answer: reads.ReplicaAnswer) -> str:
    return answer.spec.component if answer.spec is not None else answer.workflow_id.rsplit("-", 1)[-1]


async def get_isvc(name: str | None, namespace: str, output: Output | None) -> None:
    temporal = await client()
    now = datetime.now(UTC)
    failed: list[reads.Failed] = []
    if name is None:
        listed = await reads.services(temporal, namespace)
        found, failed = listed.found, listed.failed
    else:
        workflow_id = isvc_workflow_id(namespace, name)
        found = [(await reads.service_status(temporal, workflow_id), await reads.started(temporal, workflow_id))]
    table = with_failed(isvc_table(found, now, output == Output.wide), failed, lambda one: one.name, by_name=True)
    emit(table, [view for view, _ in found], output)
    report(failed)


async def get_irep(name: str | None, namespace: str, output: Output | None) -> None:
    temporal = await client()
    failed: list[reads.Failed] = []
    if name is None:
        listed = await reads.replicas(temporal, namespace)
        answers, failed = listed.found, listed.failed
    else:
        workflow_id = f"irep/{namespace}/{name}"
        answers = [await reads.replica(temporal, workflow_id, await reads.started(temporal, workflow_id))]
    rows = [as_replica(answer) for answer in answers]
    table = with_failed(irep_table(rows, datetime.now(UTC), output == Output.wide), failed, lambda one: one.name, by_name=True)
    shown = [answered(answer.workflow_id, component_of(answer), "status", answer.status) for answer in answers]
    emit(table, shown, output)
    report(failed)


async def get_instances(name: str | None, namespace: str, output: Output | None) -> None:
    found, failed = await _replicas(namespace, name)
    table = instances_table([(component_of(read.answer), read.answer.status, read.generation) for read in found])
    shown = each_replica(found, "instanceStatuses", lambda status: status.instance_statuses)
    emit(with_failed(table, failed, failed_component, by_name=False), shown, output)
    report(failed)


async def get_retry_blocks(name: str | None, namespace: str, output: Output | None) -> None:
    found, failed = await _replicas(namespace, name)
    table = retry_blocks_table(
        [Blocks(component_of(read.answer), read.answer.status.retry_blocks, read.current, read.deleting) for read in found]
    )
    shown = each_replica(found, "retryBlocks", lambda status: status.retry_blocks)
    emit(with_failed(table, failed, failed_component, by_name=False), shown, output)
    report(failed)


async def get_migrations(name: str | None, namespace: str, output: Output | None) -> None:
    found, failed = await _replicas(namespace, name)
    table = migrations_table([(component_of(read.answer), read.answer.status.migrations, read.freshness) for read in found])
    shown = each_replica(found, "migrations", lambda status: status.migrations)
    emit(with_failed(table, failed, failed_component, by_name=False), shown, output)
    report(failed)


async def get_trafficmap(name: str | None, namespace: str, output: Output | None) -> None:
    temporal = await client()
    failed: list[reads.Failed] = []
    if name is None:
        listed = await reads.trafficmaps(temporal, namespace)
        views, failed = listed.found, listed.failed
    else:
        views = [await reads.trafficmap(temporal, trafficmap_workflow_id(namespace, name))]
    emit(with_failed(trafficmap_table(views, output == Output.wide), failed, lambda one: one.name, by_name=True), views, output)
    if name is not None and output in (None, Output.wide) and views[0].entries:
        stdout.print("\n" + entries_table(views[0]).render(), markup=False)
    report(failed)


READERS = {
    "isvc": get_isvc,
    "irep": get_irep,
    "instances": get_instances,
    "retry-blocks": get_retry_blocks,
    "migrations": get_migrations,
    "trafficmap": get_trafficmap,
}


def get(
    kind: str = typer.Argument(..., help="isvc, irep, instances, retry-blocks, migrations or trafficmap."),
    name: str | None = typer.Argument(None, help="The InferenceService (irep: the InferenceReplica); all when omitted."),
    namespace: str = option_namespace(),
    output: Output | None = typer.Option(None, "--output", "-o", help="wide, json or yaml."),
) -> None:
    reader = KINDS.get(kind.lower())
    if reader is None:
        raise typer.BadParameter(f"KIND must be one of {', '.join(READERS)}, got {kind!r}", param_hint="KIND")
    read = READERS[reader]

    async def body() -> None:
        await read(name, namespace, output)

    run(body)


get.__doc__ = HELP
