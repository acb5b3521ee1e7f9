"""The placement source's view of its homes (reference §16): what the InferenceService
workflow on the control plane reads from the WorkloadClusters, plans, and shows.

`planning.service.placement` decides the homes; this module adapts its inputs (WorkloadCluster
objects) and outputs (the `status.placement` block, its conditions, the service's `Ready`)
to the workflow, and counts what a home can serve for its TrafficMap entry.

Public API: `cluster_row`, `cluster_infos`, `plan_homes`, `placement_view`, `servable_counts`,
`source_status`, `member_manifest` (re-exported), `ROUTING_ANNOTATIONS`, `CAPACITY_ANNOTATION`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from models.inferencereplica import Condition
from models.inferenceservice import InferenceService
from planning.replica.conditions import PlannedCondition
from planning.replica.status import with_transitions
from planning.service.placement import ClusterInfo, PlacementPlan, choose_homes, select_clusters
from planning.service.placement_member import member_manifest
from planning.service.placement_status import HomeObserved, placement_status

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


class MemberLike(ReportLike, Protocol):
    @property
    def components(self) -> Mapping[str, CountsLike]: ...


def cluster_row(item: Mapping[str, Any]) -> dict[str, Any]:
    """A listed WorkloadCluster as placement reads it: name, labels and whether it is Ready."""
    metadata = item.get("metadata") or {}
    conditions = (item.get("status") or {}).get("conditions") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    annotations = {k: v for k, v in (metadata.get("annotations") or {}).items() if k == CAPACITY_ANNOTATION}
    return {"name": metadata.get("name", ""), "labels": dict(metadata.get("labels") or {}), "ready": ready,
            "annotations": annotations}


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


CAPACITY_ANNOTATION = "ome.io/capacity-replicas"
"""Our capacity provider for `SplitByCapacity`: the nominal whole-replica capacity a
WorkloadCluster reports (written by whatever watches its hardware). Without it on every
candidate the plan waits (`PlacementCapacityFresh` Unknown `CapacityNotObserved`)."""


def cluster_infos(rows: Sequence[Mapping[str, Any]]) -> list[ClusterInfo]:
    infos = []
    for row in rows:
        raw = (row.get("annotations") or {}).get(CAPACITY_ANNOTATION)
        capacity = int(raw) if isinstance(raw, str) and raw.isdigit() else None
        infos.append(ClusterInfo(name=row["name"], labels=row.get("labels") or {}, ready=bool(row.get("ready")),
                                 capacity=capacity))
    return infos


def plan_homes(isvc: InferenceService, rows: Sequence[Mapping[str, Any]], current: Sequence[str]) -> PlacementPlan:
    """The homes of a ClusterAffinity service among the listed WorkloadClusters."""
    placement = isvc.spec.placement
    assert placement is not None
    selection = select_clusters(placement, cluster_infos(rows), isvc.metadata.annotations or {})
    engine = isvc.spec.engine
    engine_min = engine.min_replicas if engine is not None and engine.min_replicas is not None else 1
    return choose_homes(placement, selection, current, engine_min)


def placement_view(
    plan: PlacementPlan, reports: Mapping[str, MemberLike | None]
) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """`status.placement` and the six placement conditions, from the plan and the homes' reports."""
    observed = [
        HomeObserved(cluster, admitted=report.admitted, endpoint=report.endpoint,
                     **servable_counts(report.components))
        for cluster, report in sorted(reports.items())
        if report is not None
    ]
    report = placement_status(plan, observed)
    status = report.status.model_dump(by_alias=True, mode="json", exclude_none=True)
    conditions = [
        {"type": c.type, "status": c.status, "reason": c.reason, "message": c.message} for c in report.conditions
    ]
    return status, conditions


__all__ = [
    "CAPACITY_ANNOTATION", "ROUTING_ANNOTATIONS", "cluster_infos", "cluster_row", "member_manifest",
    "placement_view", "plan_homes", "servable_counts", "source_status",
]
