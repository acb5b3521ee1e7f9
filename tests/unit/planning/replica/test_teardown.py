"""InferenceReplica teardown (§15): the finalizer's release, the deadline, and their texts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from planning.replica import events
from planning.replica.teardown import (
    DEFAULT_RECHECK,
    TeardownClock,
    TeardownOutcome,
    deadline_invalid,
    decide_teardown,
    recheck_interval,
)

T0 = datetime(2025, 1, 1, tzinfo=UTC)
RECHECK = timedelta(seconds=5)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def clock(deadline: float | None = 1800.0, blocked_at: float | None = None) -> TeardownClock:
    return TeardownClock(at(0), deadline, RECHECK, at(blocked_at) if blocked_at is not None else None)


Out = TeardownOutcome


@pytest.mark.parametrize(
    ("name", "teardown", "instances", "pods", "groups", "now", "outcome", "wake"),
    [
        ("all gone: release", clock(), 0, 0, 0, 10, Out.RELEASE, None),
        ("a PodGroup left holds it", clock(), 0, 0, 1, 10, Out.WAIT, 15),
        ("pods left before the deadline", clock(), 0, 2, 0, 10, Out.WAIT, 15),
        ("Instances still draining, not listed", clock(), 2, None, 0, 10, Out.WAIT, 15),
        ("the wake never passes the deadline", clock(12.0), 1, None, 0, 10, Out.WAIT, 12),
        ("at the deadline: released anyway", clock(), 1, 1, 0, 1800, Out.EXCEEDED, None),
        ("past the deadline with no Instance", clock(), 0, 3, 0, 2000, Out.EXCEEDED, None),
        ("no deadline, first interval: not blocked yet", clock(None), 0, 1, 0, 4, Out.WAIT, 9),
        ("no deadline, past an interval: blocked", clock(None), 0, 1, 0, 5, Out.BLOCKED, 10),
        ("blocked repeats once per interval", clock(None, blocked_at=5), 0, 1, 0, 8, Out.WAIT, 13),
        ("blocked again after the interval", clock(None, blocked_at=5), 0, 1, 2, 10, Out.BLOCKED, 15),
        ("invalid deadline behaves as none", clock(0.0), 0, 1, 0, 99999, Out.BLOCKED, 100004),
        ("no deadline, all gone", clock(None), 0, 0, 0, 99999, Out.RELEASE, None),
    ],
)
def test_decide_teardown(
    name: str,
    teardown: TeardownClock,
    instances: int,
    pods: int | None,
    groups: int,
    now: float,
    outcome: TeardownOutcome,
    wake: float | None,
) -> None:
    step = decide_teardown(teardown, instances, pods, groups, at(now))
    assert step.outcome == outcome, name
    if outcome in (Out.WAIT, Out.BLOCKED):
        assert step.wake_at == at(wake if wake is not None else 0), name


@pytest.mark.parametrize(
    ("teardown", "instances", "now", "look"),
    [
        (clock(), 0, 1, True),  # every Instance reported its end: are the pods gone too?
        (clock(), 2, 1, False),  # Instances still draining: their reports will say
        (clock(), 2, 1800, True),  # the deadline: the event counts the pods
        (clock(None), 2, 5, True),  # no deadline, an interval passed: blocked?
        (clock(None, blocked_at=5), 2, 7, False),
    ],
)
def test_needs_look(teardown: TeardownClock, instances: int, now: float, look: bool) -> None:
    assert teardown.needs_look(instances, at(now)) is look


def test_recheck_interval_and_invalid_deadline() -> None:
    assert recheck_interval(5.0) == timedelta(seconds=5)
    assert recheck_interval(None) == DEFAULT_RECHECK
    assert deadline_invalid(0.0) and deadline_invalid(-1.0)
    assert not deadline_invalid(None) and not deadline_invalid(60.0)


ESCAPE = (
    "kubectl patch inferencereplica chat-engine -n ns --type=merge "
    """-p '{"metadata":{"finalizers":null}}'"""
)


def test_teardown_deadline_exceeded_is_verbatim() -> None:
    event = events.teardown_deadline_exceeded("ns", "chat-engine", "chat", "engine", "1h0m0s", 1)
    assert (event.type, event.reason) == ("Warning", "TeardownDeadlineExceeded")
    assert event.message == (
        'teardown deadline 1h0m0s exceeded (1 owned pod(s) observed; selector: parent="chat", component="engine"); '
        f"releasing finalizer ome.io/ir-teardown to background GC; manual escape: {ESCAPE}"
    )


@pytest.mark.parametrize(
    ("invalid", "why"),
    [
        (False, "no lifecycle.teardown.deadline configured"),
        (True, "lifecycle.teardown.deadline configured but invalid"),
    ],
)
def test_teardown_blocked_is_verbatim(invalid: bool, why: str) -> None:
    event = events.teardown_blocked("ns", "chat-engine", "chat", "engine", 2, 1, invalid)
    assert (event.type, event.reason) == ("Warning", "TeardownBlocked")
    assert event.message == (
        'teardown blocked: 2 owned pod(s) and 1 owned PodGroup(s) remain (selector: parent="chat", '
        'component="engine"); finalizer ome.io/ir-teardown holds until cleanup completes '
        f"({why}); manual escape: {ESCAPE}"
    )
