"""OME's steering annotations as the signals and Updates the `temporal` CLI sends (contract of
issue 15), and what happens to each annotation afterwards.

| annotation (InferenceService unless noted)   | message                        | afterwards                   |
|----------------------------------------------|--------------------------------|------------------------------|
| `ome.io/rollout-paused` = v (new value)      | signal `pause` `{"mode": v}`   | stays; v recorded if valid   |
| `ome.io/rollout-paused` removed, recorded    | signal `resume`                | record entry dropped         |
| `ome.io/rollout-promote` = hash              | Update `promote` `{revision}`  | removed after the answer     |
| `ome.io/rollout-rollback` = `true`           | Update `rollback` `{}`         | stays; recorded              |
| `ome.io/rollout-resume` = value              | Update `retry` `{revision}`    | removed after the answer     |
| `ome.io/rollout-repin` = digest / `now`      | Update `repin` `{digest}`      | removed after the answer     |
| `ome.io/migration-request-v1-<uuid>` = JSON  | Update `migrate` JSON + uuid   | removed if accepted; a refused one stays, recorded |
| InferenceReplica `ome.io/release-held-revision` | signal `release_held`       | removed                      |
| InferenceReplica `ome.io/reset-instances`    | signal `reset_instances`       | removed                      |

A pause value other than `true` / `freeze` is still signalled (the workflow refuses it with a
`PauseRefused` Event) but never recorded: the record says which pause is the controller's to
lift, and a refused one paused nothing, so its removal must not `resume` a pause set otherwise.

Two memories keep a request from being sent twice:
- within a process, `Memory.handled` (annotation -> the value handled: answered, refused, or
  failed softly because the workflow does not exist);
- across restarts, the object itself: one-shot annotations are removed once answered, and the
  level ones (`rollout-paused`, `rollout-rollback`, refused migration requests) are recorded in
  `ome.io/relayed-annotations`. Both happen in one JSON patch guarded by `test` operations on
  `metadata.uid` and on each annotation's value (`cleanup_patch`), so a value the user changed
  in between is neither removed nor recorded.

A crash between a signal and that patch resends the signal after a restart (a second `pause`
of the same depth, a second `release_held`): harmless for these messages, and the window is one
API round trip. Updates carry the ID `kube/{uid}/{annotation}/{resourceVersion}`, which Temporal
dedups within the workflow's run, so a resent Update gets the first answer back.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

from planning.controller.objects import (
    Op,
    annotation_path,
    annotations_of,
    identity,
    labels_of,
    metadata_of,
    uid_guard,
)
from planning.service.relay import (
    MIGRATION_REQUEST_PREFIX,
    PAUSED,
    PROMOTE,
    RELAYED_ANNOTATION,
    RELEASE_HELD,
    REPIN,
    RESET_INSTANCES,
    RESUME,
    ROLLBACK,
)

ANNOTATION_REFUSED = "AnnotationRefused"
"""Warning Event reason on the object whose annotation was refused."""

LABEL_ISVC = "ome.io/inferenceservice"
LABEL_COMPONENT = "ome.io/component"

ROLLBACK_VALUE = "true"
PAUSE_VALUES = frozenset({"true", "freeze"})
"""The `ome.io/rollout-paused` values that pause (spec reference §5); only these are recorded."""


class Answer(StrEnum):
    ACCEPTED = "accepted"
    REFUSED = "refused"
    NO_WORKFLOW = "no_workflow"


@dataclass(frozen=True)
class Rule:
    """What one annotation becomes, and what happens to it once answered."""

    kind: Literal["signal", "update"]
    message: str
    level: bool = False
    """Stays on the object (the user removes it); recorded once relayed."""
    record_refused: bool = False
    """A refused request stays on the object and is recorded so that it is not resent."""


RULES: dict[str, Rule] = {
    PAUSED: Rule("signal", "pause", level=True),
    ROLLBACK: Rule("update", "rollback", level=True),
    PROMOTE: Rule("update", "promote"),
    RESUME: Rule("update", "retry"),
    REPIN: Rule("update", "repin"),
    MIGRATION_REQUEST_PREFIX: Rule("update", "migrate", record_refused=True),
    RELEASE_HELD: Rule("signal", "release_held"),
    RESET_INSTANCES: Rule("signal", "reset_instances"),
}
REPLICA_ORDER = (RELEASE_HELD, RESET_INSTANCES)
RESUME_MESSAGE = "resume"


def rule_of(key: str) -> Rule:
    return RULES[MIGRATION_REQUEST_PREFIX if key.startswith(MIGRATION_REQUEST_PREFIX) else key]


def _recordable(key: str) -> bool:
    return key in (PAUSED, ROLLBACK) or key.startswith(MIGRATION_REQUEST_PREFIX)


@dataclass(frozen=True)
class Memory:
    """What this process did about one object's annotations (keyed by the object's uid)."""

    handled: dict[str, str | None] = field(default_factory=dict)
    """Annotation -> the value whose request was handled (None: the removal of a pause)."""
    levels: dict[str, str | None] = field(default_factory=dict)
    """Recorded values relayed by this process, over the object's record (None: dropped)."""
    remove: dict[str, str] = field(default_factory=dict)
    """Annotation -> the answered value to remove from the object."""


@dataclass(frozen=True)
class Request:
    """One message to send (or, `kind="refuse"`, refused here without sending)."""

    key: str
    value: str | None
    kind: Literal["signal", "update", "refuse"]
    message: str
    target: tuple[str, str]
    """(namespace, InferenceService name) whose workflow receives it."""
    payload: dict[str, Any] | None = None
    """None: the message takes no input."""
    update_id: str = ""
    refusal: str = ""


# --- the record -------------------------------------------------------------------------


def read_record(annotations: dict[str, str]) -> dict[str, str]:
    """The controller's record; unreadable (edited by hand) counts as empty."""
    try:
        record = json.loads(annotations.get(RELAYED_ANNOTATION) or "{}")
    except ValueError:
        return {}
    if not isinstance(record, dict):
        return {}
    return {str(key): str(value) for key, value in record.items() if _recordable(str(key))}


def format_record(record: dict[str, str]) -> str:
    return json.dumps(record, sort_keys=True, separators=(",", ":"))


def effective_record(annotations: dict[str, str], memory: Memory) -> dict[str, str]:
    """The record as this process knows it: the object's, with what it relayed since."""
    record = read_record(annotations)
    for key, value in memory.levels.items():
        if value is None:
            record.pop(key, None)
        else:
            record[key] = value
    return record


def desired_record(annotations: dict[str, str], memory: Memory) -> dict[str, str]:
    """The pause stays recorded until its removal was relayed (`resume`); the other entries
    go with their annotation."""
    return {
        key: value
        for key, value in effective_record(annotations, memory).items()
        if key == PAUSED or annotations.get(key) is not None
    }


# --- observing ------------------------------------------------------------------------


def observe(memory: Memory, annotations: dict[str, str]) -> Memory:
    """Forget what the object no longer carries: a one-shot annotation removed (by us after its
    answer, or by the user) may come back with the same value as a new request."""
    handled = dict(memory.handled)
    levels = dict(memory.levels)
    remove = {key: value for key, value in memory.remove.items() if annotations.get(key) == value}
    for key in list(handled):
        if key != PAUSED and key not in annotations:
            del handled[key]
            if _recordable(key):
                levels[key] = None
    return Memory(handled=handled, levels=levels, remove=remove)


# --- requests -------------------------------------------------------------------------


def _unhandled(memory: Memory, key: str, value: str | None) -> bool:
    return key not in memory.handled or memory.handled[key] != value


def _update_id(obj: dict[str, Any], key: str) -> str:
    return f"kube/{metadata_of(obj).get('uid') or ''}/{key}/{metadata_of(obj).get('resourceVersion') or ''}"


def isvc_requests(obj: dict[str, Any], memory: Memory) -> list[Request]:
    """The messages an InferenceService's annotations ask for that were not handled yet."""
    annotations = annotations_of(obj)
    record = effective_record(annotations, memory)
    target = identity(obj)
    requests: list[Request] = []
    paused = annotations.get(PAUSED)
    if _unhandled(memory, PAUSED, paused):
        if paused is not None and paused != record.get(PAUSED):
            requests.append(Request(PAUSED, paused, "signal", "pause", target, {"mode": paused}))
        elif paused is None and PAUSED in record:
            # Only a relayed pause is lifted: a pause someone else set (the `temporal` CLI)
            # is not ours to resume.
            requests.append(Request(PAUSED, None, "signal", RESUME_MESSAGE, target))
    rollback = annotations.get(ROLLBACK)
    if rollback is not None and rollback != record.get(ROLLBACK) and _unhandled(memory, ROLLBACK, rollback):
        if rollback == ROLLBACK_VALUE:
            requests.append(Request(ROLLBACK, rollback, "update", "rollback", target, {}, _update_id(obj, ROLLBACK)))
        else:
            requests.append(
                Request(
                    ROLLBACK, rollback, "refuse", "rollback", target,
                    refusal=f'{ROLLBACK}="{rollback}" is not a request: set it to "true" to roll the canary back',
                )
            )
    one_shot: list[tuple[str, str, dict[str, Any]]] = []
    for key, field_name in ((PROMOTE, "revision"), (RESUME, "revision"), (REPIN, "digest")):
        if key in annotations:
            one_shot.append((key, rule_of(key).message, {field_name: annotations[key]}))
    for key, message, payload in one_shot:
        if _unhandled(memory, key, annotations[key]):
            requests.append(Request(key, annotations[key], "update", message, target, payload, _update_id(obj, key)))
    for key in sorted(annotations):
        if key.startswith(MIGRATION_REQUEST_PREFIX):
            value = annotations[key]
            if value != record.get(key) and _unhandled(memory, key, value):
                requests.append(_migration_request(obj, key, value))
    return requests


def _migration_request(obj: dict[str, Any], key: str, value: str) -> Request:
    uuid = key[len(MIGRATION_REQUEST_PREFIX):]
    target = identity(obj)
    try:
        parsed = json.loads(value)
    except ValueError as error:
        parsed, problem = None, f"is not JSON ({error})"
    else:
        problem = "" if isinstance(parsed, dict) else f"must be a JSON object, got {type(parsed).__name__}"
    if problem or not isinstance(parsed, dict):
        return Request(key, value, "refuse", "migrate", target, refusal=f"migration request: {key} {problem}")
    return Request(key, value, "update", "migrate", target, {**parsed, "uuid": uuid}, _update_id(obj, key))


def replica_requests(obj: dict[str, Any], memory: Memory) -> list[Request]:
    """The messages an InferenceReplica's annotations ask for, to its InferenceService."""
    annotations = annotations_of(obj)
    labels = labels_of(obj)
    namespace, name = identity(obj)
    isvc, component = labels.get(LABEL_ISVC), labels.get(LABEL_COMPONENT)
    requests: list[Request] = []
    for key in REPLICA_ORDER:
        value = annotations.get(key)
        if value is None or not _unhandled(memory, key, value):
            continue
        rule = rule_of(key)
        if not isvc or not component:
            requests.append(
                Request(
                    key, value, "refuse", rule.message, (namespace, isvc or ""),
                    refusal=f"InferenceReplica {namespace}/{name} has no {LABEL_ISVC} and {LABEL_COMPONENT} labels: "
                    f"{key} cannot reach an InferenceService",
                )
            )
            continue
        field_name = "revision" if key == RELEASE_HELD else "instances"
        requests.append(Request(key, value, "signal", rule.message, (namespace, isvc), {"component": component, field_name: value}))
    return requests


# --- answers ---------------------------------------------------------------------------


def answered(memory: Memory, request: Request, answer: Answer) -> Memory:
    """The memory once `request` was answered (a transient failure is not an answer)."""
    handled = {**memory.handled, request.key: request.value}
    levels = dict(memory.levels)
    remove = dict(memory.remove)
    rule = rule_of(request.key)
    if answer is Answer.NO_WORKFLOW:
        # Nothing reached a workflow: neither recorded nor removed, so a restart tries again.
        return Memory(handled=handled, levels=levels, remove=remove)
    if rule.level:
        if request.key != PAUSED or request.value is None or request.value in PAUSE_VALUES:
            levels[request.key] = request.value
    elif answer is Answer.REFUSED and rule.record_refused and request.value is not None:
        levels[request.key] = request.value
    elif request.value is not None:
        remove[request.key] = request.value
    return Memory(handled=handled, levels=levels, remove=remove)


def no_workflow_message(request: Request, workflow_id: str) -> str:
    return (
        f"{request.key}: workflow {workflow_id} does not exist or is not running, so `{request.message}` "
        f"was not delivered; apply the InferenceService first"
    )


def refusal_event(answer: Answer, text: str) -> tuple[str, str] | None:
    """(reason, message) of the Warning Event an answer leaves on the object, if any."""
    if answer is Answer.ACCEPTED:
        return None
    return (ANNOTATION_REFUSED, text)


# --- the patch --------------------------------------------------------------------------


def cleanup_patch(obj: dict[str, Any], memory: Memory, *, keeps_record: bool = True) -> list[Op]:
    """One JSON patch removing the answered annotations and bringing the record up to date,
    each guarded by a `test` of the value it was decided on; [] when nothing is to change."""
    annotations = annotations_of(obj)
    ops: list[Op] = []
    for key, value in sorted(memory.remove.items()):
        if annotations.get(key) == value:
            path = annotation_path(key)
            ops += [{"op": "test", "path": path, "value": value}, {"op": "remove", "path": path}]
    if keeps_record:
        desired = desired_record(annotations, memory)
        current_text = annotations.get(RELAYED_ANNOTATION)
        path = annotation_path(RELAYED_ANNOTATION)
        if desired != read_record(annotations) or (current_text is not None and not desired):
            if current_text is not None:
                ops.append({"op": "test", "path": path, "value": current_text})
                ops.append({"op": "replace", "path": path, "value": format_record(desired)} if desired else {"op": "remove", "path": path})
            elif desired:
                if metadata_of(obj).get("annotations") is None:
                    ops.append({"op": "add", "path": "/metadata/annotations", "value": {RELAYED_ANNOTATION: format_record(desired)}})
                else:
                    ops.append({"op": "add", "path": path, "value": format_record(desired)})
    return [uid_guard(obj), *ops] if ops else []
