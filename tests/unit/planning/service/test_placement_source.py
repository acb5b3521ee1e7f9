"""The placement source's adapters: listed WorkloadClusters in, homes and status out (§16)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from models.inferenceservice import InferenceService
from planning.service.placement_source import (
    CAPACITY_ANNOTATION,
    cluster_row,
    placement_view,
    plan_homes,
    ready_condition,
    servable_counts,
    source_status,
)

NOW = datetime(2026, 12, 2, 5, 0, tzinfo=UTC)


@dataclass
class Counts:
    allocated: int
    ready: int


@dataclass
class Report:
    cluster: str
    admitted: bool = True
    ready: bool = True
    message: str = ""
    phase: str = "Ready"
    endpoint: str | None = "http://127.0.0.1:9/prod/chat"
    components: dict[str, Counts] = field(default_factory=dict)


def wlc(name: str, ready: bool = True, labels: dict[str, str] | None = None, capacity: str | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "labels": labels or {}}
    if capacity is not None:
        metadata["annotations"] = {CAPACITY_ANNOTATION: capacity, "other": "x"}
    return {"metadata": metadata, "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def chat(mode: str = "All", **placement: Any) -> InferenceService:
    return InferenceService.model_validate({
        "apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
        "metadata": {"name": "chat", "namespace": "prod"},
        "spec": {
            "model": {"name": "llama"}, "runtime": {"name": "srt"},
            "engine": {"minReplicas": 2, "maxReplicas": 4},
            "placement": {"policy": "ClusterAffinity", "mode": mode, **placement},
        },
    })


AFFINITY = [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["worker-a", "worker-b"]}]}]


def test_a_listed_cluster_keeps_name_labels_ready_and_only_the_capacity_annotation() -> None:
    row = cluster_row(wlc("worker-a", labels={"gpu": "h100"}, capacity="6"))
    assert row == {"name": "worker-a", "labels": {"gpu": "h100"}, "ready": True,
                   "annotations": {CAPACITY_ANNOTATION: "6"}}
    assert cluster_row({"metadata": {"name": "x"}})["ready"] is False


@pytest.mark.parametrize(
    ("components", "expected"),
    [
        ({}, {"allocated": 0, "ready": 0}),
        ({"engine": Counts(4, 3)}, {"allocated": 4, "ready": 3}),
        ({"engine": Counts(4, 3), "decoder": Counts(2, 2)}, {"allocated": 2, "ready": 2}),
        ({"engine": Counts(1, 1), "decoder": Counts(5, 0), "router": Counts(9, 9)}, {"allocated": 1, "ready": 0}),
    ],
)
def test_a_home_counts_the_engine_or_the_lower_of_engine_and_decoder(
    components: dict[str, Counts], expected: dict[str, int]
) -> None:
    assert servable_counts(components) == expected


def test_all_picks_every_ready_matching_cluster() -> None:
    rows = [cluster_row(wlc("worker-a")), cluster_row(wlc("worker-b")), cluster_row(wlc("worker-c"))]
    plan = plan_homes(chat(clusterAffinity=AFFINITY), rows, [])
    assert [h.cluster for h in plan.homes] == ["worker-a", "worker-b"]
    assert all(h.replicas is None for h in plan.homes)


def test_split_by_capacity_waits_for_every_candidates_report() -> None:
    rows = [cluster_row(wlc("worker-a", capacity="3")), cluster_row(wlc("worker-b"))]
    plan = plan_homes(chat("SplitByCapacity", clusterAffinity=AFFINITY), rows, [])
    assert plan.hold is not None and plan.hold.reason == "CapacityNotObserved"
    rows = [cluster_row(wlc("worker-a", capacity="3")), cluster_row(wlc("worker-b", capacity="1"))]
    plan = plan_homes(chat("SplitByCapacity", clusterAffinity=AFFINITY), rows, [])
    assert plan.hold is None
    assert sum(h.replicas or 0 for h in plan.homes) == 2


def test_the_view_counts_reports_and_places_once_every_home_admitted() -> None:
    rows = [cluster_row(wlc("worker-a")), cluster_row(wlc("worker-b"))]
    plan = plan_homes(chat(clusterAffinity=AFFINITY), rows, [])
    status, conditions = placement_view(plan, {"worker-a": Report("worker-a", components={"engine": Counts(4, 4)})})
    assert status["phase"] == "Admitting"
    status, conditions = placement_view(plan, {
        "worker-a": Report("worker-a", components={"engine": Counts(4, 4)}),
        "worker-b": Report("worker-b", components={"engine": Counts(2, 2)}),
    })
    assert status["phase"] == "Placed"
    assert {c["type"] for c in conditions} >= {"PlacementInputValid", "PlacementSatisfied", "PlacementConverged"}


@pytest.mark.parametrize(
    ("phase", "reports", "homes", "status", "reason"),
    [
        ("Pending", {}, [], "False", "NotPlaced"),
        ("Admitting", {"worker-a": None}, ["worker-a"], "False", "HomeStarting"),
        ("Admitting", {"worker-a": Report("worker-a", admitted=False, message="bad")}, ["worker-a"], "False", "HomeRefused"),
        ("Placed", {"worker-a": Report("worker-a", ready=False, phase="Progressing", message="1/2 serving")},
         ["worker-a"], "False", "HomeNotReady"),
        ("Admitting", {"worker-a": Report("worker-a")}, ["worker-a"], "False", "PlacementNotConverged"),
        ("Placed", {"worker-a": Report("worker-a"), "worker-b": Report("worker-b")}, ["worker-a", "worker-b"],
         "True", "HomesReady"),
    ],
)
def test_ready_names_the_first_home_that_is_not(
    phase: str, reports: dict[str, Any], homes: list[str], status: str, reason: str
) -> None:
    condition = ready_condition(phase, reports, homes)
    assert (condition.status, condition.reason) == (status, reason)


def test_the_source_status_carries_placement_conditions_and_ready() -> None:
    body = source_status(3, {"phase": "Placed"}, [{"type": "PlacementSatisfied", "status": "True", "reason": "Satisfied",
                                                   "message": "m"}],
                         {"worker-a": Report("worker-a")}, [], NOW, deleting=False)
    assert body["observedGeneration"] == 3
    assert body["placement"] == {"phase": "Placed"}
    assert [(c["type"], c["status"]) for c in body["conditions"]] == [("PlacementSatisfied", "True"), ("Ready", "True")]
    deleting = source_status(3, {"phase": "Placed"}, [], {"worker-a": Report("worker-a")}, [], NOW, deleting=True)
    assert deleting["conditions"][-1]["reason"] == "Deleting"
