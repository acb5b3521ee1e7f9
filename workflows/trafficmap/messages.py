"""The `TrafficMap` workflow's contract: its input, its messages, and what it answers.

Started by the control-plane InferenceService workflow (a child with parent close policy
ABANDON) on the control-plane task queue, for a routed multi-cluster service, with input
`{"namespace": "prod", "isvc": "chat", "isvc_uid": "<the InferenceService's uid>"}` and the
ID `trafficmap/prod/chat`. The InferenceService then sends the whole picture each time it
changes (signal `homes_changed`):

    {"generation": 6, "isvc_uid": "...", "mode": "All", "placed": true,
     "routing": {"capacityFactors": {"worker-b": "3"}},
     "homes": [{"cluster": "worker-a", "endpoint": "http://10.0.0.1/prod/chat", "allocated": 4, "ready": 4}]}

An operator drains a workload cluster, and reads why the weights are what they are:

    temporal workflow update execute --workflow-id trafficmap/prod/chat --name drain_cluster \\
        --input '{"id": "upgrade-42", "cluster": "worker-b", "reason": "node pool upgrade"}'
    temporal workflow query --workflow-id trafficmap/prod/chat --name status

`drain_cluster` / `undrain_cluster` are both Updates (answered with the result rows, or
refused with §20's texts) and signals (fire and forget; a refusal is logged and shown in
`status.refusals`).

Workflows import this module inside `workflow.unsafe.imports_passed_through()`.
"""

from __future__ import annotations

from pydantic import Field

from models.base import MessageModel
from planning.trafficmap.drains import DrainRow
from planning.trafficmap.state import HomeReport, HomesReport, TrafficMapState
from planning.trafficmap.view import TrafficMapView

SIGNAL_HOMES_CHANGED = "homes_changed"
"""`HomesReport`: the homes, their counts, `spec.routing` and the annotations, whole each time."""
SIGNAL_DELETE = "delete"
"""The InferenceService is gone or no longer routed: withdraw the route, delete the map, end."""
DRAIN_CLUSTER = "drain_cluster"
"""Signal and Update, `DrainRequest`: hold a cluster at weight 0 under an override ID."""
UNDRAIN_CLUSTER = "undrain_cluster"
"""Signal and Update, `UndrainRequest`: remove the override (the weight returns with the last)."""
QUERY_STATUS = "status"


class TrafficMapInput(MessageModel):
    namespace: str
    isvc: str
    isvc_uid: str = ""
    """The control-plane InferenceService's UID: the map's owner reference and `status.sourceUID`."""


class DrainRequest(MessageModel):
    id: str
    """Override ID: lowercase letters, digits and hyphens."""
    cluster: str = ""
    """The WorkloadCluster to drain (`--workload-cluster`)."""
    reason: str = ""


class UndrainRequest(MessageModel):
    id: str


class DrainResult(MessageModel):
    """The rows `kubectl ome traffic drain` prints: override-id, cluster, overrides (`0 -> 1`)."""

    rows: list[DrainRow] = Field(default_factory=list)


__all__ = [
    "DrainRequest", "DrainResult", "DrainRow", "HomeReport", "HomesReport", "TrafficMapInput", "TrafficMapState",
    "TrafficMapView", "UndrainRequest",
]
