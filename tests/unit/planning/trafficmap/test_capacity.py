"""§18 capacity polling as tables: the quorum-th lowest ceiling, staleness, fail-open, and
every fallbackReason the decision writes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from planning.trafficmap.capacity import (
    Allocation,
    CapacityPolicy,
    Ceiling,
    Reading,
    Readings,
    allocate,
    ceiling,
    fallback_condition,
    observe,
)

pytestmark = pytest.mark.unit

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
POLICY = CapacityPolicy(samples=3, quorum=2, period_seconds=10, timeout_seconds=5, max_age_seconds=30)


def at(seconds_ago: float, servable: int) -> Reading:
    return Reading(servable, NOW - timedelta(seconds=seconds_ago))


def fold(*outcomes: Reading | str) -> Readings:
    readings = Readings()
    for outcome in outcomes:
        readings = observe(readings, outcome, POLICY)
    return readings


@pytest.mark.parametrize(
    ("readings", "expected"),
    [
        pytest.param(Readings(), Ceiling(None, "no capacity report yet"), id="never polled"),
        pytest.param(fold(at(5, 4)), Ceiling(None, "capacity report awaiting quorum (1/2 accepted samples)"),
                     id="one sample of a quorum of two"),
        pytest.param(fold(at(20, 4), at(10, 2)), Ceiling(4), id="quorum-th lowest of two: 4"),
        pytest.param(fold(at(25, 1), at(15, 5), at(5, 3)), Ceiling(3), id="2nd lowest of 1, 5, 3: 3"),
        pytest.param(fold(at(35, 9), at(25, 1), at(15, 5), at(5, 3)), Ceiling(3),
                     id="only the last `samples` readings count"),
        pytest.param(fold(at(25, 4), at(15, 4), "capacity endpoint returned HTTP 503"),
                     Ceiling(None, "capacity endpoint returned HTTP 503"), id="a failed poll fails open"),
        pytest.param(fold(at(25, 4), "capacity endpoint unreachable: connection refused", at(5, 2)),
                     Ceiling(None, "capacity report awaiting quorum (1/2 accepted samples)"),
                     id="after a failure, a new quorum of successes"),
        pytest.param(fold(at(45, 4), at(35, 4)),
                     Ceiling(None, "capacity report is stale (at least configured maximum age 30s)"), id="stale"),
        pytest.param(fold(at(45, 4), at(5, 4)),
                     Ceiling(None, "capacity report awaiting quorum after stale samples expired (1/2 accepted samples)"),
                     id="one fresh beside a stale one"),
        pytest.param(fold(at(15, 4), at(-60, 4)), Ceiling(None, "capacity report timestamp is in the future"),
                     id="the newest stamped in the future"),
        pytest.param(fold(at(15, 4), Reading(-1, NOW)), Ceiling(None, "capacity report is negative (-1)"),
                     id="negative"),
        pytest.param(fold(at(15, 0), at(5, 0)), Ceiling(0), id="a ceiling of 0"),
    ],
)
def test_ceiling(readings: Readings, expected: Ceiling) -> None:
    assert ceiling(readings, POLICY, NOW) == expected


@pytest.mark.parametrize(
    ("admitted", "found", "expected"),
    [
        pytest.param(4, Ceiling(2), Allocation(2, "Endpoint", 2), id="the ceiling lowers it: Endpoint"),
        pytest.param(4, Ceiling(6), Allocation(4, "ControlPlane", 6), id="a higher ceiling leaves it"),
        pytest.param(4, Ceiling(0), Allocation(0, "Endpoint", 0), id="0 removes the home's traffic"),
        pytest.param(4, Ceiling(None, "no capacity report yet"),
                     Allocation(4, "ControlPlane", None, "no capacity report yet"), id="fail-open"),
    ],
)
def test_allocate(admitted: int, found: Ceiling, expected: Allocation) -> None:
    assert allocate(admitted, found) == expected


def test_fallback_condition_messages() -> None:
    assert fallback_condition([None, None]) == (
        "False", "EndpointCapacityAvailable", "endpoint capacity is available for all 2 home(s)"
    )
    assert fallback_condition([None, "no capacity report yet", "capacity endpoint returned HTTP 503"]) == (
        "True",
        "EndpointCapacityUnavailable",
        "2 of 3 home(s) are using control-plane capacity; inspect spec.entries[].capacity.fallbackReason",
    )
    assert fallback_condition([])[1] == "NoCapacityTargets"


def test_policy_problems_name_the_fields() -> None:
    assert POLICY.problems() == []
    assert CapacityPolicy(3, 3, 10, 10, 20).problems() == [
        "spec.routing.capacity.timeout (10s) must be shorter than spec.routing.capacity.period (10s)",
        "spec.routing.capacity.maxAge (20s) must span at least quorum (3) period intervals",
    ]
    assert CapacityPolicy(2, 3, 10, 5, 60).problems() == ["spec.routing.capacity.quorum (3) must be between 1 and samples (2)"]
