"""What `status` answers and what the Temporal UI shows for a TrafficMap: the table, the
conditions, the drains, the last publication and what the workflow waits for, so an operator
at 3 a.m. reads why a cluster gets no traffic without opening the history.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from models.inferencereplica import Condition
from models.trafficmap import TrafficMapEntry
from planning.trafficmap.drains import Drain
from planning.trafficmap.publication import current
from planning.trafficmap.state import Publication, TrafficMapState


class DrainView(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    cluster: str
    reason: str = ""
    source: str
    """`message` (drain_cluster) or `annotation` (ome.io/traffic-drain)."""


class TrafficMapView(BaseModel):
    model_config = ConfigDict(extra="forbid")

    namespace: str
    isvc: str
    mode: str | None = None
    """The placement mode the map weighs for (`All`, `Split`, ...), `kubectl ome get tm`'s MODE."""
    observed_isvc_generation: int | None = None
    entries: list[TrafficMapEntry] = Field(default_factory=list)
    weights: dict[str, int] = Field(default_factory=dict)
    conditions: list[Condition] = Field(default_factory=list)
    drains: list[DrainView] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)
    """The errors that stop the map now (its table is the last one built)."""
    publication: Publication = Field(default_factory=Publication)
    map_generation: int | None = None
    publication_current: bool = False
    publication_note: str = ""
    refusals: list[str] = Field(default_factory=list)
    """Drain and undrain signals refused since this run started (an Update is answered instead)."""
    next_probe_at: datetime | None = None
    next_capacity_at: datetime | None = None
    next_publish_at: datetime | None = None
    deleting: bool = False
    message: str = ""


def view_of(state: TrafficMapState, annotated: dict[str, Drain], refusals: list[str]) -> TrafficMapView:
    entries = state.spec.entries if state.spec is not None else []
    drains = [DrainView(id=i, cluster=d.cluster, reason=d.reason, source="message") for i, d in state.drains.items()]
    drains += [DrainView(id=i, cluster=d.cluster, reason=d.reason, source="annotation") for i, d in annotated.items()]
    trusted, note = current(state.map_generation, state.publication.observed_generation,
                            state.publication.route_conditions)
    view = TrafficMapView(
        namespace=state.namespace, isvc=state.isvc, mode=state.spec.mode if state.spec is not None else None,
        observed_isvc_generation=state.spec.observed_isvc_generation if state.spec is not None else None,
        entries=entries, weights={e.cluster: e.weight for e in entries}, conditions=state.conditions,
        drains=sorted(drains, key=lambda d: d.id), errors=state.errors, publication=state.publication,
        map_generation=state.map_generation, publication_current=trusted, publication_note=note,
        refusals=refusals[-10:], next_probe_at=state.next_probe_at, next_capacity_at=state.next_capacity_at,
        next_publish_at=state.next_publish_at, deleting=state.deleting,
    )
    return view.model_copy(update={"message": details(view)})


def details(view: TrafficMapView) -> str:
    """The run's current details in the UI: one line per home, then why it stands so."""
    lines = [f"TrafficMap {view.namespace}/{view.isvc}"]
    if view.deleting:
        lines.append("deleting: withdrawing the global route, then removing the map")
    if view.errors:
        lines.append(f"STOPPED (last table kept): {view.errors[0]}")
    for entry in view.entries:
        why = []
        if entry.drain_refs:
            why.append(f"drained by {', '.join(entry.drain_refs)}")
        if entry.probe is not None and entry.probe.gated:
            why.append(f"probe gated ({entry.probe.message})")
        if entry.capacity.fallback_reason:
            why.append(f"capacity: {entry.capacity.fallback_reason}")
        lines.append(
            f"- {entry.cluster}: weight {entry.weight} (allocated {entry.capacity.allocated}, ready "
            f"{entry.capacity.ready}, factor {entry.capacity.factor or '1'})" + (f"; {'; '.join(why)}" if why else "")
        )
    for condition in view.conditions:
        lines.append(f"{condition.type}={condition.status} {condition.reason}: {condition.message}")
    return "\n".join(lines)
