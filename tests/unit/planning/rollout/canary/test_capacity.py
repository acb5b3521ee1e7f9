"""New-revision capacity per step and component (§1.3)."""

from __future__ import annotations

import pytest

from planning.rollout.canary.capacity import new_revision_limit, percent_of, step_count
from planning.rollout.canary.machine import step
from tests.unit.planning.rollout.canary.rows import T0, canary_of, fresh, observe

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "capacity, desired, instances, expected",
    [
        ("25%", 4, 4, 1),
        ("25%", 10, 10, 3),  # 2.5 rounds up
        ("33%", 3, 3, 1),  # 0.99 rounds up
        ("34%", 3, 3, 2),  # 1.02 rounds up
        ("50%", 3, 3, 2),
        ("67%", 3, 3, 3),
        ("1%", 1, 1, 1),
        ("99%", 100, 100, 99),
        ("0%", 5, 5, 0),
        ("100%", 5, 5, 5),
        ("100%", 5, 8, 5),  # autoscaled extras are not part of the count
        (2, 4, 4, 2),
        (6, 4, 4, 4),  # an integer is capped at desired
        (0, 4, 4, 0),
        ("25%", None, 4, 0),  # no minReplicas: a percentage of an unknown count is 0
        ("100%", None, 3, 3),  # ... except 100%: every Instance running now
        (2, None, 3, 2),  # an integer is capped at the Instances running now
        (5, None, 3, 3),
    ],
    ids=lambda v: str(v),
)
def test_step_count_rounds_percentages_up_and_caps_integers(
    capacity: int | str, desired: int | None, instances: int, expected: int
) -> None:
    assert step_count(capacity, desired, instances) == expected


@pytest.mark.parametrize(
    "count, desired, instances, expected",
    [(1, 4, 4, 1), (1, 4, 6, 3), (1, 4, 3, 1), (4, 4, 6, 6), (2, None, 5, 2), (0, 4, 5, 1)],
    ids=[
        "at desired",
        "autoscaled above desired",
        "below desired",
        "last step all",
        "desired unknown",
        "0% step",
    ],
)
def test_instances_an_autoscaler_adds_above_desired_run_the_new_revision(
    count: int, desired: int | None, instances: int, expected: int
) -> None:
    assert new_revision_limit(count, desired, instances) == expected


@pytest.mark.parametrize("text", ["25", "2.5%", "%", "x%"])
def test_a_capacity_that_is_not_a_whole_percentage_is_a_programming_error(text: str) -> None:
    with pytest.raises(ValueError, match="whole percentage"):
        percent_of(text)


@pytest.mark.parametrize(
    "ready, phase",
    [
        ({}, "Pending"),
        ({"engine": 1}, "Pending"),
        ({"decoder": 1}, "Pending"),
        ({"engine": 1, "decoder": 1}, "Paused"),
        ({"engine": 4, "decoder": 2}, "Paused"),
    ],
    ids=["none ready", "engine only", "decoder only", "both", "more than the count"],
)
def test_engine_and_decoder_are_one_unit_the_step_waits_for_both(ready: dict[str, int], phase: str) -> None:
    canary = canary_of({"capacity": "25%", "traffic": 10, "pause": {}}, {"capacity": "100%", "traffic": 100})
    decision = step(canary, fresh(), observe(ready), T0, None)
    assert decision.state.phase == phase
    assert {c: cap.count for c, cap in decision.capacities.items()} == {"engine": 1, "decoder": 1}


def test_without_min_replicas_early_steps_open_with_no_new_instance_and_the_last_moves_all() -> None:
    canary = canary_of({"capacity": "50%", "traffic": 20}, {"capacity": "100%", "traffic": 100, "pause": {}})
    unknown = {"engine": None, "decoder": None}
    decision = step(
        canary, fresh(), observe({}, desired=unknown, instances={"engine": 3, "decoder": 2}), T0, None
    )
    # Step 1's count is 0, so it is ready at once (an Immediate gate): step 2 waits for every Instance.
    assert decision.state.current_step == 1
    assert decision.state.phase == "Pending"
    assert {c: (cap.count, cap.limit) for c, cap in decision.capacities.items()} == {
        "engine": (3, 3),
        "decoder": (2, 2),
    }
