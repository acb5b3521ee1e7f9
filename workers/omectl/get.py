"""`omectl get KIND [NAME] [-n NS] [-o wide|json|yaml]`: the workflows' answers as tables.

Kinds: `isvc`, `irep`, `instances`, `retry-blocks`, `migrations`, `trafficmap` (kubectl-style
aliases accepted). Without NAME every running workflow of the kind in the namespace is read
(Temporal's visibility API); `instances`, `retry-blocks` and `migrations` take the
InferenceService's name and show each of its components."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import typer
import yaml
from pydantic import BaseModel

from workers.omectl import reads
from workers.omectl.session import client, option_namespace, run, stdout
from workers.omectl.views.instances import instances_table
from workers.omectl.views.irep import Replica, irep_table
from workers.omectl.views.isvc import isvc_table
from workers.omectl.views.migrations import migrations_table
from workers.omectl.views.retry_blocks import Blocks, retry_blocks_table
from workers.omectl.views.table import Table
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


async def _replicas(namespace: str, isvc: str | None) -> list[Read]:
    temporal = await client()
    if isvc is not None:
        # A missing InferenceService is an error rather than an empty table; its view says
        # which generation is in force and whether it is being deleted.
        view = await reads.service_status(temporal, isvc_workflow_id(namespace, isvc))
        views = {view.name: view}
    else:
        views = {view.name: view for view, _ in await reads.services(temporal, namespace)}
    found = []
    for answer in await reads.replicas(temporal, namespace, isvc):
        parent = views.get(service_of(answer) or "")
        found.append(Read(answer, parent.generation if parent else None, parent.deleting if parent else False))
    return found


def component_of(answer: reads.ReplicaAnswer) -> str:
    return answer.spec.component if answer.spec is not None else answer.workflow_id.rsplit("-", 1)[-1]


async def get_isvc(name: str | None, namespace: str, output: Output | None) -> None:
    temporal = await client()
    now = datetime.now(UTC)
    if name is None:
        found = await reads.services(temporal, namespace)
    else:
        workflow_id = isvc_workflow_id(namespace, name)
        found = [(await reads.service_status(temporal, workflow_id), await reads.started(temporal, workflow_id))]
    emit(isvc_table(found, now, output == Output.wide), [view for view, _ in found], output)


async def get_irep(name: str | None, namespace: str, output: Output | None) -> None:
    temporal = await client()
    if name is None:
        answers = await reads.replicas(temporal, namespace)
    else:
        workflow_id = f"irep/{namespace}/{name}"
        answers = [await reads.replica(temporal, workflow_id, await reads.started(temporal, workflow_id))]
    shown = [as_replica(answer) for answer in answers]
    emit(irep_table(shown, datetime.now(UTC), output == Output.wide), [answer.status for answer in answers], output)


async def get_instances(name: str | None, namespace: str, output: Output | None) -> None:
    found = await _replicas(namespace, name)
    table = instances_table([(component_of(read.answer), read.answer.status, read.generation) for read in found])
    emit(table, [read.answer.status.instance_statuses for read in found], output)


async def get_retry_blocks(name: str | None, namespace: str, output: Output | None) -> None:
    found = await _replicas(namespace, name)
    table = retry_blocks_table(
        [Blocks(component_of(read.answer), read.answer.status.retry_blocks, read.current, read.deleting) for read in found]
    )
    emit(table, [read.answer.status.retry_blocks for read in found], output)


async def get_migrations(name: str | None, namespace: str, output: Output | None) -> None:
    found = await _replicas(namespace, name)
    table = migrations_table([(component_of(read.answer), read.answer.status.migrations, read.freshness) for read in found])
    emit(table, [read.answer.status.migrations for read in found], output)


async def get_trafficmap(name: str | None, namespace: str, output: Output | None) -> None:
    temporal = await client()
    if name is None:
        views = await reads.trafficmaps(temporal, namespace)
    else:
        views = [await reads.trafficmap(temporal, trafficmap_workflow_id(namespace, name))]
    emit(trafficmap_table(views, output == Output.wide), views, output)
    if name is not None and output in (None, Output.wide) and views[0].entries:
        stdout.print("\n" + entries_table(views[0]).render(), markup=False)


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
