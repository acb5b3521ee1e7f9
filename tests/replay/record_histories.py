"""Record the workflow histories that `tests/replay/test_replay.py` replays.

    .venv/bin/python -m tests.replay.record_histories            # every scenario
    .venv/bin/python -m tests.replay.record_histories surge      # scenarios whose name contains "surge"

Each scenario runs on a Temporal dev server (real time, real persistence: the histories are the
ones production writes, workflow-task boundaries and all) with the real worker
(`workers.worker.build_worker`), the real Kubernetes activities against a fresh kubesim with
fast timing, and the watcher's pod and Deployment watches in-process. When the scenario is
over, every execution that ran on its task queue (children and continued-as-new runs included,
found through visibility) has its history written to `tests/replay/histories/<scenario>__<workflow-type>__<n>.json`,
`n` counting that type's executions in (workflow id, start time) order. A file is the SDK's
history JSON (`WorkflowHistory.to_json()`) plus a top-level `workflowId`. A scenario's old files are removed first,
so a rerun replaces them exactly.

Rerun it after an intended change to a workflow's commands (see tests/replay/README.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from uuid import uuid4

from temporalio.client import Client, WorkflowExecution, WorkflowExecutionStatus
from temporalio.testing import WorkflowEnvironment

from kubesim.handle import KubeSim
from kubesim.timing import Timing
from tests.fixtures.kubesim import TEST_TOPOLOGY
from tests.fixtures.temporal import start_dev_server
from tests.replay.catalog import SCENARIOS
from tests.replay.scenarios import WAIT, Scenario, run_limits_of
from tests.workflows.multicluster_harness import CLUSTERS
from workers.client import exit_process
from workflows.names import cluster_task_queue

HISTORIES = Path(__file__).parent / "histories"
REGENERATE = ".venv/bin/python -m tests.replay.record_histories"


@asynccontextmanager
async def dev_server(suggest_continue_as_new_after: int | None = None) -> AsyncIterator[WorkflowEnvironment]:
    """The same dev server the tests' `dev_server` fixture starts (search attributes, early
    continue-as-new suggestion, so long-lived workflows leave continued runs to replay too), or
    one suggesting continue-as-new at `suggest_continue_as_new_after` events."""
    with tempfile.TemporaryDirectory(prefix="replay-record-") as tmp:
        db = Path(tmp) / "temporal.db"
        if suggest_continue_as_new_after is None:
            env = await start_dev_server(db)
        else:
            env = await start_dev_server(db, suggest_continue_as_new_after)
        try:
            yield env
        finally:
            await env.shutdown()


async def closed_executions(client: Client, task_queue: str) -> list[WorkflowExecution]:
    """Every execution of the task queue once visibility shows all of them closed and stable."""
    deadline = time.monotonic() + WAIT
    previous: list[tuple[str, str]] = []
    while True:
        # A multi-cluster scenario's homes run on `<queue>@worker-a` and `<queue>@worker-b`.
        queues = ", ".join(f"'{q}'" for q in (task_queue, *(cluster_task_queue(task_queue, c) for c in CLUSTERS)))
        listed = [e async for e in client.list_workflows(f"TaskQueue IN ({queues})")]
        keys = sorted((e.id, e.run_id) for e in listed)
        settled = all(e.status != WorkflowExecutionStatus.RUNNING for e in listed)
        # Two equal listings in a row: visibility has caught up with the last close.
        if listed and settled and keys == previous:
            return sorted(listed, key=lambda e: (e.workflow_type, e.id, e.start_time))
        if time.monotonic() > deadline:
            running = [e.id for e in listed if e.status == WorkflowExecutionStatus.RUNNING]
            raise RuntimeError(f"executions on {task_queue} still running after {WAIT:.0f}s: {running}")
        previous = keys
        await asyncio.sleep(0.5)


def history_document(workflow_id: str, history_json: str) -> str:
    """`{"workflowId": ..., "events": [...]}`, one compact event per line: a third of the SDK's
    indented size, and a rerun's diff still shows which events changed."""
    events = json.loads(history_json)["events"]
    lines = ",\n".join(json.dumps(event, separators=(",", ":")) for event in events)
    return f'{{"workflowId": {json.dumps(workflow_id)}, "events": [\n{lines}\n]}}\n'


async def record(env: WorkflowEnvironment, scenario: Scenario) -> list[Path]:
    task_queue = f"replay-{scenario.name}-{uuid4().hex[:8]}"
    sim = KubeSim(topology=TEST_TOPOLOGY, crds="product", timing=Timing.fast()).start()
    try:
        with run_limits_of(scenario):
            await scenario.run(env, sim, task_queue)
        began = time.monotonic()
        executions = await closed_executions(env.client, task_queue)
        print(f"  {time.monotonic() - began:5.1f}s  every execution closed and listed", flush=True)
    finally:
        sim.stop()
    for stale in HISTORIES.glob(f"{scenario.name}__*.json"):
        stale.unlink()
    written: list[Path] = []
    counts: dict[str, int] = {}
    for execution in executions:
        n = counts.get(execution.workflow_type, 0)
        counts[execution.workflow_type] = n + 1
        handle = env.client.get_workflow_handle(execution.id, run_id=execution.run_id)
        history = await handle.fetch_history()
        path = HISTORIES / f"{scenario.name}__{execution.workflow_type}__{n}.json"
        # The workflow id beside the events (the SDK's JSON leaves it out): workflows read it
        # (`workflow.info().workflow_id`, e.g. as a parent id in a child's input), so a replay
        # under another id would issue different commands.
        path.write_text(history_document(execution.id, history.to_json()))
        written.append(path)
    return written


async def main(selected: list[Scenario]) -> None:
    HISTORIES.mkdir(exist_ok=True)
    # Histories of scenarios that no longer exist would otherwise be replayed forever.
    known = {scenario.name for scenario in SCENARIOS}
    for orphan in HISTORIES.glob("*.json"):
        if orphan.name.split("__", 1)[0] not in known:
            orphan.unlink()
            print(f"removed {orphan.name}: no scenario of that name")
    began = time.monotonic()
    async with dev_server() as env:
        for scenario in selected:
            started = time.monotonic()
            if scenario.suggest_continue_as_new_after is None:
                written = await record(env, scenario)
            else:
                async with dev_server(scenario.suggest_continue_as_new_after) as own:
                    written = await record(own, scenario)
            names = ", ".join(p.name.split("__", 1)[1] for p in written)
            print(f"{scenario.name}: {len(written)} histories in {time.monotonic() - started:.1f}s ({names})")
    print(f"recorded {len(selected)} scenarios in {time.monotonic() - began:.1f}s into {HISTORIES}")


def parse(argv: list[str]) -> list[Scenario]:
    parser = argparse.ArgumentParser(
        prog="python -m tests.replay.record_histories",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("only", nargs="*", help="record only scenarios whose name contains one of these")
    parser.add_argument("--list", action="store_true", help="list the scenarios and exit")
    args = parser.parse_args(argv)
    if args.list:
        for scenario in SCENARIOS:
            print(f"{scenario.name}: {scenario.description}")
        raise SystemExit(0)
    selected = [s for s in SCENARIOS if not args.only or any(word in s.name for word in args.only)]
    if not selected:
        known = ", ".join(s.name for s in SCENARIOS)
        parser.error(f"no scenario matches {args.only}; known scenarios: {known}")
    return selected


if __name__ == "__main__":
    scenarios = parse(sys.argv[1:])
    code = 0
    try:
        asyncio.run(main(scenarios))
    except Exception as error:  # noqa: BLE001 - report which scenario failed, then exit non-zero
        print(f"recording failed: {type(error).__name__}: {error}", file=sys.stderr)
        import traceback

        traceback.print_exc()
        code = 1
    # The SDK's runtime threads can abort a normal interpreter exit; end the process directly.
    exit_process(code)
