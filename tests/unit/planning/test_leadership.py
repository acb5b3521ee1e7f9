"""Table tests of the Lease election rules (`planning.leadership`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from planning.leadership import (
    LeaseRecord,
    already_delivered,
    claimed,
    expires_at,
    held_keys,
    held_text,
    may_take,
    released,
    still_leading,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
HELD_BY_B = LeaseRecord("b", 10, T0, T0, 3)


@pytest.mark.parametrize(
    ("case", "record", "observed_at", "now", "expected"),
    [
        ("no lease yet", None, 0.0, 0.0, True),
        ("released by a graceful stop", LeaseRecord("", 1, T0, T0, 3), 100.0, 100.0, True),
        ("ours to renew, even late", LeaseRecord("a", 10, T0, T0, 0), 0.0, 99.0, True),
        ("another's, just seen", HELD_BY_B, 50.0, 50.0, False),
        ("another's, one second before expiry", HELD_BY_B, 50.0, 59.0, False),
        ("another's, exactly at expiry", HELD_BY_B, 50.0, 60.0, True),
        ("another's, long unrenewed", HELD_BY_B, 50.0, 75.0, True),
        ("short lease", LeaseRecord("b", 2, T0, T0, 0), 0.0, 2.5, True),
    ],
)
def test_may_take(case: str, record: LeaseRecord | None, observed_at: float, now: float, expected: bool) -> None:
    assert may_take("a", record, observed_at, now) is expected, case


def test_expiry_counts_from_when_this_process_saw_the_record_not_its_renew_time() -> None:
    # renewTime says an hour ago (the holder's clock is off): it is still ours to respect.
    stale_clock = LeaseRecord("b", 10, T0 - timedelta(hours=1), T0 - timedelta(hours=1), 0)
    assert not may_take("a", stale_clock, observed_at=500.0, now=505.0)
    assert expires_at(stale_clock, 500.0) == 510.0


@pytest.mark.parametrize(
    ("case", "record", "holder", "acquire_time", "transitions"),
    [
        ("first ever", None, "a", T0 + timedelta(seconds=5), 0),
        ("renewal keeps acquireTime and transitions", LeaseRecord("a", 10, T0, T0, 4), "a", T0, 4),
        ("takeover counts a transition", HELD_BY_B, "a", T0 + timedelta(seconds=5), 4),
        ("after a release counts no transition", LeaseRecord("", 1, T0, T0, 4), "a", T0 + timedelta(seconds=5), 4),
    ],
)
def test_claimed(case: str, record: LeaseRecord | None, holder: str, acquire_time: datetime, transitions: int) -> None:
    now = T0 + timedelta(seconds=5)
    new = claimed("a", record, now, 10)
    assert (new.holder, new.acquire_time, new.renew_time, new.transitions, new.lease_seconds) == (
        holder, acquire_time, now, transitions, 10
    ), case


def test_released_frees_the_lease_for_the_next_try() -> None:
    record = released(LeaseRecord("a", 10, T0, T0, 2), T0)
    assert record.holder == "" and record.lease_seconds == 1 and record.transitions == 2
    assert may_take("b", record, observed_at=0.0, now=0.0)


@pytest.mark.parametrize(
    ("last_renewed_at", "now", "expected"),
    [(0.0, 0.0, True), (0.0, 6.9, True), (0.0, 7.0, False), (10.0, 30.0, False)],
)
def test_still_leading_within_the_renew_deadline(last_renewed_at: float, now: float, expected: bool) -> None:
    assert still_leading(last_renewed_at, now, renew_deadline_seconds=7.0) is expected


@pytest.mark.parametrize(
    ("case", "changed", "delivered", "expected"),
    [
        ("nothing changed since the mark", {"pods": "10", "nodes": "3"}, {"pods": "12", "nodes": "3", "endpointslices": "9"}, True),
        ("a pod changed after the mark", {"pods": "13"}, {"pods": "12"}, False),
        ("a node changed after the mark", {"pods": "5", "nodes": "20"}, {"pods": "12", "nodes": "19"}, False),
        ("exactly at the mark", {"pods": "12"}, {"pods": "12"}, True),
        ("no mark for a kind", {"endpointslices": "4"}, {"pods": "12"}, False),
        ("no mark at all (a first leader)", {"pods": "1"}, {}, False),
        ("versions that are not numbers", {"pods": "abc"}, {"pods": "abc"}, False),
        ("an Instance with no changes seen", {}, {}, True),
        ("compares numbers, not strings", {"pods": "9"}, {"pods": "10"}, True),
    ],
)
def test_already_delivered(case: str, changed: dict[str, str], delivered: dict[str, str], expected: bool) -> None:
    assert already_delivered(changed, delivered) is expected, case


A = ("ns", "chat", "engine")


@pytest.mark.parametrize(
    ("case", "held", "text"),
    [
        ("nothing held", set(), ""),
        ("one", {(*A, 7)}, "ns/chat/engine:7"),
        ("a run and a single", {(*A, 0), (*A, 1), (*A, 2), (*A, 3), (*A, 7)}, "ns/chat/engine:0-3,7"),
        ("two components, sorted", {(*A, 2), ("ns", "chat", "decoder", 0)}, "ns/chat/decoder:0;ns/chat/engine:2"),
        ("a fleet update of one service", {(*A, i) for i in range(5000)}, "ns/chat/engine:0-4999"),
    ],
)
def test_held_text_round_trips(case: str, held: set[tuple[str, str, str, int]], text: str) -> None:
    written, left_out = held_text(held)
    assert (written, left_out) == (text, set()), case
    assert held_keys(written) == held, case


def test_held_text_leaves_out_whole_components_past_its_limit() -> None:
    held = {("ns", f"svc-{n:02d}", "engine", 0) for n in range(10)}
    written, left_out = held_text(held, limit=60)
    listed = held_keys(written)
    assert listed | left_out == held and not listed & left_out
    assert len(written) <= 60 and len(listed) == 3, written


@pytest.mark.parametrize(
    "text",
    ["ns/chat:1", "ns/chat/engine:", "ns/chat/engine:x", "ns/chat/engine:5-2", "ns/chat/engine:-1", "ns/chat/engine:0-999999", ":1"],
)
def test_held_keys_refuses_text_it_did_not_write(text: str) -> None:
    with pytest.raises(ValueError):
        held_keys(text)
