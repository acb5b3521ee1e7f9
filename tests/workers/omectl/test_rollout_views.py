"""The pure views of `omectl rollout`: the status tree and the `--until-done` verdict from
recorded query answers, the explain views, the watch's frames, and the history story from the
committed Rollout histories of tests/replay/histories."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import WorkflowHistory

from tests.workers.omectl.rollout_answers import NEW, OLD, canary_paused, instance, rolling
from workers.omectl.rollout_explain import explain_rows
from workers.omectl.rollout_story import run_story, steering_rows
from workers.omectl.rollout_tree import StatusSnapshot, render_text, status_tree
from workers.omectl.rollout_watch import FRAME_MARK, Progress, progress_of, watch
from workflows.rollout.messages import RolloutRow
from workflows.service.messages import ExplainView, RolloutStatusView

pytestmark = pytest.mark.unit

HISTORIES = Path(__file__).parents[2] / "replay" / "histories"


def text(snapshot: StatusSnapshot) -> str:
    return render_text(status_tree(snapshot), width=220)


# --- status tree ---------------------------------------------------------------------------


def test_a_canary_at_its_manual_gate_shows_step_gate_traffic_samples_and_each_instance() -> None:
    shown = text(canary_paused())
    lines = [line.strip("│├└─ ") for line in shown.splitlines()]
    assert lines[0].startswith("mistral-pd (canary-demo)  generation 3  phase Ready  Ready True  run 3 (active)  rollout Paused")
    engine = next(line for line in lines if line.startswith("engine"))
    assert "Canary group 0 Paused" in engine and "step 2/3" in engine and "traffic 50% -> 50%" in engine
    assert f"revisions  current {OLD}  update {NEW}" in lines
    assert "gate Manual: canary bbbb2222 step 2/3 waits at its manual gate (pause: {})  (released by promote)" in lines
    assert "error_rate 0.01 LT 0.05 Pass  11:00:05" in lines
    assert "Instances  1/2 on update revision, 2 ready, 2 serving" in lines
    assert f"#0  Ready  {NEW}" in lines and f"#1  Ready  {OLD}" in lines
    assert lines.count("pods 1/1 ready, 1 serving  on gpu-0") == 1


@pytest.mark.parametrize(
    ("instances", "expected"),
    [
        pytest.param([instance(0, OLD, NEW, phase="Updating"), instance(1, OLD)], [f"#0  Updating  {OLD} -> {NEW}", f"#1  Ready  {OLD}"], id="moving"),
        pytest.param([instance(0, NEW), instance(1, NEW)], [f"#0  Ready  {NEW}", f"#1  Ready  {NEW}"], id="all-moved"),
    ],
)
def test_each_instance_shows_its_running_revision_and_where_it_moves(instances: list, expected: list[str]) -> None:
    lines = [line.strip("│├└─ ") for line in text(rolling(instances)).splitlines()]
    assert [line for line in lines if line.startswith("#")] == expected


def test_a_budget_hold_from_the_replica_shows_as_the_components_gate() -> None:
    hold = {"gate": "Budget", "reason": "per-Component unavailability budget 0 exhausted (would become 1)"}
    shown = text(rolling([instance(0, OLD), instance(1, OLD)], rolloutHold=hold))
    assert "gate Budget: per-Component unavailability budget 0 exhausted (would become 1)" in shown


def test_json_holds_every_answer() -> None:
    found = canary_paused().to_json()
    assert found["rollout"]["rows"][0]["step"] == "2/3"
    assert found["service"]["status"]["components"]["engine"]["canary"]["metricResults"][0]["value"] == "0.01"
    assert [row["runningRevision"] for row in found["replicas"]["engine"]["instanceStatuses"]] == [NEW, OLD]


# --- the --until-done verdict --------------------------------------------------------------


def failed_canary(active: bool = True, base: StatusSnapshot | None = None) -> StatusSnapshot:
    paused = canary_paused()
    row = RolloutRow.model_validate({**paused.rollout.rows[0].model_dump(), "phase": "RolledBack", "group_phase": "RolledBack"})
    rollout = RolloutStatusView(reported="RolledBack", run=3, active=active, rows=[row])
    return StatusSnapshot((base or paused).service, rollout, (base or paused).replicas)


def closed_rollback_then(later: StatusSnapshot) -> StatusSnapshot:
    """A run that rolled back before the watch began, while a later change (no run) moves or rests."""
    return failed_canary(active=False, base=later)


def unread(snapshot: StatusSnapshot) -> StatusSnapshot:
    return StatusSnapshot(snapshot.service, snapshot.rollout, {}, unread=frozenset({"engine"}))


@pytest.mark.parametrize(
    ("snapshot", "expected"),
    [
        pytest.param(canary_paused(), Progress.MOVING, id="run-active"),
        pytest.param(failed_canary(), Progress.FAILED, id="rolled-back"),
        pytest.param(
            closed_rollback_then(rolling([instance(0, NEW), instance(1, OLD)])), Progress.MOVING, id="earlier-run-rolled-back-now-moving"
        ),
        pytest.param(
            closed_rollback_then(rolling([instance(0, NEW), instance(1, NEW)], current=NEW)),
            Progress.COMPLETE,
            id="earlier-run-rolled-back-now-done",
        ),
        pytest.param(unread(rolling([instance(0, NEW)], current=NEW)), Progress.MOVING, id="replica-unread"),
        pytest.param(rolling([instance(0, NEW), instance(1, NEW)], current=NEW), Progress.COMPLETE, id="all-on-update"),
        pytest.param(rolling([instance(0, NEW), instance(1, OLD)]), Progress.MOVING, id="one-behind"),
        pytest.param(rolling([instance(0, NEW), instance(1, NEW)]), Progress.MOVING, id="current-not-promoted-yet"),
        pytest.param(rolling([instance(0, NEW), instance(1, NEW)], current=NEW, ready="False"), Progress.MOVING, id="not-ready"),
    ],
)
def test_progress(snapshot: StatusSnapshot, expected: Progress) -> None:
    assert progress_of(snapshot) is expected


def test_a_closed_run_the_watch_saw_active_that_rolled_back_is_a_failure() -> None:
    assert progress_of(failed_canary(active=False), frozenset({3})) is Progress.FAILED


async def test_the_watch_rides_out_workflows_that_do_not_answer_for_a_while() -> None:
    from temporalio.service import RPCError, RPCStatusCode

    answers: Iterator[StatusSnapshot | Exception] = iter(
        [
            RPCError("deadline exceeded", RPCStatusCode.DEADLINE_EXCEEDED, b""),
            RPCError("deadline exceeded", RPCStatusCode.DEADLINE_EXCEEDED, b""),
            rolling([instance(0, OLD, NEW, phase="Updating")]),
            rolling([instance(0, NEW)], current=NEW),
        ]
    )

    async def read() -> StatusSnapshot:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    out = io.StringIO()
    ended = await watch(read, Console(file=out, width=220), until_done=True, poll_seconds=0)
    assert ended is Progress.COMPLETE and len(out.getvalue().split(FRAME_MARK)[1:]) == 2


async def test_the_watch_ends_when_the_service_is_gone() -> None:
    from temporalio.service import RPCError, RPCStatusCode

    async def read() -> StatusSnapshot:
        raise RPCError("workflow not found", RPCStatusCode.NOT_FOUND, b"")

    with pytest.raises(RPCError):
        await watch(read, Console(file=io.StringIO()), until_done=True, poll_seconds=0)


# --- the watch's frames --------------------------------------------------------------------


async def test_piped_watch_prints_a_frame_per_change_and_stops_once_complete() -> None:
    readings: Iterator[StatusSnapshot] = iter(
        [
            rolling([instance(0, OLD, NEW, phase="Updating"), instance(1, OLD)]),
            rolling([instance(0, OLD, NEW, phase="Updating"), instance(1, OLD)]),  # unchanged: no frame
            rolling([instance(0, NEW), instance(1, OLD, NEW, phase="Updating")]),
            rolling([instance(0, NEW), instance(1, NEW)], current=NEW),
        ]
    )

    async def read() -> StatusSnapshot:
        return next(readings)

    out = io.StringIO()
    ended = await watch(read, Console(file=out, width=220), until_done=True, poll_seconds=0)
    frames = out.getvalue().split(FRAME_MARK)[1:]
    assert ended is Progress.COMPLETE and len(frames) == 3
    assert [f"#0  Updating  {OLD} -> {NEW}" in frames[0], f"#0  Ready  {NEW}" in frames[1], f"#1  Ready  {NEW}" in frames[2]] == [True] * 3


async def test_on_a_terminal_the_watch_redraws_in_place() -> None:
    readings = iter([rolling([instance(0, OLD, NEW, phase="Updating")]), rolling([instance(0, NEW)], current=NEW)])

    async def read() -> StatusSnapshot:
        return next(readings)

    out = io.StringIO()
    ended = await watch(read, Console(file=out, width=220, force_terminal=True), until_done=True, poll_seconds=0)
    drawn = out.getvalue()
    # Rich Live moves the cursor back up over the last frame instead of printing a new one.
    assert ended is Progress.COMPLETE and FRAME_MARK not in drawn
    assert "Updating" in drawn and "\x1b[1A" in drawn and "\x1b[2K" in drawn


async def test_until_done_waits_out_a_service_that_only_looks_at_rest() -> None:
    reads = 0

    async def read() -> StatusSnapshot:
        nonlocal reads
        reads += 1
        return rolling([instance(0, NEW)], current=NEW)

    ended = await watch(read, Console(file=io.StringIO()), until_done=True, poll_seconds=0)
    assert ended is Progress.COMPLETE and reads == 3


# --- explain -------------------------------------------------------------------------------


def explained(**extra: object) -> ExplainView:
    base = {"component": "engine", "grouped": True, "group": 0, "run": 3, "plan_ready": "True/Pinned",
            "drift": "False/InSync", "gate": "Manual", "reason": "waits at its manual gate", "release": "promote",
            "updated": 1, "replicas": 2, "summary": "engine waits at Manual"}
    return ExplainView.model_validate({**base, **extra})


def test_explain_shows_the_reference_views_of_a_paused_canary() -> None:
    snapshot = canary_paused()
    rows = dict(explain_rows(explained(), snapshot.service, snapshot.rollout))
    assert rows["READY"] == "True/Pinned" and rows["DRIFT"] == "False/InSync"
    assert rows["HOLD"] == "ObservedPaused"
    assert rows["REVISIONS"] == "stable=aaaa1111,target=bbbb2222,rejected="
    assert rows["TRAFFIC"] == f"engine:{OLD}=50,engine:{NEW}=50"
    assert (rows["GATE"], rows["RELEASE"], rows["CAPACITY"]) == ("Manual", "promote", "1/2")


@pytest.mark.parametrize(
    ("pause", "parked", "expected"),
    [
        pytest.param("true", None, "GlobalPause", id="global-pause"),
        pytest.param(None, "ProviderUnbound", "PlanParked (ProviderUnbound)", id="parked"),
    ],
)
def test_explain_hold(pause: str | None, parked: str | None, expected: str) -> None:
    snapshot = canary_paused()
    service = snapshot.service.model_copy(update={"pause": pause})
    rollout = snapshot.rollout.model_copy(update={"parked_reason": parked})
    assert dict(explain_rows(explained(), service, rollout))["HOLD"] == expected


def test_explain_of_a_component_in_no_group_shows_its_lifecycle_revisions() -> None:
    snapshot = rolling([instance(0, OLD)])
    lone = explained(grouped=False, group=None, run=None, plan_ready=None, drift=None, target=NEW)
    rows = dict(explain_rows(lone, snapshot.service, RolloutStatusView(reported="NotConfigured")))
    assert rows["GROUP"] == "none: rolls out on its own" and rows["HOLD"] == "None"
    assert rows["REVISIONS"] == f"stable={OLD},target={NEW},rejected=" and rows["TRAFFIC"] == "-"


# --- history story -------------------------------------------------------------------------


def events(name: str) -> list[HistoryEvent]:
    return list(WorkflowHistory.from_json("x", (HISTORIES / name).read_text()).events)


def service_events(scenario: str) -> list[HistoryEvent]:
    found: list[HistoryEvent] = []
    for path in sorted(HISTORIES.glob(f"{scenario}__InferenceService__*.json")):
        found += events(path.name)
    return found


def story_of(name: str, scenario: str) -> list[tuple[str, str, str]]:
    first = run_story("rollout/canary-demo/mistral-pd/x", events(name))
    assert first.started is not None
    steering = steering_rows(service_events(scenario), first.started, first.ended)
    story = run_story("rollout/canary-demo/mistral-pd/x", events(name), steering)
    return [(row.kind, row.text, row.who) for row in story.rows]


def test_a_canary_that_passed_analysis_and_was_promoted() -> None:
    story = run_story("rollout/canary-demo/mistral-pd/2", events("service_canary__Rollout__0.json"))
    assert (story.run, story.last) == (2, "Completed")
    rows = story_of("service_canary__Rollout__0.json", "service_canary")
    kinds = [kind for kind, _, _ in rows]
    assert kinds[0] == "Started" and kinds[-1] == "Outcome"
    assert ("Sample", "step 1 sample 1: Pass (error_rate 0 < 0.05)", "") in rows
    ready = [text for kind, text, _ in rows if kind == "CanaryStepReady"]
    assert [text.split(";")[-1].strip() for text in ready] == ["gate Analysis", "gate Manual"]
    # Who promoted: the operator's signal on the InferenceService, with its client's identity,
    # before the run received it and passed its manual gate.
    promote = rows.index(("Operator", "promote (signal)", "5690@vm"))
    assert promote < kinds.index("Request") < kinds.index("CanaryPromoting") < kinds.index("CanaryCompleted")
    assert rows[-1] == ("Outcome", "run 2 ended: Completed", "")


def test_a_canary_that_failed_analysis_rolled_back() -> None:
    story = run_story("rollout/canary-demo/mistral-pd/3", events("service_canary__Rollout__1.json"))
    assert (story.run, story.last) == (3, "RolledBack")
    samples = [row.text for row in story.rows if row.kind == "Sample"]
    assert samples == ["step 1 sample 1: Fail (error_rate 0.291328 >= 0.05)", "step 1 sample 2: Fail (error_rate 0.2937 >= 0.05)"]
    rolling_back = next(row.text for row in story.rows if row.kind == "CanaryRollingBack")
    assert "cause analysis: 2 failing sample(s) reached failureLimit 2" in rolling_back
    assert [row.text for row in story.rows if row.kind == "RolloutRunClosed"] == ["run 3 closed: RolledBack"]


def test_a_blue_green_run_tells_its_instances_moving() -> None:
    story = run_story("rollout/mistral-demo/mistral-pd/2", events("service_rollout_group__Rollout__0.json"))
    assert story.last == "Completed"
    assert [row.text for row in story.rows if row.kind == "Progress"] == [
        "engine: 0/1 on the new revision, 0 serving",
        "decoder: 0/1 on the new revision, 0 serving",
        "decoder: 1/1 on the new revision, 1 serving",
        "engine: 1/1 on the new revision, 1 serving",
    ]


def test_steering_outside_the_runs_time_is_left_out() -> None:
    run = run_story("x", events("service_canary__Rollout__1.json"))
    assert run.started is not None
    assert steering_rows(service_events("service_canary"), run.started, run.ended) == []
