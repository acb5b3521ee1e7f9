"""TrafficMap (`tm`): one multi-cluster InferenceService's per-cluster weights (reference §17).

The spec holds one entry per home cluster with the inputs of its weight (`capacity`:
admitted and ready replicas, the canonical capacity factor, where the count came from),
the probe state and the drains holding it at 0; `observedISVCGeneration` tells whether
the map was built from the InferenceService's current generation. Zero `allocated`/`ready`
and an unset factor are left out of the wire form, as OME prints them empty.

Public API: `TrafficMap`, `TrafficMapSpec`, `TrafficMapEntry`, `EntryCapacity`,
`EntryProbe`, `TrafficMapStatus`, `GatewayRef`.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any, Literal

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer

from models.base import StatusModel
from models.inferencereplica import Condition
from models.inferenceservice import ObjectMeta
from models.quantity import Quantity


class EntryCapacity(StatusModel):
    allocated: int = 0
    ready: int = 0
    # The factor from spec.routing.capacityFactors in canonical form ("1.5" -> "1500m").
    factor: str | None = None
    source: Literal["ControlPlane", "Endpoint"] | None = None
    reported: int | None = None
    fallback_reason: str | None = None

    @property
    def factor_amount(self) -> Decimal:
        """The factor as a number; a cluster without one counts as 1."""
        return Decimal(1) if self.factor is None else Quantity.parse(self.factor).amount

    @model_serializer(mode="wrap")
    def _omit_zero_counts(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # OME omits zero counts; `kubectl get` shows them empty, which means 0.
        data: dict[str, Any] = handler(self)
        for key in ("allocated", "ready"):
            if data.get(key) == 0:
                del data[key]
        return data


class EntryProbe(StatusModel):
    result: Literal["Passing", "Failing", "Unknown"] | None = None
    message: str | None = None
    gated: bool = False
    consecutive_failures: int = 0
    last_probe_time: datetime | None = None


class TrafficMapEntry(StatusModel):
    """One home: a workload cluster that admitted the InferenceService and has an endpoint."""

    cluster: str
    endpoint: str | None = None
    weight: int = 0
    healthy: bool = False
    capacity: EntryCapacity = Field(default_factory=EntryCapacity)
    probe: EntryProbe | None = None
    drain_refs: list[str] | None = None


class TrafficMapSpec(StatusModel):
    service: str
    mode: str | None = None
    observed_isvc_generation: int | None = Field(default=None, alias="observedISVCGeneration")
    entries: list[TrafficMapEntry] = Field(default_factory=list)

    def entry(self, cluster: str) -> TrafficMapEntry | None:
        return next((e for e in self.entries if e.cluster == cluster), None)


class GatewayRef(StatusModel):
    namespace: str | None = None
    name: str


class TrafficMapStatus(StatusModel):
    source_uid: str | None = Field(default=None, alias="sourceUID")
    published: bool = False
    observed_traffic_map_generation: int | None = None
    gateway_ref: GatewayRef | None = None
    publisher: str | None = None
    conditions: list[Condition] = Field(default_factory=list)

    def condition(self, type_: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == type_), None)


class TrafficMap(StatusModel):
    api_version: Literal["ome.io/v1beta1"] = "ome.io/v1beta1"
    kind: Literal["TrafficMap"] = "TrafficMap"
    metadata: ObjectMeta
    spec: TrafficMapSpec
    status: TrafficMapStatus = Field(default_factory=TrafficMapStatus)

    def to_manifest(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")
