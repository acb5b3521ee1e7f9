"""The `TrafficMap` workflow's state: one model, carried through continue-as-new, and the
report the InferenceService workflow sends it.

What survives continue-as-new and a worker restart: the latest report, the drains set by
message, each home's probe state (a gate survives a controller restart, §19), the last map
built and what was written and published. What does not: capacity readings. §18 resets them
"on controller restart"; here the workflow's history is the controller's memory, so they
reset when the run continues as new (`for_next_run`), and on a capacity setting or endpoint
change. A fresh run polls again before it trusts a ceiling (fail-open to admitted counts).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from models.base import MessageModel
from models.inferencereplica import Condition
from models.trafficmap import TrafficMapSpec
from planning.trafficmap.capacity import Readings
from planning.trafficmap.drains import Drain
from planning.trafficmap.probes import ProbeState


class HomeReport(MessageModel):
    """One home as the InferenceService sees it."""

    cluster: str
    endpoint: str | None = None
    """`http://host:port/ns/name`; None until the home's gateway reports one."""
    allocated: int = 0
    """Admitted replicas (a prefill-decode service: the lower of engine and decoder)."""
    ready: int = 0


class HomesReport(MessageModel):
    """What the InferenceService workflow sends with `homes_changed`, whole each time."""

    generation: int = 0
    """The InferenceService's `metadata.generation`: the map's `spec.observedISVCGeneration`."""
    isvc_uid: str = ""
    mode: str = ""
    """`spec.placement.mode` (`All`, `Split`, ...), shown in the map's MODE column."""
    routing: dict[str, Any] = Field(default_factory=dict)
    """`spec.routing` as the user wrote it (camelCase), or {}."""
    annotations: dict[str, str] = Field(default_factory=dict)
    """The InferenceService's `ome.io/global-host` and `ome.io/traffic-drain`, when set."""
    homes: list[HomeReport] = Field(default_factory=list)
    placed: bool = False


class Publication(BaseModel):
    """The last publication's outcome (the `Published` condition and status fields)."""

    model_config = ConfigDict(extra="forbid")

    reason: str = "Transitioning"
    message: str = "the TrafficMap has not been published yet"
    published: bool = False
    observed_generation: int | None = None
    """The map generation of the last success; kept through failures (§17 staleness)."""
    gateway_namespace: str | None = None
    gateway_name: str | None = None
    route: dict[str, int] = Field(default_factory=dict)
    """The weights by cluster the route carries after the last success."""
    hosts: dict[str, str] = Field(default_factory=dict)
    """The backend host by cluster after the last success."""
    route_conditions: dict[str, str] = Field(default_factory=dict)
    """The route's `Accepted` / `ResolvedRefs` statuses as its gateway last reported them."""
    plan_key: str | None = None
    """What the last publication wrote (or why not), to publish again only when it changes."""
    at: datetime | None = None


class TrafficMapState(BaseModel):
    """Everything the workflow knows; the planning functions return new values of its parts."""

    model_config = ConfigDict(extra="forbid")

    namespace: str
    isvc: str
    isvc_uid: str = ""
    report: HomesReport | None = None
    drains: dict[str, Drain] = Field(default_factory=dict)
    """Drains set with `drain_cluster` (the annotation's are re-read from each report)."""
    probes: dict[str, ProbeState] = Field(default_factory=dict)
    probe_times: dict[str, datetime] = Field(default_factory=dict)
    probe_key: str | None = None
    readings: dict[str, Readings] = Field(default_factory=dict)
    capacity_key: str | None = None
    capacity_endpoints: dict[str, str] = Field(default_factory=dict)
    spec: TrafficMapSpec | None = None
    """The last map built from a valid policy: kept as is while an error stops the map."""
    conditions: list[Condition] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)
    """The errors that stop the map now (each logged once, when it appears)."""
    written: str | None = None
    """The TrafficMap object last written (canonical JSON), so an unchanged map is not rewritten."""
    status_written: str | None = None
    map_generation: int | None = None
    publication: Publication = Field(default_factory=Publication)
    next_probe_at: datetime | None = None
    next_capacity_at: datetime | None = None
    next_publish_at: datetime | None = None
    deleting: bool = False

    def for_next_run(self) -> TrafficMapState:
        """The state a continued-as-new run starts from: capacity readings reset (§18)."""
        return self.model_copy(update={"readings": {}, "capacity_endpoints": {}, "next_capacity_at": None})
