"""`omectl rollout history`'s story: Temporal history events -> what happened in a rollout run,
row by row (no I/O: `rollout_reads` fetches the histories).

A `Rollout` run's history already tells it: its start summary names the targets, each Event
it records is an activity summarised `event <Reason>: <message>` (a step ready and its gate, a
step advanced, a rollback, the run closed), each analysis sample is a
`prometheus.analysis_sample` activity whose result carries the verdict, and its parent's
`progress` signals count the Instances on the new revision. Who steered it is in the
InferenceService's history: the `promote`, `rollback`, `retry`, ... signals and Updates it
received, each with the identity of the client that sent it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from temporalio.api.common.v1 import Payload, Payloads
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent

from models.canary_analysis import PROMETHEUS_ANALYSIS_SAMPLE
from planning.rollout.canary.texts import RESTARTED, RETRIED, RUN_CLOSED
from workflows.rollout.messages import SIGNAL_CANARY, SIGNAL_PAUSE, SIGNAL_PROGRESS, UPDATE_CANARY
from workflows.service import messages as service

STEERING = frozenset(
    {
        service.SIGNAL_PROMOTE,
        service.SIGNAL_ROLLBACK,
        service.UPDATE_RETRY,
        service.SIGNAL_RESUME,
        service.SIGNAL_PAUSE,
        service.SIGNAL_REPIN,
    }
)
"""The InferenceService's signals and Updates that steer a run: their senders are the WHO."""

RUN_SIGNALS = {
    "supersede": "a newer run opened; this one closes as Superseded",
    "close": "the InferenceService is being deleted",
    "respec": "spec.rollout changed while the run was parked",
}
EVENT_PREFIX = "event "
LAST_OUTCOMES = ("Completed", "RolledBack", "Superseded")


@dataclass(frozen=True)
class StoryRow:
    time: datetime
    kind: str
    """The Event's reason (`CanaryStepReady`, `RolloutRunClosed`, ...), or `Started`, `Progress`,
    `Sample`, `Request`, `Operator`, `Outcome`."""
    text: str
    who: str = ""


@dataclass
class RunStory:
    workflow_id: str
    run: int | None = None
    started: datetime | None = None
    ended: datetime | None = None
    last: str = "Running"
    """Completed, RolledBack or Superseded once closed (spec reference §3.4); Closed when the
    service was deleted mid-run; Running while open."""
    opened: str = ""
    rows: list[StoryRow] = field(default_factory=list)


def payload_value(payload: Payload) -> Any:
    """A payload the product's converter wrote: JSON (or nothing)."""
    if not payload.data:
        return None
    try:
        return json.loads(payload.data)
    except ValueError:
        return payload.data.decode(errors="replace")


def first_value(payloads: Payloads) -> Any:
    return payload_value(payloads.payloads[0]) if payloads.payloads else None


def summary_of(event: HistoryEvent) -> str:
    """The summary the workflow gave this event (activity, timer, start), as the UI shows it."""
    if not event.HasField("user_metadata") or not event.user_metadata.HasField("summary"):
        return ""
    value = payload_value(event.user_metadata.summary)
    return value if isinstance(value, str) else ""


def time_of(event: HistoryEvent) -> datetime:
    return event.event_time.ToDatetime(tzinfo=UTC)


def run_story(workflow_id: str, events: Sequence[HistoryEvent], steering: Iterable[StoryRow] = ()) -> RunStory:
    """The story of one run from its history, with the operators' requests (`steering_rows`
    of its InferenceService's history over the same time) woven in by time."""
    story = RunStory(workflow_id=workflow_id, run=run_number(workflow_id))
    samples: dict[int, str] = {}
    targets: dict[str, str] = {}
    seen_progress: dict[str, tuple[int, int]] = {}
    rolled_back = False
    for event in events:
        kind, when = event.event_type, time_of(event)
        if kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
            story.started = when
            run_input = first_value(event.workflow_execution_started_event_attributes.input)
            if isinstance(run_input, dict):
                targets = dict(run_input.get("targets") or {})
                story.run = run_input.get("run", story.run)
            story.opened = summary_of(event) or f"run {story.run} opened: " + ", ".join(
                f"{c} -> {t}" for c, t in targets.items()
            )
            story.rows.append(StoryRow(when, "Started", story.opened))
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attributes = event.activity_task_scheduled_event_attributes
            summary = summary_of(event)
            if attributes.activity_type.name == PROMETHEUS_ANALYSIS_SAMPLE:
                samples[event.event_id] = summary
            elif summary.startswith(EVENT_PREFIX):
                reason, _, message = summary[len(EVENT_PREFIX):].partition(": ")
                story.rows.append(StoryRow(when, reason, message))
                if reason == RUN_CLOSED and message.endswith("RolledBack"):
                    rolled_back = True
                elif reason in (RESTARTED, RETRIED):
                    rolled_back = False
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            done = event.activity_task_completed_event_attributes
            if done.scheduled_event_id in samples:
                result = first_value(done.result)
                text = result.get("summary", "") if isinstance(result, dict) else ""
                story.rows.append(StoryRow(when, "Sample", text or samples[done.scheduled_event_id]))
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED:
            failed = event.activity_task_failed_event_attributes
            if failed.scheduled_event_id in samples:
                text = f"{samples[failed.scheduled_event_id]}: failed: {failed.failure.message}"
                story.rows.append(StoryRow(when, "Sample", text))
        elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
            row = signal_row(event, targets, seen_progress)
            if row is not None:
                story.rows.append(row)
        elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
            accepted = event.workflow_execution_update_accepted_event_attributes.accepted_request
            if accepted.input.name == UPDATE_CANARY:
                request = first_value(accepted.input.args)
                action = request.get("action", "?") if isinstance(request, dict) else "?"
                story.rows.append(StoryRow(when, "Request", f"{action} (Update canary)", accepted.meta.identity))
        elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
            story.ended = when
            result = first_value(event.workflow_execution_completed_event_attributes.result)
            outcome = result.get("outcome") if isinstance(result, dict) else None
            story.last = "RolledBack" if rolled_back and outcome != "Completed" else str(outcome or "Completed")
            story.rows.append(StoryRow(when, "Outcome", f"run {story.run} ended: {story.last}"))
        elif kind in (EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED):
            story.ended = when
            story.last = "Terminated" if kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED else "Failed"
            who = event.workflow_execution_terminated_event_attributes.identity
            story.rows.append(StoryRow(when, "Outcome", f"run {story.run} ended: {story.last}", who))
    if story.ended is None and rolled_back:
        story.last = "RolledBack"
    story.rows = sorted([*story.rows, *steering], key=lambda r: r.time)
    return story


def signal_row(
    event: HistoryEvent, targets: dict[str, str], seen: dict[str, tuple[int, int]]
) -> StoryRow | None:
    """A signal the run received, as a row; a parent's `progress` only when the count of
    Instances on the run's target changed (every forward would drown the story)."""
    attributes = event.workflow_execution_signaled_event_attributes
    name, when, value = attributes.signal_name, time_of(event), first_value(attributes.input)
    if name == SIGNAL_PROGRESS and isinstance(value, dict):
        component = str(value.get("component"))
        if value.get("revision") != targets.get(component):
            return None
        counted = (int(value.get("updated", 0)), int(value.get("updated_serving", 0)))
        if seen.get(component) == counted:
            return None
        seen[component] = counted
        replicas = value.get("replicas", 0)
        return StoryRow(when, "Progress", f"{component}: {counted[0]}/{replicas} on the new revision, {counted[1]} serving")
    if name == SIGNAL_CANARY and isinstance(value, dict):
        # Sent by the InferenceService on an operator's behalf: the sender is in its history.
        return StoryRow(when, "Request", f"{value.get('action', '?')} delivered to the run")
    if name == SIGNAL_PAUSE:
        return StoryRow(when, "Pause", f"pause {value}" if value else "resumed")
    if name in RUN_SIGNALS:
        return StoryRow(when, name.capitalize(), RUN_SIGNALS[name])
    return None


def steering_rows(events: Sequence[HistoryEvent], since: datetime, until: datetime | None) -> list[StoryRow]:
    """The InferenceService's steering requests between `since` and `until` (None: now), each
    with its sender's identity and, for an Update, its answer (accepted, or the refusal)."""
    rows: list[StoryRow] = []
    accepted: dict[int, tuple[datetime, str, str]] = {}
    for event in events:
        when = time_of(event)
        if when < since or (until is not None and when > until):
            continue
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
            attributes = event.workflow_execution_signaled_event_attributes
            if attributes.signal_name in STEERING:
                value = first_value(attributes.input)
                shown = f" {json.dumps(value)}" if value not in (None, {}) else ""
                rows.append(StoryRow(when, "Operator", f"{attributes.signal_name} (signal){shown}", attributes.identity))
        elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
            request = event.workflow_execution_update_accepted_event_attributes.accepted_request
            if request.input.name in STEERING:
                accepted[event.event_id] = (when, request.input.name, request.meta.identity)
        elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED:
            completed = event.workflow_execution_update_completed_event_attributes
            if completed.accepted_event_id in accepted:
                at, name, who = accepted.pop(completed.accepted_event_id)
                rows.append(StoryRow(at, "Operator", f"{name} (Update): {answer_of(completed.outcome)}", who))
    rows += [StoryRow(at, "Operator", f"{name} (Update): no answer yet", who) for at, name, who in accepted.values()]
    return rows


def answer_of(outcome: Any) -> str:
    if outcome.HasField("failure"):
        return f"refused: {outcome.failure.message}"
    value = first_value(outcome.success)
    return str(value) if value is not None else "done"


def run_number(workflow_id: str) -> int | None:
    """`rollout/{ns}/{isvc}/{run}` -> run."""
    tail = workflow_id.rsplit("/", 1)[-1]
    return int(tail) if tail.isdigit() else None
