"""`omectl apply -f FILE.yaml [--wait] [--timeout 5m]`: every YAML document of the file.

An InferenceService goes through its workflow's `apply` Update with start (exactly the README's
`temporal workflow execute-update-with-start`): admission answers accepted (with warnings) or
refused (with its reason codes; exit 1) before anything changes. Anything else (ServingRuntime,
ClusterServingRuntime, a Namespace, ...) is written to the cluster as `kubectl apply` writes it.
`--wait` then follows each accepted InferenceService's `status` query until it is Ready, printing
each change of progress, and on timeout names the gate and reason that blocks it (exit 1)."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
import yaml
from temporalio.client import Client
from temporalio.exceptions import ApplicationError

from models.duration import parse_duration
from models.kube_ops import ApplyObjectInput
from workers.config import KubeSettings, kube_api_client

if TYPE_CHECKING:
    from activities.kube_objects import ObjectActivities
from workers.control.temporal import Refused, apply_with_start
from workers.omectl import reads, session
from workers.omectl.session import EXIT_REFUSED, CommandFailed, client, run, settings, stderr, stdout
from workers.omectl.views.progress import progress
from workflows.names import isvc_workflow_id

POLL_SECONDS = 1.0
"""How often `--wait` asks the `status` query: a person watching sees each step."""


def documents(path: str) -> list[dict[str, Any]]:
    """The YAML documents of `path` (`-` for stdin), empty ones skipped."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text()
        loaded = [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except (OSError, yaml.YAMLError) as error:
        raise CommandFailed(f"-f {path}: {error}") from error
    for index, doc in enumerate(loaded):
        if not isinstance(doc, dict) or not doc.get("kind") or not (doc.get("metadata") or {}).get("name"):
            raise CommandFailed(f"-f {path}: document {index + 1} has no kind or metadata.name")
    return loaded


def in_namespace(doc: dict[str, Any], namespace: str | None) -> dict[str, Any]:
    """The document with `-n`'s namespace where it names none (cluster-scoped kinds excepted)."""
    metadata = dict(doc.get("metadata") or {})
    if namespace and not metadata.get("namespace") and not str(doc["kind"]).startswith("Cluster") and doc["kind"] != "Namespace":
        metadata["namespace"] = namespace
    return {**doc, "metadata": metadata}


def label(doc: dict[str, Any]) -> str:
    """`inferenceservice.ome.io/qwen3-chat`, as kubectl names what it applied."""
    group = str(doc.get("apiVersion") or "v1").rpartition("/")[0]
    kind = str(doc["kind"]).lower()
    return f"{kind}.{group}/{doc['metadata']['name']}" if group else f"{kind}/{doc['metadata']['name']}"


def kube_settings() -> KubeSettings:
    """The worker's `OME_KUBE__*`; without a kubeconfig there, `KUBECONFIG` as kubectl reads it."""
    kube = settings().kube
    if kube.kubeconfig is None and os.environ.get("KUBECONFIG"):
        return kube.model_copy(update={"kubeconfig": Path(os.environ["KUBECONFIG"].split(os.pathsep)[0])})
    return kube


def apply_object(objects: ObjectActivities, doc: dict[str, Any]) -> str:
    result = objects.apply_object(ApplyObjectInput(manifest=doc, replace_spec=True, last_applied=True))
    return {"created": "created", "updated": "configured"}.get(result.action, result.action)


async def apply_others(docs: list[dict[str, Any]]) -> bool:
    """Write the non-InferenceService documents; False when one was refused."""
    if not docs:
        return True
    # Imported here: the kubernetes client costs every other command a quarter second to load.
    from activities.kube_objects import ObjectActivities

    objects = ObjectActivities(kube_api_client(kube_settings()))
    ok = True
    for doc in docs:
        try:
            action = await asyncio.to_thread(apply_object, objects, doc)
        except ApplicationError as error:
            stderr.print(f"{label(doc)} refused: {error.message} ({error.type})", markup=False)
            ok = False
            continue
        stdout.print(f"{label(doc)} {action}", markup=False)
    return ok


async def apply_service(temporal: Client, task_queue: str, doc: dict[str, Any]) -> int | None:
    """The generation the workflow answered, or None when admission refused it."""
    try:
        answer = await apply_with_start(temporal, task_queue, doc, rpc_timeout=session.rpc_timeout())
    except Refused as refused:
        reasons = f" [{', '.join(refused.reasons)}]" if refused.reasons else ""
        stderr.print(f"{label(doc)} refused{reasons}: {refused.message}", markup=False)
        return None
    changed = "changed" if answer.get("changed") else "unchanged"
    stdout.print(f"{label(doc)} accepted (generation {answer.get('generation')}, {changed})", markup=False)
    for warning in answer.get("warnings") or []:
        stdout.print(f"Warning: {warning}", markup=False)
    return int(answer.get("generation") or 0)


async def desired_counts(temporal: Client, namespace: str, name: str) -> dict[str, int | None]:
    """Each component's desired Instance count, from its InferenceReplica's `spec` query."""
    answers = (await reads.replicas(temporal, namespace, name)).found
    return {answer.spec.component: answer.spec.replicas for answer in answers if answer.spec is not None}


async def wait_ready(temporal: Client, doc: dict[str, Any], generation: int, limit_seconds: float) -> None:
    namespace, name = doc["metadata"].get("namespace") or "default", doc["metadata"]["name"]
    workflow_id = isvc_workflow_id(namespace, name)
    stdout.print(f"waiting for {namespace}/{name} generation {generation} to be Ready (timeout {limit_seconds:g}s)", markup=False)
    deadline = time.monotonic() + limit_seconds
    last = ""
    while True:
        view = await reads.service_status(temporal, workflow_id)
        shown = progress(view, generation, await desired_counts(temporal, namespace, name))
        if shown.line != last:
            stdout.print(shown.line, markup=False)
            last = shown.line
        if shown.ready:
            stdout.print(f"{namespace}/{name} is Ready", markup=False)
            return
        if time.monotonic() >= deadline:
            raise CommandFailed(
                f"timed out after {limit_seconds:g}s waiting for {namespace}/{name} to be Ready: blocked by {shown.blocking}",
                EXIT_REFUSED,
            )
        await asyncio.sleep(POLL_SECONDS)


def unknown_outcome(sending: list[dict[str, Any]]) -> str:
    """The budget ran out: the InferenceService being sent (if any) has an unknown outcome."""
    seconds = f"{session.budget():g}s"
    if not sending:
        return f"apply ran out of its {seconds} budget before any InferenceService was sent"
    doc = sending[-1]
    namespace, name = doc["metadata"].get("namespace") or "default", doc["metadata"]["name"]
    return (
        f"apply request outcome unknown after {seconds} (Update apply to {isvc_workflow_id(namespace, name)}); "
        f"do not replay, check omectl rollout status {name} -n {namespace}"
    )


HELP = """Apply YAML: InferenceServices through their workflow's `apply` Update, anything else
to the cluster (as `kubectl apply`).

Exit 0 when every document was accepted, 1 when one was refused (admission's reason codes are
printed) or `--wait` ran out of time (the gate and reason blocking it are printed).

\b
Examples:
  omectl apply -f deploy/examples/srt-qwen3-0-6b.yaml
  omectl apply -f deploy/examples/qwen3-chat.yaml --wait --timeout 5m
"""


def apply(
    filename: str = typer.Option(..., "--filename", "-f", help="YAML file (one or more documents), `-` for stdin."),
    wait: bool = typer.Option(False, "--wait", help="Follow each InferenceService until it is Ready."),
    timeout: str = typer.Option("5m", "--timeout", help="How long --wait waits (`90s`, `5m`)."),
    namespace: str | None = typer.Option(None, "--namespace", "-n", help="Namespace for documents that name none."),
) -> None:
    try:
        limit = parse_duration(timeout)
    except ValueError as error:
        raise typer.BadParameter(str(error), param_hint="--timeout") from error

    async def body() -> None:
        # Read inside `run`: a missing or malformed file is an error message and exit 1.
        docs = [in_namespace(doc, namespace) for doc in documents(filename)]
        services = [doc for doc in docs if doc["kind"] == "InferenceService"]
        sending: list[dict[str, Any]] = []
        accepted: list[tuple[dict[str, Any], int]] = []
        temporal: Client | None = None

        async def send() -> bool:
            nonlocal temporal
            ok = await apply_others([doc for doc in docs if doc["kind"] != "InferenceService"])
            if not services:
                return ok
            temporal = connected = await client()
            task_queue = settings().temporal.task_queue
            for doc in services:
                sending.append(doc)
                generation = await apply_service(connected, task_queue, doc)
                if generation is None:
                    ok = False
                else:
                    accepted.append((doc, generation))
            return ok

        ok = await session.within_budget(send, lambda: unknown_outcome(sending))
        if wait and temporal is not None:
            for doc, generation in accepted:
                await wait_ready(temporal, doc, generation, limit)
        if not ok:
            raise CommandFailed("some documents were refused", EXIT_REFUSED)

    run(body)


apply.__doc__ = HELP
