"""readyTimeout precedence and the deadlines it sets (§1.6)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from planning.rollout.canary.timeouts import (
    READY_TIMEOUT_ANNOTATION,
    capacity_deadline,
    ready_timeout,
    stall_anchor,
)
from tests.unit.planning.rollout.canary.rows import MANUAL_THEN_FULL, at, canary_of, entered, fresh

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "annotation, field, default, expected",
    [
        ("5m", "10m", "15m", 300.0),
        ("0s", "10m", "15m", 600.0),
        ("-1m", "10m", "15m", 600.0),
        ("soon", "10m", "15m", 600.0),
        (None, "10m", "15m", 600.0),
        (None, None, "15m", 900.0),
        (None, None, 120.0, 120.0),
        (None, None, "0s", None),
        (None, None, None, None),
        ("30s", None, None, 30.0),
    ],
    ids=[
        "annotation wins",
        "annotation 0 ignored",
        "negative annotation ignored",
        "non-duration annotation ignored",
        "canary readyTimeout",
        "operator default",
        "operator default in seconds",
        "operator default 0 is none",
        "none set: no timeout",
        "annotation alone",
    ],
)
def test_ready_timeout_precedence(
    annotation: str | None, field: str | None, default: str | float | None, expected: float | None
) -> None:
    steps = [{"capacity": "100%", "traffic": 100}]
    canary = canary_of(*steps, **({"readyTimeout": field} if field else {}))
    annotations = {READY_TIMEOUT_ANNOTATION: annotation} if annotation is not None else {"other": "x"}
    assert ready_timeout(annotations, canary, default) == expected


def test_capacity_deadline_counts_from_capacity_wait_since() -> None:
    state = replace(fresh(at(0)), capacity_wait_since=at(100))
    assert capacity_deadline(state, 60.0) == at(160)
    assert capacity_deadline(state, None) is None
    assert capacity_deadline(replace(state, capacity_wait_since=None), 60.0) is None


@pytest.mark.parametrize(
    "conclusive, expected",
    [(None, 10), (50, 50), (5, 10)],
    ids=[
        "no conclusive sample: step entered",
        "last conclusive sample",
        "conclusive sample of an earlier step",
    ],
)
def test_stall_counts_from_the_last_conclusive_sample_else_step_entered(
    conclusive: float | None, expected: float
) -> None:
    state = entered(
        MANUAL_THEN_FULL,
        0,
        at(10),
        last_conclusive_evaluation_time=None if conclusive is None else at(conclusive),
    )
    assert stall_anchor(state) == at(expected)
