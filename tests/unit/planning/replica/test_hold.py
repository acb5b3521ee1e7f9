"""rolloutHold: `since` kept while gate and target are unchanged (reference §7)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from planning.replica.hold import (
    HoldDenial,
    HoldGate,
    RolloutHold,
    next_hold,
    surge_budget_reason,
    unavailability_budget_reason,
)
from tests.unit.planning.replica.rows import NEW, NOW, OLD

pytestmark = pytest.mark.unit

EARLIER = NOW - timedelta(minutes=7)
PREVIOUS = RolloutHold(
    HoldGate.BUDGET, "per-Component surge budget 1 exhausted (would become 2)", NEW, EARLIER
)


@pytest.mark.parametrize(
    ("name", "previous", "denial", "expected_since", "expected_reason"),
    [
        ("first denial starts now", None, HoldDenial(HoldGate.BUDGET, "r", NEW), NOW, "r"),
        ("same gate and target keeps since", PREVIOUS, HoldDenial(HoldGate.BUDGET, "r2", NEW), EARLIER, "r2"),
        ("gate change restarts since", PREVIOUS, HoldDenial(HoldGate.HELD, "h", NEW), NOW, "h"),
        ("target change restarts since", PREVIOUS, HoldDenial(HoldGate.BUDGET, "r", OLD), NOW, "r"),
    ],
)
def test_next_hold_since(
    name: str, previous: RolloutHold | None, denial: HoldDenial, expected_since: object, expected_reason: str
) -> None:
    hold = next_hold(previous, denial, NOW)
    assert hold is not None
    assert hold.since == expected_since, name
    assert hold.reason == expected_reason
    assert hold.gate == denial.gate and hold.target == denial.target


def test_no_denial_clears_the_hold() -> None:
    assert next_hold(PREVIOUS, None, NOW) is None


@pytest.mark.parametrize(
    ("budget", "would", "expected"),
    [
        (1, 2, "per-Component surge budget 1 exhausted (would become 2)"),
        (0, 1, "per-Component surge budget 0 exhausted (would become 1)"),
    ],
)
def test_surge_reason(budget: int, would: int, expected: str) -> None:
    assert surge_budget_reason(budget, would) == expected


def test_unavailability_reason() -> None:
    assert (
        unavailability_budget_reason(0, 1)
        == "per-Component unavailability budget 0 exhausted (would become 1)"
    )


def test_gate_names_are_the_spec_names() -> None:
    assert [gate.value for gate in HoldGate] == [
        "Plan",
        "Pairing",
        "Ratio",
        "Sequential",
        "Budget",
        "RetryBlock",
        "Held",
    ]
