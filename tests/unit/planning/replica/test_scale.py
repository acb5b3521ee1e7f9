"""Instance count, lowest free index and scale-down keep order (spec 001, reference §9)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from models.instance import InstancePhase
from planning.replica.facts import InstanceFacts
from planning.replica.scale import (
    counted_instances,
    desired_replicas,
    keep_order,
    lowest_free_indexes,
    plan_scale,
)
from tests.unit.planning.replica.rows import creating, deleting, failed, ready

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("name", "minimum", "maximum", "autoscaler", "transient", "desired", "source", "clamped_from"),
    [
        ("min unset defaults to 1", None, None, None, None, 1, "minReplicas", None),
        ("min 2 max 2", 2, 2, None, None, 2, "minReplicas", None),
        ("min 0 means none", 0, 3, None, None, 0, "minReplicas", None),
        ("autoscaler within bounds", 1, 4, 3, None, 3, "autoscaler", None),
        ("autoscaler above max clamps", 1, 4, 9, None, 4, "autoscaler", 9),
        ("autoscaler below min clamps", 2, 4, 1, None, 2, "autoscaler", 1),
        ("transient wins over autoscaler", 1, 4, 3, 2, 2, "scale", None),
        ("transient above max clamps", 1, 3, None, 5, 3, "scale", 5),
        ("transient below min clamps", 2, 5, None, 0, 2, "scale", 0),
        ("max unset means no cap", 1, None, None, 50, 50, "scale", None),
        ("max 0 means no cap", 1, 0, None, 7, 7, "scale", None),
        ("max below min is raised to min", 3, 2, None, 1, 3, "scale", 1),
    ],
)
def test_desired_replicas(
    name: str,
    minimum: int | None,
    maximum: int | None,
    autoscaler: int | None,
    transient: int | None,
    desired: int,
    source: str,
    clamped_from: int | None,
) -> None:
    count = desired_replicas(minimum, maximum, autoscaler, transient)
    assert (count.desired, count.source, count.clamped_from) == (desired, source, clamped_from), name


def test_clamp_note_explains_the_bounds() -> None:
    note = desired_replicas(1, 3, None, 5).note
    assert note == "3 Instance(s): scale asked for 5, clamped to [minReplicas, maxReplicas]"


@pytest.mark.parametrize(
    ("used", "count", "expected"),
    [
        ([], 2, [0, 1]),
        ([0, 1, 2], 1, [3]),
        ([0, 2, 5], 3, [1, 3, 4]),
        ([1], 1, [0]),
        ([0, 1], 0, []),
    ],
)
def test_lowest_free_indexes(used: list[int], count: int, expected: list[int]) -> None:
    assert lowest_free_indexes(used, count) == expected


def test_scale_up_fills_gaps_with_lowest_indexes() -> None:
    plan = plan_scale(4, [ready(0), ready(2)])
    assert plan.create == (1, 3)
    assert plan.remove == ()


def test_scale_up_does_not_reuse_a_deleting_index() -> None:
    plan = plan_scale(2, [ready(0), deleting(1)])
    assert plan.create == (2,)


def test_scale_up_skips_reserved_indexes() -> None:
    plan = plan_scale(2, [ready(0)], reserved_indexes=[1])
    assert plan.create == (2,)


def test_pause_holds_new_instances() -> None:
    plan = plan_scale(3, [ready(0)], paused=True)
    assert plan.create == ()
    assert plan.held_by_pause == 2


def test_pause_does_not_hold_scale_down() -> None:
    plan = plan_scale(1, [ready(0), ready(1)], paused=True)
    assert plan.remove == (1,)


def test_scale_down_removes_highest_ready_index_first() -> None:
    plan = plan_scale(1, [ready(0), ready(1), ready(2)])
    assert plan.remove == (2, 1)


def test_scale_down_removes_not_ready_before_ready() -> None:
    plan = plan_scale(2, [ready(0), failed(1), ready(2)])
    assert plan.remove == (1,)


def test_scale_down_removes_creating_before_ready_even_with_lower_index() -> None:
    plan = plan_scale(1, [creating(0), ready(3)])
    assert plan.remove == (0,)


def test_scale_down_keeps_handover_pairs_first() -> None:
    source = InstanceFacts(index=2, phase=InstancePhase.MIGRATING, running_revision="r", serving=True)
    replacement = creating(5, replaces=2)
    instances = [ready(0), ready(1), source, replacement]
    assert keep_order(instances) == [2, 5, 0, 1]
    plan = plan_scale(2, instances)
    assert plan.remove == (1,)


def test_scale_down_removes_a_handover_pair_together() -> None:
    source = InstanceFacts(index=0, phase=InstancePhase.MIGRATING, running_revision="r")
    replacement = creating(3, replaces=0)
    plan = plan_scale(0, [source, replacement])
    assert set(plan.remove) == {0, 3}


def test_handover_pair_counts_once() -> None:
    source = InstanceFacts(index=0, phase=InstancePhase.MIGRATING, running_revision="r")
    assert counted_instances([source, creating(3, replaces=0), ready(1)]) == 2
    assert plan_scale(2, [source, creating(3, replaces=0), ready(1)]).idle


def test_replacement_counts_alone_once_its_source_is_deleting() -> None:
    assert counted_instances([deleting(0), ready(3, replaces=0)]) == 1


def test_deleting_instances_do_not_count() -> None:
    plan = plan_scale(2, [ready(0), deleting(1)])
    assert plan.counted == 1
    assert plan.create == (2,)


def test_keep_order_ready_then_others_by_index() -> None:
    assert keep_order([failed(0), ready(4), creating(1), ready(2)]) == [2, 4, 0, 1]


rows = st.lists(
    st.tuples(st.integers(0, 30), st.sampled_from(["ready", "failed", "creating", "deleting"])),
    unique_by=lambda row: row[0],
    max_size=12,
)


def _build(spec: list[tuple[int, str]]) -> list[InstanceFacts]:
    makers = {"ready": ready, "failed": failed, "creating": creating, "deleting": deleting}
    return [makers[kind](index) for index, kind in spec]


@given(rows, st.integers(0, 15))
def test_scale_plan_reaches_desired_and_never_touches_deleting(
    spec: list[tuple[int, str]], desired: int
) -> None:
    instances = _build(spec)
    plan = plan_scale(desired, instances)
    live = {instance.index for instance in instances if not instance.deleting}
    used = {instance.index for instance in instances}
    assert not set(plan.create) & used
    assert set(plan.remove) <= live
    assert len(live) + len(plan.create) - len(plan.remove) == desired
    if plan.create:
        free = sorted(set(range(max(used | set(plan.create)) + 1)) - used)
        assert list(plan.create) == free[: len(plan.create)]


@given(rows, st.integers(0, 15))
def test_scale_down_never_removes_ready_while_a_not_ready_stays(
    spec: list[tuple[int, str]], desired: int
) -> None:
    instances = _build(spec)
    plan = plan_scale(desired, instances)
    removed = set(plan.remove)
    kept = [instance for instance in instances if not instance.deleting and instance.index not in removed]
    removed_ready = [
        instance for instance in instances if instance.index in removed and instance.phase == "Ready"
    ]
    if removed_ready:
        assert all(instance.phase == "Ready" for instance in kept)
        assert (
            max(instance.index for instance in kept) < min(i.index for i in removed_ready) if kept else True
        )
