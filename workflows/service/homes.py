"""The contract between a multi-cluster InferenceService and its homes (reference §16).

A service placed with `spec.placement.policy: ClusterAffinity` runs on the control plane as
the placement source (`isvc/{ns}/{name}`); each home it chooses runs the same
`InferenceService` workflow as a member (`isvc/{ns}/{name}@{cluster}`, on the cluster's
task queue `ome-lifecycle@{cluster}`, so its activities reach that cluster's API). The
source sends a member its copy of the spec with `member_apply`; the member reports with
`member_changed` whenever what the source shows (admission, counts, endpoint, phase)
changes. Both state models here ride in `ServiceState` through continue-as-new.

Workflows import this module inside `workflow.unsafe.imports_passed_through()`.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from models.base import MessageModel

SIGNAL_MEMBER_APPLY = "member_apply"
"""Source -> member: the member copy of the spec (already admitted by the source)."""
SIGNAL_MEMBER_CHANGED = "member_changed"
"""Member -> source: a `MemberReport`."""

GATEWAY_NAMESPACE = "ome"
GATEWAY_NAME = "inference-gateway"
"""The workload cluster's inference Gateway: a home's endpoint is its address and listener
port, followed by `/{namespace}/{name}` of the InferenceService."""


class HomeCounts(MessageModel):
    allocated: int = 0
    """Replicas the home admitted (its Instances, or its Deployment's count)."""
    ready: int = 0
    """Replicas serving (in rotation)."""


class MemberReport(MessageModel):
    """What a home tells the placement source."""

    cluster: str
    generation: int
    """The member's generation: one per `member_apply` it accepted."""
    source_generation: int = 0
    """The source generation whose copy the member runs."""
    admitted: bool = True
    message: str = ""
    """Why the member refused its copy, or why it is not ready."""
    phase: str = "Creating"
    ready: bool = False
    endpoint: str | None = None
    components: dict[str, HomeCounts] = Field(default_factory=dict)
    deleted: bool = False


class MemberApply(MessageModel):
    """`member_apply`: the copy of the spec a home runs, and the source generation it came from."""

    manifest: dict[str, Any]
    source_generation: int


class HomeTracking(MessageModel):
    """The source's view of one home."""

    cluster: str
    started: bool = False
    sent: str = ""
    """Fingerprint of the last copy sent."""
    replicas: int | None = None
    """The engine's replicas in this home (Split), None when the home scales on its own."""
    report: MemberReport | None = None
    removing: bool = False
    """Placement dropped the home: it was told to delete and drains."""
    pause_sent: str = ""
    """The pause depth last passed on (`true`, `freeze`; empty: not paused)."""


class PlacementTracking(MessageModel):
    """The placement source's state: clusters as last listed, homes, the TrafficMap."""

    clusters: list[dict[str, Any]] = Field(default_factory=list)
    """WorkloadClusters as last listed: name, labels, Ready."""
    listed_at: str | None = None
    homes: dict[str, HomeTracking] = Field(default_factory=dict)
    status: dict[str, Any] = Field(default_factory=dict)
    """`status.placement` as last planned."""
    conditions: list[dict[str, Any]] = Field(default_factory=list)
    """The placement source conditions as last planned."""
    object_generation: int | None = None
    """The control-plane object's `metadata.generation` as last written: the TrafficMap's
    `spec.observedISVCGeneration` is compared with it (`kubectl get isvc`)."""
    trafficmap_started: bool = False
    trafficmap_sent: str = ""
    trafficmap_deleted: bool = False


def home_endpoint(gateway: dict[str, Any] | None, namespace: str, name: str) -> str | None:
    """`http://<address>:<port>/<ns>/<name>` from the workload cluster's inference Gateway, or
    None while it has no address (the home is not addressable: no TrafficMap entry)."""
    if not gateway:
        return None
    addresses = (gateway.get("status") or {}).get("addresses") or []
    listeners = (gateway.get("spec") or {}).get("listeners") or []
    if not addresses or not listeners or not addresses[0].get("value"):
        return None
    port = listeners[0].get("port")
    host = addresses[0]["value"]
    return f"http://{host}:{port}/{namespace}/{name}" if port else f"http://{host}/{namespace}/{name}"
