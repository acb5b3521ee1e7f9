"""`rolloutHold`: why a component's rollout is not moving right now (spec reference §7).

A hold is set on each fresh denial and cleared when an update is admitted or the rollout
completes. Its `since` stays put while the gate and the target revision are unchanged, so
a budget that keeps being exhausted by different Instances reads as one long wait, not a
series of new ones (a change in the reason text alone doesn't reset it).

Gates this module speaks for: `Budget`, `RetryBlock` and `Held` (the per-component ones);
`Plan`, `Pairing`, `Ratio` and `Sequential` come with rollout groups.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum


class HoldGate(StrEnum):
    PLAN = "Plan"
    PAIRING = "Pairing"
    RATIO = "Ratio"
    SEQUENTIAL = "Sequential"
    BUDGET = "Budget"
    RETRY_BLOCK = "RetryBlock"
    HELD = "Held"


@dataclass(frozen=True)
class RolloutHold:
    """`{gate, reason, target, since}` as status shows it."""

    gate: HoldGate
    reason: str
    target: str
    since: datetime


@dataclass(frozen=True)
class HoldDenial:
    """A fresh denial found by this pass: the hold it should become, minus `since`."""

    gate: HoldGate
    reason: str
    target: str


def next_hold(previous: RolloutHold | None, denial: HoldDenial | None, now: datetime) -> RolloutHold | None:
    """The hold after this pass: None when nothing was denied, else the denial with `since`.

    `since` carries over when the gate and target are the same as before.
    """
    if denial is None:
        return None
    if previous is not None and previous.gate == denial.gate and previous.target == denial.target:
        return replace(previous, reason=denial.reason)
    return RolloutHold(gate=denial.gate, reason=denial.reason, target=denial.target, since=now)


def surge_budget_reason(budget: int, would_become: int, explanation: str = "") -> str:
    """e.g. `per-Component surge budget 1 exhausted (would become 2)`."""
    reason = f"per-Component surge budget {budget} exhausted (would become {would_become})"
    return f"{reason}; {explanation}" if explanation else reason


def unavailability_budget_reason(budget: int, would_become: int) -> str:
    """e.g. `per-Component unavailability budget 0 exhausted (would become 1)`."""
    return f"per-Component unavailability budget {budget} exhausted (would become {would_become})"


def retry_backoff_reason(revision: str, attempts: int, next_retry_at: datetime | None, last: str) -> str:
    when = next_retry_at.strftime("%Y-%m-%dT%H:%M:%SZ") if next_retry_at is not None else "now"
    return (
        f"retryBlock for revision {revision} in Backoff after {attempts} failed attempt(s) "
        f"(last failure: {last}); next attempt at {when}"
    )


def retry_in_progress_reason(revision: str, attempt: int) -> str:
    return f"retryBlock for revision {revision}: attempt {attempt} in progress; other Instances wait for it"


def held_reason(revision: str, attempts: int, last: str) -> str:
    return (
        f"revision {revision} held after {attempts} failed attempt(s) (last failure: {last}); "
        "publish a corrected revision or send release_held"
    )
