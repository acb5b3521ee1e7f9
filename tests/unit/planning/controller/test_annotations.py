"""planning.controller.annotations: every row of the contract's annotation table, what stays,
what is removed and recorded, refusals, and never sending one request twice."""

from __future__ import annotations

import json
from typing import Any

import pytest

from planning.controller.annotations import (
    ANNOTATION_REFUSED,
    Answer,
    Memory,
    Request,
    answered,
    cleanup_patch,
    isvc_requests,
    no_workflow_message,
    observe,
    refusal_event,
    replica_requests,
)
from planning.service.relay import LAST_APPLIED, RELAYED_ANNOTATION

PAUSED = "ome.io/rollout-paused"
PROMOTE = "ome.io/rollout-promote"
ROLLBACK = "ome.io/rollout-rollback"
RESUME = "ome.io/rollout-resume"
REPIN = "ome.io/rollout-repin"
MIGRATION = "ome.io/migration-request-v1-0f0e"
REQUEST_JSON = json.dumps({"component": "engine", "instance": 1, "from_node": "gpu-node-2"})


def isvc(annotations: dict[str, str] | None = None, record: dict[str, str] | None = None) -> dict[str, Any]:
    shown = dict(annotations or {})
    if record is not None:
        shown[RELAYED_ANNOTATION] = json.dumps(record)
    metadata: dict[str, Any] = {"name": "chat", "namespace": "prod", "uid": "u-1", "resourceVersion": "42"}
    if shown:
        metadata["annotations"] = shown
    return {"apiVersion": "ome.io/v1beta1", "kind": "InferenceService", "metadata": metadata, "spec": {}}


def replica(annotations: dict[str, str], labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "kind": "InferenceReplica",
        "metadata": {
            "name": "chat-engine",
            "namespace": "prod",
            "uid": "r-1",
            "labels": {"ome.io/inferenceservice": "chat", "ome.io/component": "engine"} if labels is None else labels,
            "annotations": annotations,
        },
    }


def shown(requests: list[Request]) -> list[tuple[str, str, Any]]:
    return [(r.kind, r.message, r.payload if r.kind != "refuse" else r.refusal) for r in requests]


# --- which requests an object asks for -------------------------------------------------

ISVC_CASES: list[tuple[str, dict[str, str], dict[str, str] | None, list[tuple[str, str, Any]]]] = [
    ("paused added", {PAUSED: "true"}, None, [("signal", "pause", {"mode": "true"})]),
    ("paused freeze over a recorded true", {PAUSED: "freeze"}, {PAUSED: "true"}, [("signal", "pause", {"mode": "freeze"})]),
    ("paused as recorded: nothing", {PAUSED: "true"}, {PAUSED: "true"}, []),
    ("paused removed, recorded: resume", {}, {PAUSED: "true"}, [("signal", "resume", None)]),
    ("paused never recorded, absent: nothing", {"other": "x"}, None, []),
    ("promote", {PROMOTE: "abc123"}, None, [("update", "promote", {"revision": "abc123"})]),
    ("rollback true", {ROLLBACK: "true"}, None, [("update", "rollback", {})]),
    ("rollback recorded: nothing", {ROLLBACK: "true"}, {ROLLBACK: "true"}, []),
    (
        "rollback other than true is refused here",
        {ROLLBACK: "yes"},
        None,
        [("refuse", "rollback", 'ome.io/rollout-rollback="yes" is not a request: set it to "true" to roll the canary back')],
    ),
    ("resume engine=hash is a retry", {RESUME: "engine=abc"}, None, [("update", "retry", {"revision": "engine=abc"})]),
    ("resume hash is a retry", {RESUME: "abc"}, None, [("update", "retry", {"revision": "abc"})]),
    ("repin digest", {REPIN: "rp1:0123456789ab"}, None, [("update", "repin", {"digest": "rp1:0123456789ab"})]),
    ("repin now", {REPIN: "now"}, None, [("update", "repin", {"digest": "now"})]),
    (
        "migration request",
        {MIGRATION: REQUEST_JSON},
        None,
        [("update", "migrate", {"component": "engine", "instance": 1, "from_node": "gpu-node-2", "uuid": "0f0e"})],
    ),
    ("refused migration recorded: nothing", {MIGRATION: REQUEST_JSON}, {MIGRATION: REQUEST_JSON}, []),
    (
        "migration request that is not JSON",
        {MIGRATION: "{oops"},
        None,
        [("refuse", "migrate", f"migration request: {MIGRATION} is not JSON (Expecting property name enclosed in double quotes: line 1 column 2 (char 1))")],
    ),
    (
        "migration request that is not an object",
        {MIGRATION: "[1]"},
        None,
        [("refuse", "migrate", f"migration request: {MIGRATION} must be a JSON object, got list")],
    ),
    ("traffic-drain is spec, not a request", {"ome.io/traffic-drain": "true", "ome.io/global-host": "a.example"}, None, []),
    ("last-applied is kubectl's", {LAST_APPLIED: "{}"}, None, []),
    (
        "several at once, in order",
        {PROMOTE: "p", PAUSED: "true", REPIN: "now"},
        None,
        [("signal", "pause", {"mode": "true"}), ("update", "promote", {"revision": "p"}), ("update", "repin", {"digest": "now"})],
    ),
]


@pytest.mark.parametrize("case, annotations, record, expected", ISVC_CASES, ids=[c[0] for c in ISVC_CASES])
def test_isvc_requests(case: str, annotations: dict[str, str], record: dict[str, str] | None, expected: list[Any]) -> None:
    assert shown(isvc_requests(isvc(annotations, record), Memory())) == expected


def test_requests_go_to_the_objects_workflow_with_an_update_id_per_object_version() -> None:
    [request] = isvc_requests(isvc({PROMOTE: "abc"}), Memory())
    assert request.target == ("prod", "chat")
    assert request.update_id == f"kube/u-1/{PROMOTE}/42"
    [pause] = isvc_requests(isvc({PAUSED: "true"}), Memory())
    assert pause.update_id == ""  # a signal


REPLICA_CASES: list[tuple[str, dict[str, str], dict[str, str] | None, list[tuple[str, str, Any]]]] = [
    (
        "release held",
        {"ome.io/release-held-revision": "chat-engine-abc"},
        None,
        [("signal", "release_held", {"component": "engine", "revision": "chat-engine-abc"})],
    ),
    ("reset instances", {"ome.io/reset-instances": "0,2"}, None, [("signal", "reset_instances", {"component": "engine", "instances": "0,2"})]),
    (
        "without the owner labels",
        {"ome.io/reset-instances": "all"},
        {},
        [("refuse", "reset_instances", "InferenceReplica prod/chat-engine has no ome.io/inferenceservice and "
          "ome.io/component labels: ome.io/reset-instances cannot reach an InferenceService")],
    ),
    ("other annotations", {"note": "x"}, None, []),
]


@pytest.mark.parametrize("case, annotations, labels, expected", REPLICA_CASES, ids=[c[0] for c in REPLICA_CASES])
def test_replica_requests(case: str, annotations: dict[str, str], labels: dict[str, str] | None, expected: list[Any]) -> None:
    requests = replica_requests(replica(annotations, labels), Memory())
    assert shown(requests) == expected
    assert all(r.target == ("prod", "chat") for r in requests if r.kind != "refuse")


# --- answers, the record and removal ---------------------------------------------------


def answer_all(obj: dict[str, Any], answer: Answer, memory: Memory | None = None) -> Memory:
    memory = observe(memory or Memory(), obj["metadata"].get("annotations") or {})
    for request in isvc_requests(obj, memory):
        memory = answered(memory, request, answer)
    return memory


def test_a_relayed_pause_stays_and_is_recorded_in_one_guarded_patch() -> None:
    obj = isvc({PAUSED: "true"})
    memory = answer_all(obj, Answer.ACCEPTED)
    assert isvc_requests(obj, memory) == []  # never twice in a process
    assert cleanup_patch(obj, memory) == [
        {"op": "test", "path": "/metadata/uid", "value": "u-1"},
        {"op": "add", "path": "/metadata/annotations/ome.io~1relayed-annotations", "value": '{"ome.io/rollout-paused":"true"}'},
    ]


def test_a_relayed_resume_drops_the_pause_from_the_record() -> None:
    obj = isvc({"keep": "x"}, record={PAUSED: "true", ROLLBACK: "true"})
    memory = answer_all(obj, Answer.ACCEPTED)
    record_text = json.dumps({PAUSED: "true", ROLLBACK: "true"})
    assert cleanup_patch(obj, memory) == [
        {"op": "test", "path": "/metadata/uid", "value": "u-1"},
        {"op": "test", "path": "/metadata/annotations/ome.io~1relayed-annotations", "value": record_text},
        {"op": "remove", "path": "/metadata/annotations/ome.io~1relayed-annotations"},
    ]


def test_a_pause_added_again_after_its_resume_is_relayed_again() -> None:
    memory = answer_all(isvc({PAUSED: "true"}), Answer.ACCEPTED)
    memory = answer_all(isvc({}, record={PAUSED: "true"}), Answer.ACCEPTED, memory)
    assert memory.handled[PAUSED] is None
    assert shown(isvc_requests(isvc({PAUSED: "true"}, record={}), observe(memory, {PAUSED: "true"}))) == [
        ("signal", "pause", {"mode": "true"})
    ]


def test_a_pause_value_the_workflow_refuses_is_signalled_but_never_recorded() -> None:
    """`ome.io/rollout-paused=yes` paused nothing (the workflow's PauseRefused Event says so):
    removing it must not lift a pause set with the `temporal` CLI."""
    obj = isvc({PAUSED: "yes"})
    assert shown(isvc_requests(obj, observe(Memory(), {PAUSED: "yes"}))) == [("signal", "pause", {"mode": "yes"})]
    memory = answer_all(obj, Answer.ACCEPTED)
    assert isvc_requests(obj, memory) == []  # not resent in the process
    assert cleanup_patch(obj, memory) == []
    assert isvc_requests(isvc({}), observe(memory, {})) == []  # removed: no `resume`


def test_a_refused_pause_value_over_a_relayed_pause_keeps_the_record() -> None:
    obj = isvc({PAUSED: "yes"}, record={PAUSED: "true"})
    memory = answer_all(obj, Answer.ACCEPTED)
    assert cleanup_patch(obj, memory) == []
    removed = isvc({}, record={PAUSED: "true"})
    assert shown(isvc_requests(removed, observe(memory, {}))) == [("signal", "resume", None)]


@pytest.mark.parametrize("answer", [Answer.ACCEPTED, Answer.REFUSED])
@pytest.mark.parametrize("key, value", [(PROMOTE, "abc"), (RESUME, "engine=abc"), (REPIN, "now")])
def test_one_shot_annotations_are_removed_after_the_answer(key: str, value: str, answer: Answer) -> None:
    obj = isvc({key: value})
    memory = answer_all(obj, answer)
    path = "/metadata/annotations/" + key.replace("/", "~1")
    assert cleanup_patch(obj, memory) == [
        {"op": "test", "path": "/metadata/uid", "value": "u-1"},
        {"op": "test", "path": path, "value": value},
        {"op": "remove", "path": path},
    ]
    assert isvc_requests(obj, memory) == []


def test_a_one_shot_annotation_set_again_after_its_removal_is_a_new_request() -> None:
    memory = answer_all(isvc({REPIN: "now"}), Answer.ACCEPTED)
    memory = observe(memory, {})  # the removal was seen
    again = isvc({REPIN: "now"})
    assert shown(isvc_requests(again, observe(memory, {REPIN: "now"}))) == [("update", "repin", {"digest": "now"})]


def test_a_value_changed_before_the_patch_is_neither_removed_nor_resent_as_the_old_one() -> None:
    memory = answer_all(isvc({PROMOTE: "abc"}), Answer.ACCEPTED)
    changed = isvc({PROMOTE: "def"})
    memory = observe(memory, {PROMOTE: "def"})
    assert cleanup_patch(changed, memory) == []
    assert shown(isvc_requests(changed, memory)) == [("update", "promote", {"revision": "def"})]


def test_rollback_stays_and_is_recorded_accepted_or_refused() -> None:
    for answer in (Answer.ACCEPTED, Answer.REFUSED):
        obj = isvc({ROLLBACK: "true"})
        ops = cleanup_patch(obj, answer_all(obj, answer))
        assert ops[-1] == {
            "op": "add",
            "path": "/metadata/annotations/ome.io~1relayed-annotations",
            "value": '{"ome.io/rollout-rollback":"true"}',
        }
        assert all(op["op"] != "remove" for op in ops)


def test_a_removed_rollback_leaves_the_record_and_a_new_one_is_sent_again() -> None:
    memory = answer_all(isvc({ROLLBACK: "true"}), Answer.ACCEPTED)
    removed = isvc({}, record={ROLLBACK: "true"})
    memory = observe(memory, removed["metadata"]["annotations"])
    assert isvc_requests(removed, memory) == []
    assert cleanup_patch(removed, memory)[-1] == {"op": "remove", "path": "/metadata/annotations/ome.io~1relayed-annotations"}
    again = isvc({ROLLBACK: "true"})
    assert shown(isvc_requests(again, observe(memory, {ROLLBACK: "true"}))) == [("update", "rollback", {})]


def test_an_accepted_migration_is_removed_and_a_refused_one_stays_recorded() -> None:
    obj = isvc({MIGRATION: REQUEST_JSON})
    accepted = cleanup_patch(obj, answer_all(obj, Answer.ACCEPTED))
    assert accepted[-1] == {"op": "remove", "path": "/metadata/annotations/ome.io~1migration-request-v1-0f0e"}
    refused = cleanup_patch(obj, answer_all(obj, Answer.REFUSED))
    assert refused[-1]["path"] == "/metadata/annotations/ome.io~1relayed-annotations"
    assert json.loads(refused[-1]["value"]) == {MIGRATION: REQUEST_JSON}
    assert all(op["op"] != "remove" for op in refused)


def test_no_workflow_is_neither_recorded_nor_removed_nor_resent_in_the_process() -> None:
    obj = isvc({PAUSED: "true", PROMOTE: "abc"})
    memory = answer_all(obj, Answer.NO_WORKFLOW)
    assert cleanup_patch(obj, memory) == []
    assert isvc_requests(obj, memory) == []
    # A restart (empty memory) tries again.
    assert len(isvc_requests(obj, Memory())) == 2


def test_refusals_become_warning_events_with_the_refusal_text() -> None:
    assert refusal_event(Answer.ACCEPTED, "") is None
    assert refusal_event(Answer.REFUSED, "action refused: no applicable active rollout") == (
        ANNOTATION_REFUSED,
        "action refused: no applicable active rollout",
    )
    [request] = isvc_requests(isvc({PAUSED: "true"}), Memory())
    message = no_workflow_message(request, "isvc/prod/chat")
    assert refusal_event(Answer.NO_WORKFLOW, message) == (ANNOTATION_REFUSED, message)
    assert "isvc/prod/chat does not exist" in message


def test_replica_annotations_are_removed_once_answered_and_no_record_is_kept() -> None:
    obj = replica({"ome.io/release-held-revision": "rev", "ome.io/reset-instances": "all"})
    memory = Memory()
    for request in replica_requests(obj, memory):
        memory = answered(memory, request, Answer.ACCEPTED)
    ops = cleanup_patch(obj, memory, keeps_record=False)
    assert [op["op"] for op in ops] == ["test", "test", "remove", "test", "remove"]
    assert all("relayed-annotations" not in op["path"] for op in ops)
    assert replica_requests(obj, memory) == []


def test_a_hand_edited_record_that_is_not_json_reads_as_empty() -> None:
    obj = isvc({PAUSED: "true", RELAYED_ANNOTATION: "not json"})
    assert shown(isvc_requests(obj, Memory())) == [("signal", "pause", {"mode": "true"})]
