"""InferenceReplica teardown (§15): the finalizer's release, the deadline, and their texts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from planning.replica import events
from planning.replica.teardown import (
    DEFAULT_DRAIN_WINDOW,
    DEFAULT_RECHECK,
    TeardownClock,
    TeardownOutcome,
    deadline_invalid,
    decide_teardown,
    drain_window,
    recheck_interval,
)

T0 = datetime(2025, 1, 1, tzinfo=UTC)
RECHECK = timedelta(seconds=5)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def clock(deadline: float | None = 1800.0, blocked_at: float | None = None) -> TeardownClock:
    return TeardownClock(at(0), deadline, RECHECK, at(blocked_at) if blocked_at is not None else None)


def window(seconds: float) -> TeardownClock:
    return TeardownClock(at(0), None, RECHECK, drain_window=timedelta(seconds=seconds))


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
        ("no deadline, first interval: not blocked yet", clock(None), 0, 1, 0, 4, Out.WAIT, 5),
        ("no deadline, only pods left past an interval: blocked", clock(None), 0, 1, 0, 5, Out.BLOCKED, 65),
        ("blocked repeats at most once a minute", clock(None, blocked_at=5), 0, 1, 0, 8, Out.WAIT, 65),
        ("not again at the next re-check interval", clock(None, blocked_at=5), 0, 1, 2, 10, Out.WAIT, 65),
        ("blocked again after a minute", clock(None, blocked_at=5), 0, 1, 2, 65, Out.BLOCKED, 125),
        ("invalid deadline behaves as none", clock(0.0), 0, 1, 0, 99999, Out.BLOCKED, 100059),
        ("no deadline, all gone", clock(None), 0, 0, 0, 99999, Out.RELEASE, None),
        # A graceful drain in progress is not blocked: not before the drain window has passed.
        ("no deadline, Instances draining: not blocked", clock(None), 2, 2, 0, 5, Out.WAIT, 1800),
        ("no deadline, Instances draining, not listed", clock(None), 2, None, 0, 600, Out.WAIT, 1800),
        ("no deadline, Instances still draining past the window", clock(None), 2, 2, 0, 1800, Out.BLOCKED, 1860),
        ("the drain window is the Instances' drain deadline", window(60), 1, 1, 0, 60, Out.BLOCKED, 120),
        ("once said while draining, a minute apart", clock(None, blocked_at=1800), 1, 1, 0, 1830, Out.WAIT, 1860),
        ("no deadline, Instances gone, pods left at once", clock(None), 0, 1, 0, 600, Out.BLOCKED, 660),
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
        (clock(None), 0, 5, True),  # no deadline, only pods left: blocked?
        (clock(None), 2, 5, False),  # no deadline, Instances draining within the drain window
        (clock(None), 2, 1800, True),  # ... past it: blocked?
        (clock(None, blocked_at=1800), 2, 1830, False),  # said less than a minute ago
        (clock(None, blocked_at=1800), 2, 1860, True),
    ],
)
def test_needs_look(teardown: TeardownClock, instances: int, now: float, look: bool) -> None:
    assert teardown.needs_look(instances, at(now)) is look


def test_recheck_interval_and_invalid_deadline() -> None:
    assert recheck_interval(5.0) == timedelta(seconds=5)
    assert recheck_interval(None) == DEFAULT_RECHECK
    assert drain_window(600.0) == timedelta(minutes=10)
    assert drain_window(None) == drain_window(0.0) == DEFAULT_DRAIN_WINDOW
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
