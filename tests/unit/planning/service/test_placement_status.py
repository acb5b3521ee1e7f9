"""`status.placement`, the placement source conditions (§16), and `kubectl ome placement explain`."""

from __future__ import annotations

from typing import Any

import pytest

from models.inferenceservice import InferenceService, PlacementSpec
from models.isvc_status import InferenceServiceStatus, PlacementCandidate, PlacementHome
from planning.service.placement import (
    CandidateSet,
    ClusterInfo,
    PlacementPlan,
    choose_homes,
    select_clusters,
)
from planning.service.placement_explain import explain, routing_intent
from planning.service.placement_status import HomeObserved, placement_status

pytestmark = pytest.mark.unit

CLUSTERS = [
    ClusterInfo("worker-a", {"gpu": "a100"}, capacity=4),
    ClusterInfo("worker-b", {"gpu": "h100"}, capacity=2),
    ClusterInfo("worker-c", {"gpu": "a100"}, ready=False),
    ClusterInfo("worker-d", {"gpu": "t4"}),
]
SELECT_AB = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["worker-a", "worker-b", "worker-c"]}]}


def plan_for(mode: str, current: tuple[str, ...] = (), engine_min: int = 1, **extra: Any) -> PlacementPlan:
    spec = PlacementSpec.model_validate({"policy": "ClusterAffinity", "mode": mode, "clusterAffinity": [SELECT_AB], **extra})
    return choose_homes(spec, select_clusters(spec, CLUSTERS), list(current), engine_min)


def admitted(cluster: str, ready: int = 1, endpoint: str | None = "auto") -> HomeObserved:
    url = f"http://127.0.0.1:900{cluster[-1]}/prod/chat" if endpoint == "auto" else endpoint
    return HomeObserved(cluster, admitted=True, endpoint=url, allocated=ready, ready=ready)


def conditions(plan: PlacementPlan, observed: list[HomeObserved]) -> dict[str, tuple[str, str, str]]:
    report = placement_status(plan, observed)
    return {c.type: (c.status, c.reason, c.message) for c in report.conditions}


@pytest.mark.parametrize(
    ("mode", "observed", "phase"),
    [
        ("Single", [], "Racing"),
        ("Single", [HomeObserved("worker-a")], "Racing"),
        ("Single", [admitted("worker-a")], "Placed"),
        ("All", [admitted("worker-a")], "Admitting"),
        ("All", [admitted("worker-a"), admitted("worker-b")], "Placed"),
        ("Split", [], "Admitting"),
        ("Split", [admitted("worker-a"), admitted("worker-b")], "Placed"),
    ],
)
def test_phase(mode: str, observed: list[HomeObserved], phase: str) -> None:
    assert placement_status(plan_for(mode), observed).status.phase == phase


def test_pending_without_candidates() -> None:
    plan = choose_homes(PlacementSpec(policy="ClusterAffinity", mode="All"), CandidateSet(not_ready=("worker-c",)), [], 1)
    report = placement_status(plan, [])
    assert report.status.phase == "Pending" and report.status.homes == [] and report.status.candidates == []
    assert report.condition("PlacementSatisfied").reason == "NoCandidates"
    assert report.condition("PlacementSatisfied").message == (
        "no Ready WorkloadCluster matches spec.placement: 1 registered, 0 excluded by the selectors, "
        "1 matching but not Ready (worker-c)"
    )


def test_failed_on_invalid_selector() -> None:
    spec = PlacementSpec(policy="ClusterAffinity", mode="All", cluster_selector="gpu in (")
    plan = choose_homes(spec, select_clusters(spec, CLUSTERS), [], 1)
    report = placement_status(plan, [])
    assert report.status.phase == "Failed"
    valid = report.condition("PlacementInputValid")
    assert (valid.status, valid.reason) == ("False", "InvalidSelector")
    assert valid.message.startswith('spec.placement.clusterSelector: cannot parse "gpu in ("')
    assert report.condition("PlacementSatisfied").reason == "InvalidInput"


def test_failed_when_held_over_the_ceiling_keeps_admitted_homes() -> None:
    plan = plan_for("Split", current=("worker-a",), split={"replicas": 9, "maxReplicasPerCluster": 3})
    report = placement_status(plan, [admitted("worker-a", ready=2)])
    assert report.status.phase == "Failed"
    assert report.status.homes == [PlacementHome(cluster="worker-a", endpoint="http://127.0.0.1:900a/prod/chat")]
    satisfied = report.condition("PlacementSatisfied")
    assert (satisfied.status, satisfied.reason) == ("False", "MaxReplicasPerClusterExceeded")
    assert satisfied.message.startswith("the floor of 9 replica(s) across 2 home(s) (worker-a, worker-b) puts 5 on")
    assert report.condition("PlacementConverged").reason == "PlanHeld"


def test_single_sets_cluster_and_endpoint_once_admitted() -> None:
    racing = placement_status(plan_for("Single"), [HomeObserved("worker-a")]).status
    assert racing.cluster is None and racing.endpoint is None
    assert racing.candidates == [PlacementCandidate(cluster="worker-a", phase="Admitting")]
    placed = placement_status(plan_for("Single"), [admitted("worker-a")]).status
    assert placed.cluster == "worker-a" and placed.endpoint == "http://127.0.0.1:900a/prod/chat"
    assert placed.candidates == [PlacementCandidate(cluster="worker-a", phase="Admitted")]


def test_other_modes_leave_cluster_and_endpoint_unset() -> None:
    status = placement_status(plan_for("All"), [admitted("worker-a"), admitted("worker-b")]).status
    assert status.cluster is None and status.endpoint is None
    assert [home.cluster for home in status.homes] == ["worker-a", "worker-b"]


def test_split_homes_carry_their_share() -> None:
    plan = plan_for("Split", split={"replicas": 3})
    status = placement_status(plan, [admitted("worker-a"), HomeObserved("worker-b")]).status
    assert status.homes == [PlacementHome(cluster="worker-a", replicas=2, endpoint="http://127.0.0.1:900a/prod/chat")]
    assert status.candidates == [
        PlacementCandidate(cluster="worker-a", phase="Admitted"),
        PlacementCandidate(cluster="worker-b", phase="Admitting"),
    ]


def test_former_home_is_a_candidate_until_swept() -> None:
    plan = plan_for("Single", current=("worker-z",))
    report = placement_status(plan, [admitted("worker-a"), admitted("worker-z")])
    assert [c.cluster for c in report.status.candidates] == ["worker-a", "worker-z"]
    assert [h.cluster for h in report.status.homes] == ["worker-a"]
    converged = report.condition("PlacementConverged")
    assert (converged.status, converged.reason, converged.message) == (
        "False", "RemovingFormerHomes", "member copies remain on 1 former home (worker-z) and are being removed"
    )


def test_status_serialises_camel_case_within_the_isvc_status() -> None:
    status = placement_status(plan_for("Split", split={"replicas": 3}), [admitted("worker-a")]).status
    wire = InferenceServiceStatus(placement=status).to_manifest()["placement"]
    assert wire == {
        "phase": "Admitting",
        "candidates": [{"cluster": "worker-a", "phase": "Admitted"}, {"cluster": "worker-b", "phase": "Admitting"}],
        "homes": [{"cluster": "worker-a", "replicas": 2, "endpoint": "http://127.0.0.1:900a/prod/chat"}],
    }
    assert InferenceServiceStatus.model_validate({"placement": wire}).placement == status


def test_every_condition_every_time() -> None:
    for mode in ("Single", "All", "Split", "SplitByCapacity"):
        assert list(conditions(plan_for(mode), [])) == [
            "PlacementInputValid",
            "PlacementSatisfied",
            "PlacementConverged",
            "PlacementCapacityFresh",
            "PlacementBackendReady",
            "PlacementReplicaFloorsReady",
        ]


def test_conditions_when_placed_split() -> None:
    plan = plan_for("Split", split={"replicas": 3})
    found = conditions(plan, [admitted("worker-a", ready=2), admitted("worker-b", ready=1)])
    assert found == {
        "PlacementInputValid": ("True", "Valid", "spec.placement selects from 4 registered WorkloadClusters"),
        "PlacementSatisfied": ("True", "Satisfied", "mode Split: 2 homes of 2 Ready candidates: "
                               "worker-a (2 replicas), worker-b (1 replica)"),
        "PlacementConverged": ("True", "Converged", "every home admitted its member copy: worker-a, worker-b"),
        "PlacementCapacityFresh": ("True", "NotRequired", "mode Split does not use capacity reports"),
        "PlacementBackendReady": ("True", "EndpointsReported", "2 homes report an endpoint: "
                                  "worker-a (http://127.0.0.1:900a/prod/chat), worker-b (http://127.0.0.1:900b/prod/chat)"),
        "PlacementReplicaFloorsReady": ("True", "FloorsReady", "every home has its floor ready: worker-a 2/2, worker-b 1/1"),
    }


def test_conditions_while_admitting() -> None:
    found = conditions(plan_for("All", engine_min=2), [admitted("worker-a", ready=1, endpoint=None), HomeObserved("worker-b")])
    assert found["PlacementConverged"] == (
        "False", "AwaitingAdmission", "1 of 2 homes have not admitted the member copy yet: worker-b"
    )
    assert found["PlacementBackendReady"] == ("False", "EndpointMissing", "no endpoint reported by 1 of 1 admitted home: worker-a")
    assert found["PlacementReplicaFloorsReady"] == (
        "False", "FloorsNotReady", "worker-a has 1 of 2 ready replicas; worker-b has 0 of 2 ready replicas"
    )


def test_conditions_before_any_admission() -> None:
    found = conditions(plan_for("Single"), [])
    assert found["PlacementBackendReady"] == ("False", "NotPlaced", "no home has admitted the member copy yet")
    assert found["PlacementSatisfied"][:2] == ("True", "Satisfied")


def test_capacity_fresh_in_split_by_capacity() -> None:
    found = conditions(plan_for("SplitByCapacity", split={"replicas": 3}), [])
    assert found["PlacementCapacityFresh"] == (
        "True", "CapacityObserved", "capacity reported by all 2 candidates: worker-a=4, worker-b=2"
    )


def test_capacity_not_observed_keeps_homes_and_is_unknown() -> None:
    clusters = [ClusterInfo("worker-a", capacity=4), ClusterInfo("worker-b")]
    spec = PlacementSpec.model_validate({"policy": "ClusterAffinity", "mode": "SplitByCapacity", "split": {"replicas": 2}})
    plan = choose_homes(spec, select_clusters(spec, clusters), ["worker-a"], 1)
    report = placement_status(plan, [admitted("worker-a", ready=2)])
    assert report.status.phase == "Placed"
    message = ("no capacity report yet from worker-b (1 of 2 candidate(s)); the split keeps its current homes "
               "until every candidate reports")
    fresh = report.condition("PlacementCapacityFresh")
    assert (fresh.status, fresh.reason, fresh.message) == ("Unknown", "CapacityNotObserved", message)
    assert report.condition("PlacementSatisfied").status == "Unknown"
    assert placement_status(choose_homes(spec, select_clusters(spec, clusters), [], 1), []).status.phase == "Pending"


@pytest.mark.parametrize(
    ("routing", "valid", "detail"),
    [
        (None, True, "every home counts its replicas with factor 1"),
        ({"enabled": False, "capacityFactors": {"worker-b": "0"}}, True, "routing is off (spec.routing.enabled: false)"),
        ({"capacityFactors": {"worker-b": "3", "worker-a": "500m"}}, True, "capacity factors worker-a=500m, worker-b=3"),
        ({"capacityFactors": {"worker-b": "0"}}, False,
         'validate routing policy: spec.routing.capacityFactors["worker-b"] must be positive, got "0"'),
        ({"capacityFactors": {"worker-a": "1", "worker-b": "-2"}}, False,
         'validate routing policy: spec.routing.capacityFactors["worker-b"] must be positive, got "-2"'),
    ],
)
def test_routing_intent(routing: dict[str, Any] | None, valid: bool, detail: str) -> None:
    isvc = InferenceService.model_validate({"metadata": {"name": "chat"}, "spec": {"routing": routing} if routing else {}})
    assert routing_intent(isvc.spec.routing) == (valid, detail)


def test_explain() -> None:
    isvc = InferenceService.model_validate({
        "metadata": {"name": "chat", "namespace": "prod"},
        "spec": {
            "placement": {"policy": "ClusterAffinity", "mode": "Split", "clusterAffinity": [SELECT_AB],
                          "split": {"replicas": 3}},
            "routing": {"capacityFactors": {"worker-b": "0"}},
        },
    })
    assert isvc.spec.placement is not None
    plan = choose_homes(isvc.spec.placement, select_clusters(isvc.spec.placement, CLUSTERS), [], 1)
    text = explain(isvc, plan, placement_status(plan, [admitted("worker-a", ready=2)]))
    assert text.splitlines()[:9] == [
        "InferenceService prod/chat",
        "Placement: policy ClusterAffinity, mode Split, phase Admitting",
        'Routing intent: Invalid: validate routing policy: spec.routing.capacityFactors["worker-b"] must be '
        'positive, got "0"',
        "Candidates (2 of 4 registered): worker-a, worker-b",
        "Not Ready (1): worker-c",
        "Excluded (1):",
        "  worker-d: matches no clusterAffinity term (term 0: metadata.name In [worker-a, worker-b, worker-c])",
        "Homes: worker-a (2 replicas), worker-b (1 replica)",
        "Replica floor: 3",
    ]
    assert "  PlacementConverged False AwaitingAdmission: 1 of 2 homes have not admitted the member copy yet: worker-b" in text


def test_explain_legacy_held_plan_without_report() -> None:
    isvc = InferenceService.model_validate({"metadata": {"name": "chat"}, "spec": {"placement": {"mode": "Split",
                                            "split": {"replicas": 9, "maxReplicasPerCluster": 2}}}})
    assert isvc.spec.placement is not None
    plan = choose_homes(isvc.spec.placement, select_clusters(isvc.spec.placement, CLUSTERS), [], 1)
    text = explain(isvc, plan)
    assert "Placement: policy Legacy, mode Split\n" in text
    assert "Routing intent: Valid: every home counts its replicas with factor 1" in text
    assert "Homes: none" in text
    assert "Held: MaxReplicasPerClusterExceeded: the floor of 9 replica(s) across 3 home(s)" in text
    assert "Conditions:" not in text
