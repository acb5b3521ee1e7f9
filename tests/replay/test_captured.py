"""Histories captured from test runs that met a race worth keeping, replayed on current code.

`rollout_report_with_its_start__InferenceService.json`: an InferenceService of the canary chaos
test (`tests/e2e/test_chaos_canary.py`, CI of 2026-12-05) whose worker was killed just after it
started Rollout run 2. The workflow task that then saw the run start also carried the run's
first report (`rollout_changed`); signals are handled first in a task, so that code dropped the
report as a stranger's and the components held on `Plan` until the test gave up.
`workflows.service.rollouts.RUN_TRACKED_BEFORE_START` mends it for new runs; this history has no
such marker, so it must replay on the old path, as a service still running it would.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.replay.test_replay import history, replayer
from workflows.registry import WORKFLOWS

pytestmark = pytest.mark.workflows

CAPTURED = Path(__file__).parent / "captured"
REPORT_WITH_START = CAPTURED / "rollout_report_with_its_start__InferenceService.json"


def test_the_captured_history_has_the_report_in_the_task_that_sees_the_start() -> None:
    events = json.loads(REPORT_WITH_START.read_text())["events"]
    kinds = [str(event["eventType"]).removeprefix("EVENT_TYPE_") for event in events]
    report = next(i for i, event in enumerate(events) if "rollout_changed" in json.dumps(event))
    started = max(i for i in range(report) if kinds[i] == "CHILD_WORKFLOW_EXECUTION_STARTED")
    assert "Rollout" in json.dumps(events[started])
    completed_between = [i for i in range(started, report) if kinds[i] == "WORKFLOW_TASK_COMPLETED"]
    assert report > started and not completed_between, "the report must reach the task that sees the start"


async def test_the_captured_history_replays_on_current_code() -> None:
    result = await replayer(list(WORKFLOWS)).replay_workflow(history(REPORT_WITH_START), raise_on_replay_failure=False)
    assert result.replay_failure is None, f"{REPORT_WITH_START.name}: {result.replay_failure}"
