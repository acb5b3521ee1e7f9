"""Routing health probes (spec reference §19): whether a home's probe gates its traffic.

An attempt is `Passing` (its status is in `acceptStatuses`), `Failing` (in `gateStatuses`, or a
DNS/connect/TLS error or a timeout) or `Unknown` (anything else, e.g. a 3xx: counters and gate
unchanged). A home is gated after `failureThreshold` consecutive Failing attempts and the gate
lifts after `successThreshold` consecutive Passing ones. With every home gated,
`allFailedPolicy` decides: `PreserveTraffic` keeps the weights as if unprobed (the homes stay
`healthy: false`), `Drain` zeroes them (§17 step 2).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

ProbeResult = Literal["Passing", "Failing", "Unknown"]
FORBIDDEN_GATE_STATUSES = frozenset({401, 403, 429})


@dataclass(frozen=True)
class ProbePolicy:
    accept_statuses: frozenset[int]
    gate_statuses: frozenset[int]
    failure_threshold: int
    success_threshold: int
    all_failed_policy: Literal["PreserveTraffic", "Drain"] = "Drain"

    def problems(self) -> list[str]:
        """What makes the probe settings invalid, in §19's words (empty: valid)."""
        found = [
            f"validate routing policy: spec.routing.probe status {status} is in both acceptStatuses and gateStatuses"
            for status in sorted(self.accept_statuses & self.gate_statuses)
        ]
        found += [
            f"validate routing policy: spec.routing.probe gateStatuses must not contain {status}"
            for status in sorted(self.gate_statuses & FORBIDDEN_GATE_STATUSES)
        ]
        return found


@dataclass(frozen=True)
class ProbeState:
    """One home's probe block (`entries[].probe`)."""

    result: ProbeResult | None = None
    message: str = ""
    gated: bool = False
    consecutive_failures: int = 0
    consecutive_successes: int = 0


def classify(status: int | None, error: str | None, policy: ProbePolicy) -> tuple[ProbeResult, str]:
    """One attempt's result and its `probe.message` (`HTTP 503`, `HTTP 301 (not in accept or
    gate list)`, `transport error: ...`)."""
    if error is not None:
        return "Failing", f"transport error: {error}"
    assert status is not None
    if status in policy.accept_statuses:
        return "Passing", f"HTTP {status}"
    if status in policy.gate_statuses:
        return "Failing", f"HTTP {status}"
    return "Unknown", f"HTTP {status} (not in accept or gate list)"


def record(state: ProbeState, result: ProbeResult, message: str, policy: ProbePolicy) -> ProbeState:
    """The home's probe state after one attempt."""
    if result == "Unknown":
        return replace(state, result=result, message=message)
    if result == "Failing":
        failures = state.consecutive_failures + 1
        gated = state.gated or failures >= policy.failure_threshold
        return ProbeState(result, message, gated, failures, 0)
    successes = state.consecutive_successes + 1
    gated = state.gated and successes < policy.success_threshold
    return ProbeState(result, message, gated, 0, successes)


def all_failed(gated: Sequence[bool], policy: ProbePolicy) -> tuple[str, str, str] | None:
    """`Routable` (status, reason, message) when every home is gated; None otherwise."""
    if not gated or not all(gated):
        return None
    count = len(gated)
    if policy.all_failed_policy == "PreserveTraffic":
        return (
            "True",
            "AllHomesProbeFailed",
            f"{count} home(s) have conclusive probe failures; preserving traffic among homes with ready capacity",
        )
    return "False", "AllHomesProbeFailed", f"{count} home(s) have conclusive probe failures; all route weights are zero"
