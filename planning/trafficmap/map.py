"""The TrafficMap's table (spec reference §17): one entry per home with the inputs of its
weight, and the `Routable`, `OverrideActive` and `CapacityFallback` conditions.

`build` is the whole pipeline, one step per rule module: each home's capacity (§18:
admitted lowered to a reported ceiling), its probe gate (§19), its drains (§20), then the
weights in §17's order (`weights.weights`) and the conditions. It is called only with a
policy that holds together (`policy.resolve` without errors): otherwise the map keeps its
last table (`freeze`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from models.inferencereplica import Condition
from models.trafficmap import EntryCapacity, EntryProbe, TrafficMapEntry, TrafficMapSpec
from planning.replica.conditions import PlannedCondition
from planning.replica.status import with_transitions
from planning.trafficmap import texts
from planning.trafficmap.capacity import Readings, allocate, ceiling, fallback_condition
from planning.trafficmap.drains import Drain, override_condition
from planning.trafficmap.policy import Resolved
from planning.trafficmap.probes import ProbeState
from planning.trafficmap.routable import Home, routable
from planning.trafficmap.state import HomesReport
from planning.trafficmap.weights import WeightInput, weights


@dataclass(frozen=True)
class BuiltMap:
    spec: TrafficMapSpec
    conditions: list[PlannedCondition]
    """Routable, OverrideActive, CapacityFallback (Published comes from the publisher)."""


def build(
    service: str,
    report: HomesReport,
    resolved: Resolved,
    drains: Mapping[str, Drain],
    probes: Mapping[str, ProbeState],
    probe_times: Mapping[str, datetime],
    readings: Mapping[str, Readings],
    now: datetime,
) -> BuiltMap:
    """The map from the homes' report, the policy, the drains in force and what was observed."""
    addressable = [home for home in report.homes if home.endpoint]
    entries: list[TrafficMapEntry] = []
    inputs: list[WeightInput] = []
    fallbacks: list[str | None] = []
    for home in addressable:
        probe_state = probes.get(home.cluster, ProbeState()) if resolved.probe is not None else None
        gated = probe_state is not None and probe_state.gated
        factor = resolved.factors.get(home.cluster)
        if resolved.capacity is not None:
            found = ceiling(readings.get(home.cluster, Readings()), resolved.capacity.policy, now)
            allocation = allocate(home.allocated, found)
            fallbacks.append(allocation.fallback_reason)
            capacity = EntryCapacity(
                allocated=allocation.allocated, ready=home.ready, factor=factor, source=allocation.source,
                reported=allocation.reported, fallback_reason=allocation.fallback_reason,
            )
        else:
            capacity = EntryCapacity(allocated=home.allocated, ready=home.ready, factor=factor, source="ControlPlane")
        refs = sorted(i for i, d in drains.items() if d.cluster == home.cluster)
        inputs.append(WeightInput(home.cluster, capacity.allocated, home.ready, factor, gated, bool(refs)))
        entries.append(
            TrafficMapEntry(
                cluster=home.cluster,
                endpoint=home.endpoint,
                healthy=home.ready > 0 and not gated,
                capacity=capacity,
                probe=_probe_block(probe_state, probe_times.get(home.cluster)),
                drain_refs=refs or None,
            )
        )
    policy = resolved.probe.policy if resolved.probe is not None else None
    by_cluster = weights(inputs, policy.all_failed_policy if policy is not None else "Drain")
    entries = [e.model_copy(update={"weight": by_cluster[e.cluster]}) for e in entries]
    spec = TrafficMapSpec(
        service=service, mode=report.mode or None,
        observed_isvc_generation=report.generation, entries=entries,
    )
    homes = [
        Home(h.cluster, h.endpoint, h.ready, by_cluster.get(h.cluster, 0),
             gated=bool(probes.get(h.cluster, ProbeState()).gated) if policy is not None else False,
             drained=any(d.cluster == h.cluster for d in drains.values()))
        for h in report.homes
    ]
    conditions = [
        PlannedCondition(texts.ROUTABLE, *routable(homes, policy)),
        PlannedCondition(texts.OVERRIDE_ACTIVE, *override_condition(drains, {e.cluster for e in entries})),
        PlannedCondition(texts.CAPACITY_FALLBACK, *_capacity_condition(resolved, fallbacks)),
    ]
    return BuiltMap(spec, conditions)


def _probe_block(state: ProbeState | None, last: datetime | None) -> EntryProbe | None:
    if state is None:
        return None
    return EntryProbe(
        result=state.result, message=state.message or None, gated=state.gated,
        consecutive_failures=state.consecutive_failures, last_probe_time=last,
    )


def _capacity_condition(resolved: Resolved, fallbacks: list[str | None]) -> tuple[Literal["True", "False"], str, str]:
    if resolved.capacity is None:
        return "False", "CapacityPollingDisabled", "routing capacity polling is not configured for this service"
    return fallback_condition(fallbacks)


def conditions_now(previous: list[Condition], planned: list[PlannedCondition], now: datetime,
                   generation: int | None) -> list[Condition]:
    """The map's conditions with `lastTransitionTime` kept while a status holds; Published last."""
    return with_transitions(previous, planned, now, generation)
