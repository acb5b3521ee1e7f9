"""The canary's ready timeout and the deadlines it sets (spec reference §1.6, §2.5).

Precedence, first set wins: (1) the InferenceService annotation `ome.io/rollout-ready-timeout`
(a duration; 0 or less is ignored; admission rejects a non-duration, so one that slips
through is ignored too); (2) `canary.readyTimeout`; (3) the operator's default (the worker
configuration; the chart sets `15m`, kustomize none); none set: no timeout at all.

- A capacity wait times out `timeout` after `capacityWaitSince` (set when the wait starts,
  cleared when the capacity is met; every dip starts a fresh budget).
- An analysis gate stalls `timeout` after its last conclusive sample, else after
  `stepEnteredTime`. While the capacity is short only the capacity timeout runs: sampling
  waits for the capacity, so its silence is not the analysis' stall.
- Global pause does not stop these clocks; an expiry during a pause acts on resume (§5).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta

from models.duration import parse_duration
from models.inferenceservice import GroupCanary
from planning.rollout.canary.state import CanaryState

READY_TIMEOUT_ANNOTATION = "ome.io/rollout-ready-timeout"
CHART_DEFAULT_READY_TIMEOUT = "15m"
"""`ome.controller.rollout.defaultReadyTimeout` in the chart: what the worker configuration uses."""


def _positive(value: str | float | None) -> float | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            seconds = parse_duration(value)
        except ValueError:
            return None
    else:
        seconds = float(value)
    return seconds if seconds > 0 else None


def ready_timeout(
    annotations: Mapping[str, str] | None, canary: GroupCanary, operator_default: str | float | None
) -> float | None:
    """Seconds, or None for no timeout; `operator_default` is a duration or seconds."""
    for candidate in (
        (annotations or {}).get(READY_TIMEOUT_ANNOTATION),
        canary.ready_timeout,
        operator_default,
    ):
        seconds = _positive(candidate)
        if seconds is not None:
            return seconds
    return None


def capacity_deadline(state: CanaryState, timeout: float | None) -> datetime | None:
    if timeout is None or state.capacity_wait_since is None:
        return None
    return state.capacity_wait_since + timedelta(seconds=timeout)


def stall_anchor(state: CanaryState) -> datetime | None:
    """The last conclusive sample of this step, else when the step was entered."""
    entered = state.step_entered_time
    conclusive = state.last_conclusive_evaluation_time
    if entered is None:
        return None
    return conclusive if conclusive is not None and conclusive >= entered else entered


def stall_deadline(state: CanaryState, timeout: float | None) -> datetime | None:
    anchor = stall_anchor(state)
    return None if timeout is None or anchor is None else anchor + timedelta(seconds=timeout)
