"""`omectl get trafficmap`: spec reference §17, `kubectl ome get tm`: `NAME MODE TARGETS ROUTABLE
PUBLISHED`; wide adds `SERVICE ACTIVE HEALTHY OVERRIDE OVERRIDE-REASON REASON GATEWAY`.

A condition older than the map's generation shows `Unknown` (its reason `-`): it speaks of
an earlier table."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from models.inferencereplica import Condition
from planning.trafficmap.view import TrafficMapView
from workers.omectl.views.table import NONE, Table, table

HEADERS = ("NAME", "MODE", "TARGETS", "ROUTABLE", "PUBLISHED")
WIDE_HEADERS = ("SERVICE", "ACTIVE", "HEALTHY", "OVERRIDE", "OVERRIDE-REASON", "REASON", "GATEWAY")


@dataclass(frozen=True)
class Shown:
    status: str
    reason: str


def shown(view: TrafficMapView, kind: str) -> Shown:
    found = next((c for c in view.conditions if c.type == kind), None)
    if found is None or stale(found, view.map_generation):
        return Shown("Unknown", NONE)
    return Shown(found.status, found.reason or NONE)


def stale(condition: Condition, generation: int | None) -> bool:
    observed = condition.observed_generation
    return observed is not None and generation is not None and observed < generation


def gateway(view: TrafficMapView) -> str:
    publication = view.publication
    if not publication.gateway_name:
        return NONE
    return f"{publication.gateway_namespace}/{publication.gateway_name}" if publication.gateway_namespace else publication.gateway_name


def row(view: TrafficMapView, wide: bool = False) -> tuple[str, ...]:
    cells = (
        view.isvc,
        view.mode or NONE,
        str(len(view.entries)),
        shown(view, "Routable").status,
        shown(view, "Published").status,
    )
    if not wide:
        return cells
    override = shown(view, "OverrideActive")
    return (
        *cells,
        f"{view.namespace}/{view.isvc}",
        str(sum(1 for entry in view.entries if entry.weight > 0)),
        str(sum(1 for entry in view.entries if entry.healthy)),
        override.status,
        override.reason,
        shown(view, "Routable").reason,
        gateway(view),
    )


def trafficmap_table(maps: Sequence[TrafficMapView], wide: bool = False) -> Table:
    return table(HEADERS + WIDE_HEADERS if wide else HEADERS, [row(view, wide) for view in maps])


def entries_table(view: TrafficMapView) -> Table:
    """The homes of one map, as `omectl get trafficmap NAME` prints them below its row."""
    rows = [
        (
            entry.cluster,
            str(entry.weight),
            str(entry.healthy).lower(),
            ",".join(entry.drain_refs or []) or NONE,
            (entry.probe.message or NONE) if entry.probe is not None else NONE,
        )
        for entry in view.entries
    ]
    return table(("CLUSTER", "WEIGHT", "HEALTHY", "DRAINS", "PROBE"), rows)
