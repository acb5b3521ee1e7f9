"""Replay the committed workflow histories against the current workflow code.

Temporal resumes a running workflow by replaying its history through the current code; if the
code now issues different commands (another activity, timer or child, or the same ones in
another order) the worker fails that workflow's tasks with `NondeterminismError` and the
workflow is stuck until the code is fixed. These tests catch that before release: every file
in `tests/replay/histories/` (recorded by `tests/replay/record_histories.py`) must replay with
the same workflows, converter and sandbox as the worker. A deliberately changed copy of each
workflow (`tests/replay/changed_workflows.py`) must fail, so the check can fail.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from functools import cache
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer, WorkflowReplayResult
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions
from temporalio.workflow import NondeterminismError

from tests.replay.changed_workflows import CHANGED
from tests.replay.record_histories import REGENERATE, SCENARIOS
from tests.replay.scenarios import run_limits_of
from workers.client import DATA_CONVERTER
from workers.worker import _SANDBOX_PASSTHROUGH
from workflows.names import (
    DRAIN,
    INFERENCE_REPLICA,
    INFERENCE_SERVICE,
    INSTANCE,
    MIGRATION,
    ROLLOUT,
    TRAFFIC_MAP,
)
from workflows.registry import WORKFLOWS

pytestmark = pytest.mark.workflows

HISTORIES = Path(__file__).parent / "histories"
FILES = sorted(HISTORIES.glob("*.json"))


def workflow_type(path: Path) -> str:
    """`<scenario>__<workflow-type>__<n>.json` -> workflow type."""
    return path.stem.split("__")[1]


@cache
def history(path: Path) -> WorkflowHistory:
    # The recorder stores the workflow id beside the events: workflows read it, so replaying under
    # another id could issue different commands.
    document = json.loads(path.read_text())
    workflow_id = document.pop("workflowId")
    return WorkflowHistory.from_json(workflow_id, document)


def replayer(workflows: list[type[object]]) -> Replayer:
    """A replayer set up like the worker: same converter, same sandbox pass-through."""
    return Replayer(
        workflows=workflows,
        data_converter=DATA_CONVERTER,
        workflow_runner=SandboxedWorkflowRunner(
            restrictions=SandboxRestrictions.default.with_passthrough_modules(*_SANDBOX_PASSTHROUGH)
        ),
    )


def explain(path: Path, failure: Exception) -> str:
    return (
        f"replaying {path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path} against the "
        f"current {workflow_type(path)!r} workflow failed: {type(failure).__name__}: {failure}\n"
        f"The workflow code now issues different commands (activities, timers, children, their order) "
        f"than the code that wrote this history. A workflow of this type still running in production would "
        f"be stuck on this change.\n"
        f"- If the change is a mistake (e.g. non-deterministic code: time, random, dict/set order, I/O), fix it.\n"
        f'- If it is intended and old runs may still be in flight, guard it with `workflow.patched("<id>")` '
        f"so old histories take the old path.\n"
        f"- If it is intended and no run of the old code must survive, regenerate the histories: "
        f"`{REGENERATE}` (see tests/replay/README.md)."
    )


def test_histories_cover_every_scenario_and_workflow_type() -> None:
    assert FILES, f"no histories in {HISTORIES}: record them with `{REGENERATE}`"
    scenarios = {path.stem.split("__")[0] for path in FILES}
    assert scenarios == {scenario.name for scenario in SCENARIOS}, (
        f"histories are out of step with the scenarios; rerun `{REGENERATE}`"
    )
    # Every workflow type the worker registers has histories to replay.
    registered = {getattr(cls, "__temporal_workflow_definition").name for cls in WORKFLOWS}
    expected = {INSTANCE, INFERENCE_REPLICA, INFERENCE_SERVICE, ROLLOUT, MIGRATION, DRAIN, TRAFFIC_MAP}
    assert {workflow_type(path) for path in FILES} == registered == expected
    for path in FILES:
        events = json.loads(path.read_text())["events"]
        started = events[0]["workflowExecutionStartedEventAttributes"]
        assert started["workflowType"]["name"] == workflow_type(path), f"{path.name} is misnamed"


def test_the_gang_deletion_reports_what_it_holds_before_its_end() -> None:
    """`service_gang_deletes_counted` covers `pods_held`: the two-pod Instance told to delete
    reports once its delete call returned (its pods Terminating: one pod of the budget held, not
    two), then its end. Its pods take 12 s to exit and the watcher holds their way out 10 s: a
    recording whose first report came that late was made by the Instance of before version 11,
    which waited for the watcher (`DELETED_PODS_TERMINATING`)."""
    replica = HISTORIES / "service_gang_deletes_counted__InferenceReplica__0.json"
    events = json.loads(replica.read_text())["events"]
    signals = [
        (datetime.fromisoformat(event["eventTime"]), event["workflowExecutionSignaledEventAttributes"])
        for event in events
        if "workflowExecutionSignaledEventAttributes" in event
    ]
    scaled_down = [at for at, signal in signals if signal["signalName"] == "configure"][-1]
    deleting = [
        (at - scaled_down, report["total_pods"], report["deleted"])
        for at, signal in signals
        if signal["signalName"] == "instance_changed"
        for report in (json.loads(base64.b64decode(p["data"])) for p in signal["input"]["payloads"])
        if report["index"] == 1 and report["phase"] == "Deleting"
    ]
    assert [(pods, deleted) for _, pods, deleted in deleting] == [(0, False), (0, True)]
    assert deleting[0][0] < timedelta(seconds=5) < deleting[1][0], deleting


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
async def test_history_replays_on_current_code(path: Path) -> None:
    scenario = next(s for s in SCENARIOS if s.name == path.stem.split("__")[0])
    with run_limits_of(scenario):
        result: WorkflowReplayResult = await replayer(WORKFLOWS).replay_workflow(
            history(path), raise_on_replay_failure=False
        )
    if result.replay_failure is not None:
        pytest.fail(explain(path, result.replay_failure))


@pytest.mark.parametrize("name", sorted(CHANGED))
async def test_changed_workflow_fails_replay_with_nondeterminism(name: str) -> None:
    paths = [path for path in FILES if workflow_type(path) == name]
    assert paths, f"no {name} history to replay; record them with `{REGENERATE}`"

    async def histories() -> AsyncIterator[WorkflowHistory]:
        for path in paths:
            yield history(path)

    failures: list[Exception | None] = []
    async with replayer([CHANGED[name]]).workflow_replay_iterator(histories()) as results:
        async for result in results:
            failures.append(result.replay_failure)
    assert len(failures) == len(paths)
    # Every history must trip on the extra timer: otherwise the replay check would miss a real change.
    for path, failure in zip(paths, failures, strict=True):
        assert isinstance(failure, NondeterminismError), (
            f"{path.name} replayed against a deliberately changed {name} workflow gave "
            f"{type(failure).__name__}: {failure}, not NondeterminismError"
        )
