"""The TrafficMap's `Routable` condition (spec reference §17): can the global route send
traffic anywhere, and if not, the first reason that explains it.

True: `Routable`, or `AllHomesProbeFailed` under `allFailedPolicy: PreserveTraffic`.
False, checked in this order: `NotPlaced` (no home), `NoAddressableHome` (no home reports an
endpoint), `AllHomesProbeFailed` under `Drain`, `AllHomesUnready` (no ready replica
anywhere), `TrafficDrain` (every home that could serve is drained), `NoRoutableCapacity`
(every weight is 0 for another reason: capacity ceilings of 0, admitted counts of 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from planning.trafficmap.probes import ProbePolicy, all_failed


@dataclass(frozen=True)
class Home:
    cluster: str
    endpoint: str | None
    ready: int
    weight: int
    gated: bool = False
    drained: bool = False


def routable(homes: Sequence[Home], probe: ProbePolicy | None) -> tuple[Literal["True", "False"], str, str]:
    """(status, reason, message) of `Routable`."""
    if not homes:
        return "False", "NotPlaced", "the InferenceService has no home cluster yet"
    addressable = [h for h in homes if h.endpoint]
    if not addressable:
        return "False", "NoAddressableHome", f"none of {len(homes)} home(s) reports an endpoint"
    failed = all_failed([h.gated for h in addressable], probe) if probe is not None else None
    if failed is not None and failed[0] == "False":
        return "False", failed[1], failed[2]
    serving = [h for h in addressable if h.weight > 0]
    if serving:
        if failed is not None:
            return "True", failed[1], failed[2]
        return "True", "Routable", f"{len(serving)} of {len(homes)} home(s) receive traffic"
    if all(h.ready == 0 for h in addressable):
        return "False", "AllHomesUnready", f"none of {len(addressable)} home(s) has a ready replica"
    if all(h.drained for h in addressable if h.ready > 0):
        drained = sorted(h.cluster for h in addressable if h.drained)
        return "False", "TrafficDrain", f"every home with ready replicas is drained ({', '.join(drained)})"
    return "False", "NoRoutableCapacity", "every home's weight is 0; inspect spec.entries[].capacity"
