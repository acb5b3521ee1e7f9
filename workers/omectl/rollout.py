"""`omectl rollout status|explain|history`: how a service's change is moving, why a component
waits, and the story of its last runs, read from the workflows' queries and histories (the
same answers `temporal workflow query --name status|rollout_status|explain` and
`temporal workflow show --workflow-id rollout/...` give, shaped for a person).

`workers.omectl.app` mounts `app` under the name `rollout`.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import typer

from workers.omectl import rollout_reads, session
from workers.omectl.rollout_explain import explain_json, explain_rows, explain_table
from workers.omectl.rollout_history import history_json, history_view
from workers.omectl.rollout_story import run_story, steering_rows
from workers.omectl.rollout_tree import StatusSnapshot, show, status_tree
from workers.omectl.rollout_watch import Progress, watch

app = typer.Typer(
    name="rollout",
    help="Follow a change: its live tree, why a component waits, the story of past runs.",
    no_args_is_help=True,
)


class Output(StrEnum):
    TREE = "tree"
    JSON = "json"


NAME = typer.Argument(..., help="The InferenceService's name.")
OUTPUT = typer.Option(Output.TREE, "--output", "-o", help="`tree` (the default view) or `json`.")


def execute(body: Callable[[], Awaitable[None]]) -> None:
    """Run a command body and end the process with exit 0 (`session.finish`: flushed output, no
    SDK teardown race); a `CommandFailed` ends it with its own code."""
    session.run(body)
    session.finish(session.EXIT_OK)


def emit(output: Output, data: Any, view: Any) -> None:
    """`data` as JSON for `-o json`, else the `view` (a Rich renderable)."""
    if output is Output.JSON:
        session.stdout.print_json(json.dumps(data))
    else:
        show(session.stdout, view)


@app.command("status")
def status(
    name: str = NAME,
    namespace: str = session.option_namespace(),
    watch_it: bool = typer.Option(False, "--watch", "-w", help="Redraw as it changes, about every second."),
    until_done: bool = typer.Option(
        False,
        "--until-done",
        help="Watch until the change completes (exit 0) or fails or rolls back (exit 1); implies --watch.",
    ),
    output: Output = OUTPUT,
) -> None:
    """The service as a tree: components > Instances > pods, with revisions (current and update),
    phase, gate and reason, canary step and traffic, and the last analysis samples.

    Example: omectl rollout status mistral-pd -n canary-demo --watch
    """

    async def body() -> None:
        client = await session.client()

        async def read() -> StatusSnapshot:
            return await rollout_reads.snapshot(client, namespace, name)

        if watch_it or until_done:
            ended = await watch(read, session.stdout, until_done=until_done)
            if ended is Progress.FAILED:
                raise session.CommandFailed(f"rollout of {namespace}/{name} failed or rolled back")
            return
        snapshot = await read()
        emit(output, snapshot.to_json(), status_tree(snapshot))

    execute(body)


@app.command("explain")
def explain(
    name: str = NAME,
    component: str = typer.Argument(..., help="The component: engine, decoder or router."),
    namespace: str = session.option_namespace(),
    output: Output = OUTPUT,
) -> None:
    """Why COMPONENT waits and what would release it: READY, DRIFT, HOLD, GATE and REASON,
    RELEASE, REVISIONS (stable, target, rejected) and the recorded TRAFFIC.

    Example: omectl rollout explain mistral-pd engine -n canary-demo
    """

    async def body() -> None:
        explained, read = await rollout_reads.explain(await session.client(), namespace, name, component)
        rows = explain_rows(explained, read.service, read.rollout)
        emit(output, explain_json(explained, rows), explain_table(rows))

    execute(body)


@app.command("history")
def history(
    name: str = NAME,
    namespace: str = session.option_namespace(),
    runs: int = typer.Option(2, "--runs", min=1, help="How many of the last runs to tell (newest first)."),
    output: Output = OUTPUT,
) -> None:
    """The story of the last runs from Temporal history: when each step started, each gate, each
    analysis sample's verdict, who promoted or rolled back, and how each run ended (LAST:
    Completed, RolledBack, Superseded).

    Example: omectl rollout history mistral-pd -n canary-demo --runs 3
    """

    async def body() -> None:
        client = await session.client()
        found = await rollout_reads.rollout_histories(client, namespace, name, runs)
        if not found:
            session.stdout.print(f"{namespace}/{name} has had no rollout run (runs exist for components in spec.rollout.groups, from their second revision on)")
            return
        oldest = min((run.started for run in found if run.started is not None), default=None)
        steering = await rollout_reads.service_history(client, namespace, name, oldest)
        stories = [
            run_story(run.workflow_id, run.events, steering_rows(steering, run.started, run.closed))
            if run.started is not None
            else run_story(run.workflow_id, run.events)
            for run in found
        ]
        emit(output, history_json(stories), history_view(stories, datetime.now(UTC)))

    execute(body)
