"""A TrafficMap's weights, in the order spec reference §17 gives (the order matters):

1. base = min(`allocated`, `ready`) x factor (1 unless `spec.routing.capacityFactors` sets
   one); a prefill-decode service counts the lower of its engine and decoder replicas;
2. probe-gated entries -> 0, unless every entry is gated and `allFailedPolicy` is
   `PreserveTraffic`;
3. all reduced to their smallest whole-number ratio, with exact rational arithmetic on the
   canonical quantities (a factor of "1500m" is 3/2, never 1.4999...); a ratio whose terms
   pass 1,000,000 is scaled down to that bound, no non-zero term falling to 0;
4. drained entries -> 0, the others unchanged (not renormalised).

A cluster's share is its weight over the sum. Factors change only the weights: "2" and "6"
give the same weights as "1" and "3".

`zero_weight_reason` says, in §17's diagnosis order, why an entry's weight is 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

from models.quantity import Quantity

MAX_WEIGHT = 1_000_000
"""The largest weight a map writes (integers 0-1,000,000)."""
AllFailedPolicy = Literal["Drain", "PreserveTraffic"]


@dataclass(frozen=True)
class WeightInput:
    """One home's inputs to its weight."""

    cluster: str
    allocated: int
    """Admitted replicas, already lowered to a reported capacity ceiling (§18)."""
    ready: int
    factor: str | None = None
    """The canonical quantity from `spec.routing.capacityFactors`; None counts as 1."""
    gated: bool = False
    """A routing health probe gates the home (§19)."""
    drained: bool = False
    """A drain holds the home at 0 (`drainRefs`, §20)."""


def factor_of(text: str | None) -> Fraction:
    """The factor as an exact rational: a Quantity's amount is an exact decimal."""
    if text is None:
        return Fraction(1)
    return Fraction(Quantity.parse(text).amount)


def servable(engine: tuple[int, int], decoder: tuple[int, int] | None = None) -> tuple[int, int]:
    """(allocated, ready) a home counts: a prefill-decode service's lower of engine and decoder."""
    if decoder is None:
        return engine
    return min(engine[0], decoder[0]), min(engine[1], decoder[1])


def base_weights(entries: Sequence[WeightInput], all_failed: AllFailedPolicy = "Drain") -> list[Fraction]:
    """Steps 1 and 2: each home's servable replicas times its factor, gated homes at 0."""
    bases = [Fraction(max(0, min(e.allocated, e.ready))) * factor_of(e.factor) for e in entries]
    every_gated = bool(entries) and all(e.gated for e in entries)
    if every_gated and all_failed == "PreserveTraffic":
        return bases
    return [Fraction(0) if e.gated else base for e, base in zip(entries, bases, strict=True)]


def smallest_ratio(values: Sequence[Fraction]) -> list[int]:
    """Step 3: the smallest whole numbers in the same ratio; within `MAX_WEIGHT`."""
    if not any(values):
        return [0 for _ in values]
    scale = math.lcm(*(v.denominator for v in values))
    whole = [int(v * scale) for v in values]
    divisor = math.gcd(*whole)
    reduced = [w // divisor for w in whole]
    top = max(reduced)
    if top <= MAX_WEIGHT:
        return reduced
    # Past the bound: the nearest ratio with the largest term at MAX_WEIGHT; a home that
    # has capacity keeps at least 1.
    return [0 if r == 0 else max(1, round(Fraction(r * MAX_WEIGHT, top))) for r in reduced]


def weights(entries: Sequence[WeightInput], all_failed: AllFailedPolicy = "Drain") -> dict[str, int]:
    """Every home's weight, by cluster (steps 1-4)."""
    reduced = smallest_ratio(base_weights(entries, all_failed))
    return {e.cluster: 0 if e.drained else w for e, w in zip(entries, reduced, strict=True)}


ZeroReason = Literal["Drained", "NotReady", "NoReportedCapacity", "NotAdmitted", "ProbeGated", "NoCapacity"]


def zero_weight_reason(
    entry: WeightInput, healthy: bool, source: Literal["ControlPlane", "Endpoint"] | None, reported: int | None
) -> ZeroReason:
    """Why a home's weight is 0, in §17's diagnosis order: drainRefs; no ready replica and not
    healthy; nothing allocated because the endpoint reported 0; nothing allocated by the
    control plane; a probe gate."""
    if entry.drained:
        return "Drained"
    if entry.ready == 0 and not healthy:
        return "NotReady"
    if entry.allocated == 0 and source == "Endpoint" and reported == 0:
        return "NoReportedCapacity"
    if entry.allocated == 0 and source in ("ControlPlane", None):
        return "NotAdmitted"
    if entry.gated:
        return "ProbeGated"
    return "NoCapacity"
