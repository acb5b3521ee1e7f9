"""§17's weight order as tables: base, probe gates, smallest ratio, drains; and the capacity
factors page's examples."""

from __future__ import annotations

from fractions import Fraction

import pytest

from planning.trafficmap.weights import (
    MAX_WEIGHT,
    WeightInput,
    factor_of,
    servable,
    smallest_ratio,
    weights,
    zero_weight_reason,
)

pytestmark = pytest.mark.unit


def home(cluster: str, allocated: int, ready: int | None = None, factor: str | None = None, **extra: bool) -> WeightInput:
    return WeightInput(cluster, allocated, allocated if ready is None else ready, factor, **extra)


@pytest.mark.parametrize(
    ("entries", "policy", "expected"),
    [
        pytest.param([home("worker-a", 4), home("worker-b", 2, factor="3")], "Drain",
                     {"worker-a": 2, "worker-b": 3}, id="the page's example: 4x1 and 2x3 -> 2 and 3"),
        pytest.param([home("worker-a", 4), home("worker-b", 2)], "Drain",
                     {"worker-a": 2, "worker-b": 1}, id="without the factor: 2 and 1"),
        pytest.param([home("worker-a", 4, factor="2"), home("worker-b", 2, factor="6")], "Drain",
                     {"worker-a": 2, "worker-b": 3}, id="only the ratio of the factors matters"),
        pytest.param([home("a", 2, factor="1500m"), home("b", 3)], "Drain",
                     {"a": 1, "b": 1}, id="1500m is exactly 3/2: 3 and 3 -> 1 and 1"),
        pytest.param([home("a", 1, factor="500m"), home("b", 1)], "Drain",
                     {"a": 1, "b": 2}, id="a slower cluster's 0.5"),
        pytest.param([home("a", 4, ready=1), home("b", 2)], "Drain",
                     {"a": 1, "b": 2}, id="the lower of allocated and ready counts"),
        pytest.param([home("a", 4, gated=True), home("b", 2)], "Drain",
                     {"a": 0, "b": 1}, id="a probe-gated home goes to 0 before the ratio"),
        pytest.param([home("a", 4, gated=True), home("b", 2, gated=True)], "Drain",
                     {"a": 0, "b": 0}, id="every home gated under Drain: nothing"),
        pytest.param([home("a", 4, gated=True), home("b", 2, gated=True)], "PreserveTraffic",
                     {"a": 2, "b": 1}, id="every home gated under PreserveTraffic keeps its weight"),
        pytest.param([home("a", 4, gated=True), home("b", 2)], "PreserveTraffic",
                     {"a": 0, "b": 1}, id="PreserveTraffic only when all are gated"),
        pytest.param([home("a", 4), home("b", 2, factor="3", drained=True)], "Drain",
                     {"a": 2, "b": 0}, id="a drain zeroes after the ratio: the others keep theirs"),
        pytest.param([home("a", 0), home("b", 0)], "Drain", {"a": 0, "b": 0}, id="no capacity anywhere"),
        pytest.param([home("a", 6), home("b", 0)], "Drain", {"a": 1, "b": 0}, id="one home with capacity: 1"),
        pytest.param([], "Drain", {}, id="no homes"),
    ],
)
def test_weights(entries: list[WeightInput], policy: str, expected: dict[str, int]) -> None:
    assert weights(entries, policy) == expected  # type: ignore[arg-type]


def test_factors_are_exact_rationals_of_the_canonical_quantity() -> None:
    assert factor_of(None) == 1
    assert factor_of("1500m") == Fraction(3, 2)
    assert factor_of("1.5") == Fraction(3, 2)
    assert factor_of("333m") == Fraction(333, 1000)


def test_a_ratio_past_the_bound_is_scaled_down_keeping_every_home_with_capacity() -> None:
    reduced = smallest_ratio([Fraction(1), Fraction(3_000_000)])
    assert reduced == [1, MAX_WEIGHT]
    assert smallest_ratio([Fraction(2, 3), Fraction(1, 3)]) == [2, 1]


def test_prefill_decode_counts_the_lower_of_engine_and_decoder() -> None:
    assert servable((4, 3), (2, 2)) == (2, 2)
    assert servable((4, 3)) == (4, 3)
    allocated, ready = servable((4, 4), (1, 1))
    assert weights([home("a", allocated, ready), home("b", 2)]) == {"a": 1, "b": 2}


@pytest.mark.parametrize(
    ("entry", "healthy", "source", "reported", "reason"),
    [
        pytest.param(home("a", 0, drained=True), False, "Endpoint", 0, "Drained", id="drains first"),
        pytest.param(home("a", 2, ready=0), False, "ControlPlane", None, "NotReady", id="no ready, not healthy"),
        pytest.param(home("a", 0, ready=2), True, "Endpoint", 0, "NoReportedCapacity", id="endpoint reported 0"),
        pytest.param(home("a", 0, ready=2), True, "ControlPlane", None, "NotAdmitted", id="nothing admitted"),
        pytest.param(home("a", 2, gated=True), True, "ControlPlane", None, "ProbeGated", id="gated last"),
    ],
)
def test_zero_weight_diagnosis_order(
    entry: WeightInput, healthy: bool, source: str, reported: int | None, reason: str
) -> None:
    assert zero_weight_reason(entry, healthy, source, reported) == reason  # type: ignore[arg-type]
