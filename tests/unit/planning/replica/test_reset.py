"""reset_instances requests and their events, verbatim from reference §12."""

from __future__ import annotations

import pytest

from models.instance import InstancePhase
from planning.replica.events import reset_events, reset_rejected
from planning.replica.facts import InstanceFacts
from planning.replica.reset import (
    ResetOutcome,
    ResetRequest,
    ResetRequestError,
    parse_reset_request,
    plan_reset,
    skip_reason,
)
from tests.unit.planning.replica.rows import creating, failed, ready, updating

pytestmark = pytest.mark.unit

SUBJECT = "InferenceReplica prod/chat-engine component=engine"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("all", ResetRequest(everything=True)),
        ("3", ResetRequest(everything=False, indexes=(3,))),
        ("0,2,5", ResetRequest(everything=False, indexes=(0, 2, 5))),
        ("0, 2", ResetRequest(everything=False, indexes=(0, 2))),
        ("2,2", ResetRequest(everything=False, indexes=(2,))),
    ],
)
def test_parse(value: str, expected: ResetRequest) -> None:
    assert parse_reset_request(value) == expected


@pytest.mark.parametrize(
    ("value", "token"),
    [("All", "All"), ("-1", "-1"), ("1,x", "x"), ("", ""), ("1,,2", ""), ("1.5", "1.5"), ("٣", "٣")],
)
def test_parse_rejects(value: str, token: str) -> None:
    with pytest.raises(ResetRequestError) as caught:
        parse_reset_request(value)
    assert caught.value.token == token
    assert caught.value.value == value


@pytest.mark.parametrize(
    ("name", "instance", "why"),
    [
        ("missing", None, "no such instance"),
        ("ready and serving", ready(0), "still serving"),
        ("updating", updating(0, serving=False), "owned by Update"),
        ("creating without serving", creating(0), "Phase=Creating"),
        ("failed with pods", failed(0), None),
        ("failed with preserved update", failed(0, operation="Update"), None),
        ("failed migrating source", failed(0, operation="Migrate"), "owned by Migrate"),
        ("failed being deleted", failed(0, operation="Delete"), "owned by Delete"),
        ("failed without pods or operation", failed(0, has_pods=False), "nothing to reset"),
        ("pending", InstanceFacts(index=0, phase=InstancePhase.PENDING, has_pods=False), "Phase=Pending"),
        ("failed but serving", failed(0, serving=True), "still serving"),
    ],
)
def test_skip_reasons(name: str, instance: InstanceFacts | None, why: str | None) -> None:
    assert skip_reason(instance) == why, name


def test_named_reset_mixes_reset_and_skipped() -> None:
    outcome = plan_reset(ResetRequest(False, (1, 0, 9)), [ready(0), failed(1)])
    assert outcome == ResetOutcome(reset=(1,), skipped=((0, "still serving"), (9, "no such instance")))


def test_all_resets_every_failed_instance() -> None:
    outcome = plan_reset(ResetRequest(True), [ready(0), failed(1), failed(3), failed(4, has_pods=False)])
    assert outcome.reset == (1, 3)
    assert outcome.skipped == ((4, "nothing to reset"),)


def test_all_with_none_failed() -> None:
    outcome = plan_reset(ResetRequest(True), [ready(0)])
    assert outcome.none_failed
    events = reset_events("prod", "chat-engine", "engine", outcome)
    assert [(e.type, e.reason, e.message) for e in events] == [
        ("Normal", "InstancesResetSkipped", f"{SUBJECT}: none is Failed; nothing to reset")
    ]


def test_reset_event_messages() -> None:
    outcome = ResetOutcome(reset=(1, 3), skipped=((0, "still serving"), (7, "no such instance")))
    events = reset_events("prod", "chat-engine", "engine", outcome)
    assert [(e.type, e.reason) for e in events] == [
        ("Normal", "InstancesReset"),
        ("Normal", "InstancesResetSkipped"),
    ]
    assert events[0].message == (
        f"{SUBJECT}: reset instance(s) 1,3 at operator request (ome.io/reset-instances annotation): "
        "pods deleted and preserved operation cleared; the lifecycle passes rebuild them"
    )
    assert (
        events[1].message
        == f"{SUBJECT}: reset skipped for instance(s) 0 (still serving), 7 (no such instance)"
    )


def test_rejected_event_message() -> None:
    try:
        parse_reset_request("1,x")
    except ResetRequestError as error:
        event = reset_rejected("prod", "chat-engine", "engine", error)
    assert (event.type, event.reason) == ("Warning", "InstancesResetRejected")
    assert event.message == (
        f'{SUBJECT}: ome.io/reset-instances="1,x" rejected: "x" is not a non-negative instance index; nothing reset'
    )
