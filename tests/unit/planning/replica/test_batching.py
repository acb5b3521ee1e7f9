"""Pod batching (§14): whole Instances, in order, under a pod budget."""

from __future__ import annotations

import pytest

from planning.replica.batching import Candidate, admit, check_pod_batch_size, deletion_cost
from planning.replica.template import ClusterLifecycle


def c(*pods: int, first: int = 0) -> list[Candidate]:
    """Candidates with indexes first, first+1, ... costing `pods` each."""
    return [Candidate(first + offset, cost) for offset, cost in enumerate(pods)]


@pytest.mark.parametrize(
    ("name", "candidates", "budget", "active", "admitted", "deferred", "oversized"),
    [
        ("all fit", c(1, 1, 1), 100, [], (0, 1, 2), (), False),
        ("exactly the budget", c(2, 2), 4, [], (0, 1), (), False),
        ("stop at the first that does not fit", c(2, 3, 1), 4, [], (0,), (1, 2), False),
        ("a smaller one behind waits too", c(3, 2, 1), 4, [], (0,), (1, 2), False),
        ("whole Instances only", c(8, 8), 10, [], (0,), (1,), False),
        ("oversized goes alone", c(16, 1), 10, [], (0,), (1,), True),
        ("oversized after others waits", c(1, 16), 10, [], (0,), (1,), False),
        ("in-flight work counts first", c(1, 1, 1), 3, c(2, first=9), (0,), (1, 2), False),
        ("in-flight work fills the budget", c(1), 3, c(3, first=9), (), (0,), False),
        ("oversized waits for in-flight work", c(16), 10, c(1, first=9), (), (0,), False),
        ("unbounded", c(500, 500), None, c(100, first=9), (0, 1), (), False),
        ("nothing to do", [], 10, c(4, first=9), (), (), False),
    ],
)
def test_admit(
    name: str,
    candidates: list[Candidate],
    budget: int | None,
    active: list[Candidate],
    admitted: tuple[int, ...],
    deferred: tuple[int, ...],
    oversized: bool,
) -> None:
    wave = admit(candidates, budget, active)
    assert (wave.admitted, wave.deferred, wave.oversized) == (admitted, deferred, oversized), name
    assert wave.active_pod_cost == sum(a.pods for a in active)
    assert wave.active_instances == len(active)
    assert wave.pod_budget == budget


@pytest.mark.parametrize(("pods", "cost"), [(0, 1), (1, 1), (8, 8)])
def test_deletion_cost_is_pods_or_one_for_cleanup(pods: int, cost: int) -> None:
    assert deletion_cost(pods) == cost


def test_chart_defaults() -> None:
    cluster = ClusterLifecycle()
    assert cluster.scale_up_pod_batch_size == 100
    assert cluster.scale_down_pod_batch_size == 100
    assert cluster.scale_down_requeue_interval_seconds == 5.0
    assert ClusterLifecycle(scale_down_pod_batch_size=None).scale_down_pod_batch_size is None


@pytest.mark.parametrize(
    ("field", "key", "value"),
    [
        ("scale_up_pod_batch_size", "lifecycle.scaleUpPodBatchSize", 0),
        ("scale_down_pod_batch_size", "lifecycle.scaleDownPodBatchSize", -3),
    ],
)
def test_zero_or_negative_batch_size_is_refused_by_name(field: str, key: str, value: int) -> None:
    with pytest.raises(ValueError) as refused:
        ClusterLifecycle.model_validate({field: value})
    assert (
        f"{key} must be a positive number of pods, got {value}; set it to at least 1 (the chart uses 100) "
        "or leave it unset for no limit"
    ) in str(refused.value)


def test_check_accepts_positive_and_unset() -> None:
    check_pod_batch_size("lifecycle.scaleUpPodBatchSize", 1)
    check_pod_batch_size("lifecycle.scaleUpPodBatchSize", None)
