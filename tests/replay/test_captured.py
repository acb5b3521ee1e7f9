"""Histories captured from test runs that met a race worth keeping, replayed on current code.

`rollout_report_with_its_start__InferenceService.json`: an InferenceService of the canary chaos
test (`tests/e2e/test_chaos_canary.py`, CI of 2026-12-05) whose worker was killed just after it
started Rollout run 2. The workflow task that then saw the run start also carried the run's
first report (`rollout_changed`); signals are handled first in a task, so that code dropped the
report as a stranger's and the components held on `Plan` until the test gave up.
`workflows.service.rollouts.RUN_TRACKED_BEFORE_START` mends it for new runs; this history has no
such marker, so it must replay on the old path, as a service still running it would.

`quota_wait_before_version_10__Instance.json`: an Instance started under workflow version 9
(recorded for `service_launched_removals` on 2026-12-07) whose pod a full ResourceQuota refused:
it waited on `QuotaExceeded` without reporting it, then was told to delete and reported once,
deleted. Version 10 reports such waits (`instance-waits-reported`); a version-9 run must not.

`report_answered_busy__Instance.json`: an Instance started under workflow version 12, from the
lifecycle bench of 2026-12-07 (Instance 108 of 200, its container killed) while its
InferenceReplica was continuing as new: its reports were answered busy for about two seconds
(`instance-report-busy-later`), each sent again on its wait's timer, while the Instance took the
killed pod out, deleted it and made the new one; the last report was delivered. No recorded
scenario meets a busy parent (the recorder's parents are never busy).

`update_meets_serving_create_v12__Instance.json`: an Instance started under workflow version 12,
recorded on 2026-12-07 by the code of f0b8260 in the fake cluster's story of
`tests/workflows/test_instance_update_while_creating.py`: its worker away, its pod turned ready
(serving since its create) and an update arrived; the next task heard both, and the Instance
rebuilt the serving pod on its name at the new revision. Version 13 makes it Ready first and
surges (`instance-ready-before-update`); a version-12 run, recorded without that marker, must
replay on the rebuild. The chaos test of CI on 2026-12-07 met this with 200 Instances.

`service_retried_v13__Instance.json`: an Instance started under workflow version 13, recorded on
2026-12-07 in the fake cluster's story of `tests/workflows/test_instance_service_quota.py`: a
full `services` quota refused its headless Service; it was Ready without it, tried it again at
30 s and 60 s (refused), and made it at 120 s, once the quota had room
(`instance-service-retried`); then deleted.

`moment_replaced_timer_v13__Instance.json` and `moment_keeps_timer_v14__Instance.json`: a gang
Instance (a leader and a worker, `instanceReadyTimeout` 2 minutes) brought up and deleted in the
fake cluster's story of `tests/workflows/test_instance_moment_keeps_timer.py`, recorded on
2026-12-08 under version 13 (the code of b8b2b72) and under version 14. After the gate write, the
version-13 run cancelled its 120 s readiness timer for a 5-minute re-check; the version-14 run
kept it (`instance-moment-keeps-timer`). Each must replay on its own path.

`service_retried_in_bring_up_v14__Instance.json`: a gang Instance started under version 14,
recorded on 2026-12-08 in the fake cluster's story of `test_instance_service_quota.py`: a full
`services` quota refused its headless Service; its pods were made but not ready, the quota had
room, and the Service was made at the 30 s try, during the bring-up, before the Instance was
Ready (`instance-service-retried-in-bring-up`); then deleted.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from tests.replay.test_replay import history, replayer
from workflows.registry import WORKFLOWS

pytestmark = pytest.mark.workflows

CAPTURED = Path(__file__).parent / "captured"
REPORT_WITH_START = CAPTURED / "rollout_report_with_its_start__InferenceService.json"
QUOTA_WAIT_V9 = CAPTURED / "quota_wait_before_version_10__Instance.json"
REPORT_BUSY = CAPTURED / "report_answered_busy__Instance.json"
REBUILT_V12 = CAPTURED / "update_meets_serving_create_v12__Instance.json"
SERVICE_RETRIED_V13 = CAPTURED / "service_retried_v13__Instance.json"
MOMENT_REPLACED_V13 = CAPTURED / "moment_replaced_timer_v13__Instance.json"
MOMENT_KEPT_V14 = CAPTURED / "moment_keeps_timer_v14__Instance.json"
BRING_UP_RETRY_V14 = CAPTURED / "service_retried_in_bring_up_v14__Instance.json"


def test_the_captured_history_has_the_report_in_the_task_that_sees_the_start() -> None:
    events = json.loads(REPORT_WITH_START.read_text())["events"]
    kinds = [str(event["eventType"]).removeprefix("EVENT_TYPE_") for event in events]
    report = next(i for i, event in enumerate(events) if "rollout_changed" in json.dumps(event))
    started = max(i for i in range(report) if kinds[i] == "CHILD_WORKFLOW_EXECUTION_STARTED")
    assert "Rollout" in json.dumps(events[started])
    completed_between = [i for i in range(started, report) if kinds[i] == "WORKFLOW_TASK_COMPLETED"]
    assert report > started and not completed_between, "the report must reach the task that sees the start"


@pytest.mark.parametrize(
    "captured",
    [
        REPORT_WITH_START, QUOTA_WAIT_V9, REPORT_BUSY, REBUILT_V12, SERVICE_RETRIED_V13,
        MOMENT_REPLACED_V13, MOMENT_KEPT_V14, BRING_UP_RETRY_V14,
    ],  # fmt: skip
    ids=lambda path: path.stem,
)
async def test_the_captured_history_replays_on_current_code(captured: Path) -> None:
    result = await replayer(list(WORKFLOWS)).replay_workflow(history(captured), raise_on_replay_failure=False)
    assert result.replay_failure is None, f"{captured.name}: {result.replay_failure}"


def test_the_version_9_instance_waited_on_the_quota_and_reported_only_its_end() -> None:
    events = json.loads(QUOTA_WAIT_V9.read_text())["events"]
    started = events[0]["workflowExecutionStartedEventAttributes"]["input"]["payloads"][0]["data"]
    assert json.loads(base64.b64decode(started))["workflow_version"] == 9
    assert "exceeded quota" in json.dumps(events)
    # Reports go out as `temporal.signal_workflow` local activities: their markers.
    markers = [
        base64.b64decode(payload["data"])
        for event in events
        for detail in event.get("markerRecordedEventAttributes", {}).get("details", {}).values()
        for payload in detail.get("payloads", [])
    ]
    reports = [data for data in markers if b'"activity_type":"temporal.signal_workflow"' in data]
    assert len(reports) == 1, "one report, deleted: its wait was not reported"


def test_the_busy_answered_instance_recreated_its_pod_while_its_reports_went_again() -> None:
    events = json.loads(REPORT_BUSY.read_text())["events"]
    started = events[0]["workflowExecutionStartedEventAttributes"]["input"]["payloads"][0]["data"]
    assert json.loads(base64.b64decode(started))["workflow_version"] == 12
    # Each local activity's marker: its result, then its description (the activity's type).
    steps: list[str] = []
    for event in events:
        details = event.get("markerRecordedEventAttributes", {}).get("details", {})
        data = b"".join(base64.b64decode(p["data"]) for d in details.values() for p in d.get("payloads", []))
        if b'"busy":true' in data:
            steps.append("busy")
        elif b'"delivered":true' in data:
            steps.append("delivered")
        elif b"kube.create_pods" in data:
            steps.append("create")
    first_busy = steps.index("busy")
    after = steps[first_busy:]
    assert "create" in after[: after.index("delivered")], f"the new pod waited for the parent: {steps}"
    assert after.count("busy") >= 3 and after[after.index("delivered") - 1] == "busy", steps


def _summaries(path: Path) -> tuple[int, list[str]]:
    """The run's workflow version and the summaries of its commands, in order."""
    events = json.loads(path.read_text())["events"]
    started = events[0]["workflowExecutionStartedEventAttributes"]["input"]["payloads"][0]["data"]
    summaries = [
        json.loads(base64.b64decode(event["userMetadata"]["summary"]["data"]))
        for event in events
        if "summary" in event.get("userMetadata", {})
    ]
    return json.loads(base64.b64decode(started))["workflow_version"], summaries


def test_the_version_12_instance_rebuilt_its_serving_pod_when_the_update_came() -> None:
    version, summaries = _summaries(REBUILT_V12)
    assert version == 12
    creates = [text for text in summaries if text.startswith("create 1 pods for chat-engine-1")]
    assert len(creates) == 2 and any("rebuild on stable names" in text for text in summaries), summaries


def test_the_version_13_instance_tried_its_service_again_until_it_was_made() -> None:
    version, summaries = _summaries(SERVICE_RETRIED_V13)
    assert version == 13
    applies = [i for i, text in enumerate(summaries) if text == "apply headless Service chat-engine-1"]
    made = summaries.index("event HeadlessServiceCreated for chat-engine-1")
    assert len(applies) == 4 and applies[-1] == made - 1, summaries
    assert summaries.count("event HeadlessServiceFailed for chat-engine-1") == 1


@pytest.mark.parametrize(("captured", "version"), [(MOMENT_REPLACED_V13, 13), (MOMENT_KEPT_V14, 14)])
def test_the_gang_instance_kept_its_readiness_timer_from_version_14(captured: Path, version: int) -> None:
    recorded, _ = _summaries(captured)
    assert recorded == version
    events = [
        (
            str(event["eventType"]).removeprefix("EVENT_TYPE_"),
            json.loads(base64.b64decode(event["userMetadata"]["summary"]["data"]))
            if "summary" in event.get("userMetadata", {})
            else "",
        )
        for event in json.loads(captured.read_text())["events"]
    ]
    gate = events.index(("MARKER_RECORDED", "put chat-engine-1 into rotation (2 pods)"))
    ready = next(i for i in range(gate, len(events)) if events[i][0] == "UPSERT_WORKFLOW_SEARCH_ATTRIBUTES")
    timers = [kind for kind, _ in events[:ready] if kind.startswith("TIMER_")]
    # Version 13: the readiness timer cancelled at the gate write for a 5-minute re-check.
    expected = ["TIMER_STARTED", "TIMER_CANCELED", "TIMER_STARTED"] if version == 13 else ["TIMER_STARTED"]
    assert timers == expected, events[:ready]


def test_the_version_14_gang_instance_made_its_service_before_it_was_ready() -> None:
    version, summaries = _summaries(BRING_UP_RETRY_V14)
    assert version == 14
    made = summaries.index("event HeadlessServiceCreated for chat-engine-1")
    assert summaries[made - 1] == "apply headless Service chat-engine-1"
    assert made < summaries.index("put chat-engine-1 into rotation (2 pods)"), summaries
