"""Candidates and homes of a multi-cluster placement (`planning.service.placement`, §16)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from models.inferenceservice import PlacementSpec
from planning.service.placement import (
    CAPACITY_NOT_OBSERVED,
    INSUFFICIENT_CAPACITY,
    MAX_PER_CLUSTER_EXCEEDED,
    MIN_PER_CLUSTER_UNMET,
    NO_REPLICA_FLOOR,
    CandidateSet,
    ClusterInfo,
    HomePlan,
    apportion,
    candidates,
    choose_homes,
    select_clusters,
    split_floor,
)

pytestmark = pytest.mark.unit

CLUSTERS = [
    ClusterInfo("worker-c", {"gpu": "t4", "region": "us"}, ready=True),
    ClusterInfo("worker-a", {"gpu": "a100", "region": "eu"}, ready=True),
    ClusterInfo("worker-b", {"gpu": "h100", "region": "eu"}, ready=True),
    ClusterInfo("worker-d", {"gpu": "a100", "region": "us"}, ready=False),
]


def placement(**fields: Any) -> PlacementSpec:
    return PlacementSpec.model_validate(fields)


def affinity(*terms: dict[str, Any], mode: str = "All") -> PlacementSpec:
    return placement(policy="ClusterAffinity", mode=mode, clusterAffinity=list(terms))


def names_in(*names: str, op: str = "In") -> dict[str, Any]:
    return {"matchFields": [{"key": "metadata.name", "operator": op, "values": list(names)}]}


def labels(key: str, op: str, *values: str) -> dict[str, Any]:
    requirement: dict[str, Any] = {"key": key, "operator": op}
    if values:
        requirement["values"] = list(values)
    return {"matchExpressions": [requirement]}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (placement(policy="ClusterAffinity", mode="All"), ["worker-a", "worker-b", "worker-c"]),
        (placement(), ["worker-a", "worker-b", "worker-c"]),
        (affinity(names_in("worker-a", "worker-c")), ["worker-a", "worker-c"]),
        (affinity(names_in("worker-a", op="NotIn")), ["worker-b", "worker-c"]),
        (affinity(labels("gpu", "In", "a100", "h100")), ["worker-a", "worker-b"]),
        (affinity(labels("gpu", "NotIn", "a100")), ["worker-b", "worker-c"]),
        (affinity(labels("gpu", "Exists")), ["worker-a", "worker-b", "worker-c"]),
        (affinity(labels("spot", "DoesNotExist")), ["worker-a", "worker-b", "worker-c"]),
        (affinity(labels("spot", "Exists")), []),
        # terms ORed
        (affinity(names_in("worker-c"), labels("gpu", "In", "h100")), ["worker-b", "worker-c"]),
        # requirements within a term ANDed (fields and expressions together)
        (affinity({**names_in("worker-a", "worker-b"), **labels("region", "In", "eu")}), ["worker-a", "worker-b"]),
        (affinity({**names_in("worker-a", "worker-c"), **labels("region", "In", "eu")}), ["worker-a"]),
        # worker-d matches but is not Ready
        (affinity(labels("gpu", "In", "a100")), ["worker-a"]),
        # legacy strings, ANDed
        (placement(requirements="gpu in (a100,h100)"), ["worker-a", "worker-b"]),
        (placement(clusterSelector="region=eu,metadata.name!=worker-a"), ["worker-b"]),
        (placement(requirements="gpu", clusterSelector="region=us"), ["worker-c"]),
        (placement(clusterSelector="a=b,c in (x,y),!d"), []),
        # a legacy string narrows the affinity form too
        (affinity(names_in("worker-a", "worker-b"), mode="All").model_copy(update={"cluster_selector": "gpu=h100"}),
         ["worker-b"]),
    ],
)
def test_candidates(spec: PlacementSpec, expected: list[str]) -> None:
    assert candidates(spec, CLUSTERS) == expected


def test_candidates_are_sorted_whatever_the_registration_order() -> None:
    assert candidates(placement(), list(reversed(CLUSTERS))) == candidates(placement(), CLUSTERS)


def test_legacy_annotations_select_too() -> None:
    annotations = {"ome.io/accelerator-requirements": "gpu=a100", "ome.io/cluster-selector": "region=eu"}
    assert candidates(placement(), CLUSTERS, annotations) == ["worker-a"]


def test_selection_lists_not_ready_and_why_others_are_excluded() -> None:
    selection = select_clusters(affinity(labels("gpu", "In", "a100"), names_in("worker-c", "worker-z")), CLUSTERS)
    assert selection.names == ["worker-a", "worker-c"]
    assert selection.not_ready == ("worker-d",)
    assert selection.excluded == {
        "worker-b": "matches no clusterAffinity term (term 0: gpu In [a100]; "
                    "term 1: metadata.name In [worker-c, worker-z])",
    }
    assert selection.registered == 4


def test_legacy_exclusion_names_the_requirement() -> None:
    selection = select_clusters(placement(clusterSelector="region=eu"), CLUSTERS)
    assert selection.excluded["worker-c"] == "selector requires region In [eu]"


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        (placement(clusterSelector="gpu in (a100"),
         'spec.placement.clusterSelector: cannot parse "gpu in (a100" in selector "gpu in (a100"'),
        (placement(requirements="=x"), 'spec.placement.requirements: cannot parse "=x"'),
        (affinity({"matchFields": [{"key": "spec.region", "operator": "Exists"}]}),
         'spec.placement.clusterAffinity[0].matchFields[0]: field "spec.region" is not supported'),
    ],
)
def test_invalid_selectors_select_nothing_and_say_why(spec: PlacementSpec, problem: str) -> None:
    selection = select_clusters(spec, CLUSTERS)
    assert selection.candidates == () and selection.problem is not None
    assert selection.problem.startswith(problem)


def test_invalid_annotation_selector_names_the_annotation() -> None:
    selection = select_clusters(placement(), CLUSTERS, {"ome.io/cluster-selector": "a in ()"})
    assert selection.problem is not None
    assert selection.problem.startswith('metadata.annotations["ome.io/cluster-selector"]: cannot parse')


def ready(*specs: tuple[str, int | None]) -> CandidateSet:
    return CandidateSet(candidates=tuple(ClusterInfo(name, capacity=capacity) for name, capacity in specs))


ABC = ready(("worker-a", None), ("worker-b", None), ("worker-c", None))


@pytest.mark.parametrize(
    ("current", "expected"),
    [
        ([], "worker-a"),
        (["worker-b"], "worker-b"),  # the current home stays while it is a candidate
        (["worker-z"], "worker-a"),  # gone or not Ready: the first candidate by name
        (["worker-z", "worker-c"], "worker-c"),
    ],
)
def test_single(current: list[str], expected: str) -> None:
    plan = choose_homes(placement(policy="ClusterAffinity", mode="Single"), ABC, current, 2)
    assert plan.homes == (HomePlan(expected),) and plan.hold is None and plan.mode == "Single"


def test_single_is_the_legacy_default_mode() -> None:
    assert choose_homes(placement(), ABC, [], 1).home_names == ["worker-a"]


def test_no_candidates_no_homes() -> None:
    for mode in ("Single", "All", "Split", "SplitByCapacity"):
        plan = choose_homes(placement(policy="ClusterAffinity", mode=mode), CandidateSet(), ["worker-a"], 2)
        assert plan.homes == () and plan.hold is None


def test_all_every_candidate_without_override() -> None:
    plan = choose_homes(placement(policy="ClusterAffinity", mode="All"), ABC, ["worker-z"], 3)
    assert plan.homes == (HomePlan("worker-a"), HomePlan("worker-b"), HomePlan("worker-c"))


def split(mode: str = "Split", **fields: int) -> PlacementSpec:
    return placement(policy="ClusterAffinity", mode=mode, split=fields or None)


@pytest.mark.parametrize(
    ("spec", "engine_min", "current", "expected"),
    [
        (split(replicas=6), 1, [], {"worker-a": 2, "worker-b": 2, "worker-c": 2}),
        (split(replicas=7), 1, [], {"worker-a": 3, "worker-b": 2, "worker-c": 2}),
        (split(replicas=8), 1, [], {"worker-a": 3, "worker-b": 3, "worker-c": 2}),
        (split(), 4, [], {"worker-a": 2, "worker-b": 1, "worker-c": 1}),  # floor: engine minReplicas
        (split(replicas=2), 5, [], {"worker-a": 1, "worker-b": 1}),  # a share of 0 makes no home
        (split(replicas=2), 5, ["worker-c"], {"worker-a": 1, "worker-c": 1}),  # current homes kept first
        (split(replicas=6, maxReplicasPerCluster=2), 1, [], {"worker-a": 2, "worker-b": 2, "worker-c": 2}),
        (split(replicas=6, maxReplicasPerCluster=0), 1, [], {"worker-a": 2, "worker-b": 2, "worker-c": 2}),
        (split(replicas=6, minReplicasPerCluster=3), 1, [], {"worker-a": 3, "worker-b": 3}),
        (split(replicas=7, minReplicasPerCluster=3), 1, ["worker-c"], {"worker-a": 4, "worker-c": 3}),
        (split(replicas=5, minReplicasPerCluster=1), 1, [], {"worker-a": 2, "worker-b": 2, "worker-c": 1}),
    ],
)
def test_split(spec: PlacementSpec, engine_min: int, current: list[str], expected: dict[str, int]) -> None:
    plan = choose_homes(spec, ABC, current, engine_min)
    assert plan.hold is None
    assert {home.cluster: home.replicas for home in plan.homes} == expected
    assert plan.home_names == sorted(expected)


@pytest.mark.parametrize(
    ("spec", "engine_min", "reason", "message"),
    [
        (split(replicas=7, maxReplicasPerCluster=2), 1, MAX_PER_CLUSTER_EXCEEDED,
         "the floor of 7 replica(s) across 3 home(s) (worker-a, worker-b, worker-c) puts 3 on worker-a, above "
         "split.maxReplicasPerCluster 2; add clusters or raise maxReplicasPerCluster"),
        (split(), 0, NO_REPLICA_FLOOR,
         "nothing to split: spec.placement.split.replicas is unset and spec.engine.minReplicas is 0; "
         "set spec.placement.split.replicas"),
        (split(replicas=2, minReplicasPerCluster=3), 1, MIN_PER_CLUSTER_UNMET,
         "the floor of 2 replica(s) cannot give any home split.minReplicasPerCluster 3; raise "
         "spec.placement.split.replicas or lower minReplicasPerCluster"),
        (split(replicas=9, minReplicasPerCluster=4, maxReplicasPerCluster=4), 1, MAX_PER_CLUSTER_EXCEEDED,
         "puts 5 on worker-a"),
    ],
)
def test_split_held_keeps_current_homes(spec: PlacementSpec, engine_min: int, reason: str, message: str) -> None:
    plan = choose_homes(spec, ABC, ["worker-b"], engine_min)
    assert plan.hold is not None and plan.hold.reason == reason and message in plan.hold.message
    assert plan.homes == (HomePlan("worker-b"),)


@pytest.mark.parametrize(
    ("capacities", "floor", "expected"),
    [
        ({"worker-a": 4, "worker-b": 2, "worker-c": 2}, 4, {"worker-a": 2, "worker-b": 1, "worker-c": 1}),
        ({"worker-a": 1, "worker-b": 1, "worker-c": 1}, 2, {"worker-a": 1, "worker-b": 1}),
        ({"worker-a": 5, "worker-b": 3, "worker-c": 2}, 5, {"worker-a": 3, "worker-b": 1, "worker-c": 1}),
        ({"worker-a": 0, "worker-b": 3, "worker-c": 1}, 3, {"worker-b": 2, "worker-c": 1}),
        ({"worker-a": 2, "worker-b": 2, "worker-c": 2}, 6, {"worker-a": 2, "worker-b": 2, "worker-c": 2}),
        ({"worker-a": 1, "worker-b": 10, "worker-c": 0}, 11, {"worker-a": 1, "worker-b": 10}),
    ],
)
def test_split_by_capacity(capacities: dict[str, int], floor: int, expected: dict[str, int]) -> None:
    selection = ready(*capacities.items())
    plan = choose_homes(split("SplitByCapacity", replicas=floor), selection, [], 1)
    assert plan.hold is None and plan.floor == floor
    assert {home.cluster: home.replicas for home in plan.homes} == expected


def test_split_by_capacity_waits_for_every_report() -> None:
    selection = ready(("worker-a", 4), ("worker-b", None), ("worker-c", None))
    plan = choose_homes(split("SplitByCapacity", replicas=3), selection, ["worker-a"], 1)
    assert plan.homes == (HomePlan("worker-a"),)
    assert plan.hold is not None and plan.hold.reason == CAPACITY_NOT_OBSERVED
    assert plan.hold.message == (
        "no capacity report yet from worker-b, worker-c (2 of 3 candidate(s)); the split keeps its current homes "
        "until every candidate reports"
    )


def test_split_by_capacity_floor_beyond_capacity_is_held() -> None:
    plan = choose_homes(split("SplitByCapacity", replicas=9), ready(("worker-a", 4), ("worker-b", 2)), [], 1)
    assert plan.hold is not None and plan.hold.reason == INSUFFICIENT_CAPACITY
    assert plan.hold.message == (
        "the floor of 9 replica(s) does not fit the capacity the candidates report (worker-a=4, worker-b=2); "
        "add clusters or lower spec.placement.split.replicas"
    )


def test_split_by_capacity_over_the_ceiling_is_held() -> None:
    plan = choose_homes(split("SplitByCapacity", replicas=6, maxReplicasPerCluster=3),
                        ready(("worker-a", 8), ("worker-b", 2)), [], 1)
    assert plan.hold is not None and plan.hold.reason == MAX_PER_CLUSTER_EXCEEDED
    assert "puts 5 on worker-a" in plan.hold.message


@pytest.mark.parametrize(
    ("total", "weights", "expected"),
    [
        (0, {"a": 1, "b": 1}, {"a": 0, "b": 0}),
        (5, {"a": 0, "b": 0}, {"a": 0, "b": 0}),
        (3, {"b": 1, "a": 1}, {"a": 2, "b": 1}),  # ties to the first name
        (10, {"a": 1, "b": 2, "c": 3}, {"a": 2, "b": 3, "c": 5}),
        (7, {"a": 3, "b": 3, "c": 1}, {"a": 3, "b": 3, "c": 1}),
    ],
)
def test_apportion(total: int, weights: dict[str, int], expected: dict[str, int]) -> None:
    assert apportion(total, weights) == expected


def test_split_floor() -> None:
    assert split_floor(split(replicas=5), 2) == 5
    assert split_floor(split(), 2) == 2


NAMES = st.lists(st.sampled_from([f"worker-{c}" for c in "abcdefgh"]), min_size=1, max_size=8, unique=True)


@given(
    NAMES,
    st.integers(1, 60),
    st.integers(0, 8),
    st.integers(0, 3),
    st.lists(st.sampled_from([f"worker-{c}" for c in "abcdefgh"]), max_size=3),
)
def test_split_totals_floor_within_ceiling_deterministic(
    names: list[str], floor: int, ceiling: int, least: int, current: list[str]
) -> None:
    spec = split(replicas=floor, maxReplicasPerCluster=ceiling, minReplicasPerCluster=least)
    selection = ready(*((name, None) for name in names))
    plan = choose_homes(spec, selection, current, 1)
    again = choose_homes(spec, ready(*((name, None) for name in reversed(names))), current, 1)
    assert (plan.homes, plan.hold) == (again.homes, again.hold)
    if plan.hold is not None:
        assert plan.homes == tuple(HomePlan(home) for home in current)
        return
    shares = [home.replicas or 0 for home in plan.homes]
    assert sum(shares) == floor
    assert all(share >= 1 for share in shares)
    assert ceiling == 0 or max(shares) <= ceiling
    assert least == 0 or min(shares) >= least
    assert max(shares) - min(shares) <= 1
    assert plan.home_names == sorted(plan.home_names)


@given(
    st.dictionaries(st.sampled_from([f"worker-{c}" for c in "abcdefgh"]), st.integers(0, 20), min_size=1),
    st.integers(1, 80),
    st.integers(0, 10),
)
def test_split_by_capacity_totals_floor_within_capacity_and_ceiling(
    capacities: dict[str, int], floor: int, ceiling: int
) -> None:
    spec = split("SplitByCapacity", replicas=floor, maxReplicasPerCluster=ceiling)
    plan = choose_homes(spec, ready(*capacities.items()), [], 1)
    shuffled = choose_homes(spec, ready(*sorted(capacities.items(), reverse=True)), [], 1)
    assert plan.homes == shuffled.homes and plan.hold == shuffled.hold
    if plan.hold is not None:
        assert plan.homes == ()
        assert floor > sum(capacities.values()) or plan.hold.reason == MAX_PER_CLUSTER_EXCEEDED
        return
    assert sum(home.replicas or 0 for home in plan.homes) == floor
    for home in plan.homes:
        assert 1 <= (home.replicas or 0) <= capacities[home.cluster]
        assert ceiling == 0 or (home.replicas or 0) <= ceiling


def test_ceiling_message_names_only_the_homes_that_would_run_replicas() -> None:
    plan = choose_homes(split("SplitByCapacity", replicas=6, maxReplicasPerCluster=4),
                        ready(("worker-a", 8), ("worker-b", 1), ("worker-c", 0)), [], 1)
    assert plan.hold is not None
    assert plan.hold.message.startswith("the floor of 6 replica(s) across 2 home(s) (worker-a, worker-b) puts 5 on "
                                        "worker-a, above split.maxReplicasPerCluster 4")
