"""Routing capacity polling (spec reference §18): a home's capacity ceiling from the reports
its endpoint serves, `{"servable": <int >= 0>, "observedAt": <RFC 3339>}`.

- The ceiling is the quorum-th lowest of the last `samples` accepted readings; the home's
  `allocated` = min(admitted, ceiling), with source `Endpoint` only when the ceiling lowered it.
- A reading older than `maxAge`, or stamped in the future, does not count. A failed poll
  clears the readings: there is no ceiling until `quorum` consecutive successes (fail-open to
  the admitted count), and `fallbackReason` says why, in §18's words.
- A ceiling of 0 removes all the home's traffic (even under `PreserveTraffic`).

`observe` folds one poll's outcome into a home's `Readings`; `ceiling` decides from them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Literal

from models.duration import format_duration


@dataclass(frozen=True)
class CapacityPolicy:
    samples: int
    quorum: int
    period_seconds: float
    timeout_seconds: float
    max_age_seconds: float

    def problems(self) -> list[str]:
        """What makes this policy invalid, in §18's words (empty: valid)."""
        found: list[str] = []
        if self.samples < 1:
            found.append(f"spec.routing.capacity.samples ({self.samples}) must be at least 1")
        if not 1 <= self.quorum <= max(1, self.samples):
            found.append(f"spec.routing.capacity.quorum ({self.quorum}) must be between 1 and samples ({self.samples})")
        if self.timeout_seconds >= self.period_seconds:
            found.append(
                f"spec.routing.capacity.timeout ({format_duration(self.timeout_seconds)}) must be shorter than "
                f"spec.routing.capacity.period ({format_duration(self.period_seconds)})"
            )
        if self.max_age_seconds < self.quorum * self.period_seconds:
            found.append(
                f"spec.routing.capacity.maxAge ({format_duration(self.max_age_seconds)}) must span at least "
                f"quorum ({self.quorum}) period intervals"
            )
        return found


@dataclass(frozen=True)
class Reading:
    servable: int
    observed_at: datetime


@dataclass(frozen=True)
class Readings:
    """A home's accepted readings, newest last, and why the last poll gave none (if it did not)."""

    accepted: tuple[Reading, ...] = ()
    failure: str | None = None
    """The last poll's failure text (a §18 `fallbackReason` prefix and detail); None: it succeeded."""
    polled: bool = False


PollOutcome = Reading | str
"""A report, or the failure text (`capacity endpoint unreachable: ...`, `capacity endpoint
returned HTTP 503`, `capacity response is not a valid report: ...`, ...)."""


def observe(readings: Readings, outcome: PollOutcome, policy: CapacityPolicy) -> Readings:
    """Fold one poll into the readings: a failure clears them (no ceiling until a new quorum)."""
    if isinstance(outcome, str):
        return Readings(accepted=(), failure=outcome, polled=True)
    if outcome.servable < 0:
        return Readings(accepted=(), failure=f"capacity report is negative ({outcome.servable})", polled=True)
    kept = (*readings.accepted, outcome)[-policy.samples :]
    return replace(readings, accepted=kept, failure=None, polled=True)


@dataclass(frozen=True)
class Ceiling:
    value: int | None
    """The ceiling; None: none (fail-open to the admitted count)."""
    fallback_reason: str | None = None
    """Why the home uses control-plane capacity; None when the ceiling is in force."""


def ceiling(readings: Readings, policy: CapacityPolicy, now: datetime) -> Ceiling:
    """The home's capacity ceiling now, or why it has none."""
    if not readings.polled:
        return Ceiling(None, "no capacity report yet")
    if readings.failure is not None:
        return Ceiling(None, readings.failure)
    max_age = timedelta(seconds=policy.max_age_seconds)
    future = [r for r in readings.accepted if r.observed_at > now]
    fresh = [r for r in readings.accepted if r.observed_at <= now and now - r.observed_at < max_age]
    if future and readings.accepted and readings.accepted[-1] in future:
        return Ceiling(None, "capacity report timestamp is in the future")
    if len(fresh) >= policy.quorum:
        lowest = sorted(r.servable for r in fresh)
        return Ceiling(lowest[policy.quorum - 1])
    stale = len(readings.accepted) - len(fresh) - len(future)
    if stale and not fresh:
        return Ceiling(None, f"capacity report is stale (at least configured maximum age {format_duration(policy.max_age_seconds)})")
    if stale:
        return Ceiling(
            None,
            f"capacity report awaiting quorum after stale samples expired ({len(fresh)}/{policy.quorum} accepted samples)",
        )
    return Ceiling(None, f"capacity report awaiting quorum ({len(fresh)}/{policy.quorum} accepted samples)")


@dataclass(frozen=True)
class Allocation:
    allocated: int
    source: Literal["ControlPlane", "Endpoint"]
    reported: int | None = None
    fallback_reason: str | None = None


def allocate(admitted: int, found: Ceiling) -> Allocation:
    """`allocated` = min(admitted, ceiling); `Endpoint` only when the ceiling lowered it."""
    if found.value is None:
        return Allocation(admitted, "ControlPlane", None, found.fallback_reason)
    if found.value < admitted:
        return Allocation(found.value, "Endpoint", found.value)
    return Allocation(admitted, "ControlPlane", found.value)


def fallback_condition(reasons: Sequence[str | None]) -> tuple[Literal["True", "False"], str, str]:
    """`CapacityFallback` (status, reason, message) over the homes' fallback reasons."""
    total = len(reasons)
    falling = sum(1 for reason in reasons if reason is not None)
    if total == 0:
        return "False", "NoCapacityTargets", "no home has a capacity endpoint to poll"
    if falling == 0:
        return "False", "EndpointCapacityAvailable", f"endpoint capacity is available for all {total} home(s)"
    return (
        "True",
        "EndpointCapacityUnavailable",
        f"{falling} of {total} home(s) are using control-plane capacity; inspect spec.entries[].capacity.fallbackReason",
    )

