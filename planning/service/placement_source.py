"""The placement source's view of its homes (reference §16): what the InferenceService
workflow on the control plane reads from the WorkloadClusters, plans, and shows.

`planning.service.placement` decides the homes; this module adapts its inputs (WorkloadCluster
objects) and outputs (the `status.placement` block, its conditions, the service's `Ready`)
to the workflow, and counts what a home can serve for its TrafficMap entry.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from models.inferencereplica import Condition
from planning.replica.conditions import PlannedCondition
from planning.replica.status import with_transitions

ROUTING_ANNOTATIONS = ("ome.io/global-host", "ome.io/traffic-drain")
"""InferenceService annotations the TrafficMap reads (§20, §21)."""


class CountsLike(Protocol):
    allocated: int
    ready: int


class ReportLike(Protocol):
    cluster: str
    admitted: bool
    ready: bool
    message: str
    phase: str
    endpoint: str | None


def cluster_row(item: Mapping[str, Any]) -> dict[str, Any]:
    """A listed WorkloadCluster as placement reads it: name, labels and whether it is Ready."""
    metadata = item.get("metadata") or {}
    conditions = (item.get("status") or {}).get("conditions") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    return {"name": metadata.get("name", ""), "labels": dict(metadata.get("labels") or {}), "ready": ready}


def servable_counts(components: Mapping[str, CountsLike]) -> dict[str, int]:
    """(allocated, ready) a home counts for its weight: the engine's, or for prefill-decode
    the lower of engine and decoder (§17 step 1)."""
    engine = components.get("engine")
    if engine is None:
        return {"allocated": 0, "ready": 0}
    decoder = components.get("decoder")
    if decoder is None:
        return {"allocated": engine.allocated, "ready": engine.ready}
    return {"allocated": min(engine.allocated, decoder.allocated), "ready": min(engine.ready, decoder.ready)}


def ready_condition(phase: str, reports: Mapping[str, ReportLike | None], homes: Sequence[str]) -> PlannedCondition:
    """The source's `Ready`: placed, and every home ready; else the first reason it is not."""
    if not homes:
        return PlannedCondition("Ready", "False", "NotPlaced", "no workload cluster is a home yet; see status.placement")
    for cluster in homes:
        report = reports.get(cluster)
        if report is None:
            return PlannedCondition("Ready", "False", "HomeStarting", f"waiting for the first report of home {cluster}")
        if not report.admitted:
            return PlannedCondition("Ready", "False", "HomeRefused", f"home {cluster} refused its copy: {report.message}")
        if not report.ready:
            why = f": {report.message}" if report.message else ""
            return PlannedCondition("Ready", "False", "HomeNotReady", f"home {cluster} is {report.phase}{why}")
    if phase != "Placed":
        return PlannedCondition("Ready", "False", "PlacementNotConverged", f"placement phase is {phase}")
    return PlannedCondition("Ready", "True", "HomesReady", f"every home is ready: {', '.join(homes)}")


def source_status(
    generation: int | None,
    placement: Mapping[str, Any],
    conditions: Sequence[Mapping[str, Any]],
    reports: Mapping[str, ReportLike | None],
    previous: Sequence[Condition],
    now: datetime,
    deleting: bool,
) -> dict[str, Any]:
    """The placement source's status body: `placement`, the §16 source conditions, `Ready`."""
    homes = sorted(reports)
    ready = ready_condition(str(placement.get("phase", "Pending")), reports, homes)
    if deleting:
        ready = PlannedCondition("Ready", "False", "Deleting", "the InferenceService is being deleted; its homes drain")
    planned = [PlannedCondition(c["type"], c["status"], c["reason"], c.get("message", "")) for c in conditions]
    body: dict[str, Any] = {
        "conditions": [
            c.model_dump(by_alias=True, mode="json", exclude_none=True)
            for c in with_transitions(previous, [*planned, ready], now, generation)
        ],
        "placement": dict(placement),
    }
    if generation is not None:
        body["observedGeneration"] = generation
    return body
