"""Surge-slot accounting per Instance (reference §7) and facts from Instance reports."""

from __future__ import annotations

from datetime import timedelta

import pytest

from models.instance import InstanceOperation, InstancePhase, InstanceStatus, UpdateStrategyType
from models.pods import PodSummary
from planning.replica.budget import CHART_DEFAULT_POLICY, UpdatePolicy, update_policy
from planning.replica.facts import facts_from_status, surge_slots_from_pods
from tests.unit.planning.replica.rows import NEW, NOW, OLD

pytestmark = pytest.mark.unit


def pod(name: str, terminating_for: float | None = None, grace: int = 30) -> PodSummary:
    if terminating_for is None:
        return PodSummary(name=name, uid=name)
    requested = NOW - timedelta(seconds=terminating_for)
    return PodSummary(
        name=name,
        uid=name,
        terminating=True,
        deletion_timestamp=requested + timedelta(seconds=grace),
        deletion_grace_seconds=grace,
    )


def test_no_extra_pods_no_slots() -> None:
    assert surge_slots_from_pods(1, [pod("a")], NOW, update_in_flight=False).slots == 0


def test_surging_single_pod_holds_one_slot() -> None:
    slots = surge_slots_from_pods(1, [pod("x-default-0"), pod("x-default-1")], NOW, update_in_flight=True)
    assert slots.slots == 1
    assert slots.explanation == ""


def test_terminating_pod_counts_until_its_grace_elapses() -> None:
    slots = surge_slots_from_pods(1, [pod("x-default-1"), pod("x-default-0", terminating_for=10)], NOW, False)
    assert slots.slots == 1
    assert slots.releases_at == NOW + timedelta(seconds=20)
    assert slots.explanation == (
        "Terminating pod x-default-0 still counts against the surge budget until its deletion grace elapses"
    )


def test_terminating_pod_past_its_grace_stops_counting() -> None:
    slots = surge_slots_from_pods(1, [pod("x-default-1"), pod("x-default-0", terminating_for=31)], NOW, False)
    assert slots.slots == 0


def test_live_leftover_holds_a_slot_until_replaced() -> None:
    slots = surge_slots_from_pods(1, [pod("x-default-0"), pod("x-default-1")], NOW, update_in_flight=False)
    assert slots.slots == 1
    assert (
        slots.explanation
        == "extra pod x-default-1 holds a surge slot until a start on its Instance replaces it"
    )


def test_leftover_is_the_pod_of_another_revision() -> None:
    pods = [
        PodSummary(name="x-default-0", uid="a", revision="new"),
        PodSummary(name="x-default-1", uid="b", revision="old"),
    ]
    slots = surge_slots_from_pods(1, pods, NOW, update_in_flight=False, running_revision="old")
    assert slots.explanation.startswith("extra pod x-default-0 holds a surge slot")


def test_eight_draining_pods_of_an_eight_pod_gang_hold_one_slot() -> None:
    live = [pod(f"new-{n}") for n in range(8)]
    draining = [pod(f"old-{n}", terminating_for=1) for n in range(8)]
    assert surge_slots_from_pods(8, live + draining, NOW, False).slots == 1


def test_nine_extra_pods_of_an_eight_pod_gang_hold_two_slots() -> None:
    pods = [pod(f"p-{n}") for n in range(17)]
    assert surge_slots_from_pods(8, pods, NOW, False).slots == 2


def test_facts_from_status() -> None:
    status = InstanceStatus(
        namespace="prod",
        isvc="chat",
        component="engine",
        index=2,
        phase=InstancePhase.UPDATING,
        incarnation=1,
        running_revision=OLD,
        target_revision=NEW,
        desired_pods=2,
        total_pods=4,
        ready=True,
        serving=True,
        ready_since=NOW,
        operation=InstanceOperation(
            id="op", type="Update", step="Surge", started_at=NOW, strategy=UpdateStrategyType.SURGE_THEN_DRAIN
        ),
    )
    facts = facts_from_status(status, replaces=None)
    assert facts.surge.slots == 1
    assert facts.surge_slots_held() == 1
    assert facts.operation == "Update"
    assert facts.serving_since == NOW
    assert facts.has_pods


def test_admitted_surge_update_holds_a_slot_before_pods_show() -> None:
    status = InstanceStatus(
        namespace="prod",
        isvc="chat",
        component="engine",
        index=0,
        phase=InstancePhase.UPDATING,
        incarnation=1,
        running_revision=OLD,
        target_revision=NEW,
        desired_pods=1,
        total_pods=1,
        operation=InstanceOperation(
            id="op", type="Update", step="Surge", started_at=NOW, strategy=UpdateStrategyType.SURGE_THEN_DRAIN
        ),
    )
    assert facts_from_status(status).surge_slots_held() == 1


def test_update_policy_precedence() -> None:
    from models.inferenceservice import LifecycleSpec

    lifecycle = LifecycleSpec.model_validate(
        {"updateStrategy": {"type": "RecreatePod", "rollingUpdate": {"partition": 2}}, "minReadySeconds": 30}
    )
    policy = update_policy(lifecycle, CHART_DEFAULT_POLICY)
    assert policy == UpdatePolicy(
        strategy=UpdateStrategyType.RECREATE_POD,
        max_surge="25%",
        max_unavailable="25%",
        partition=2,
        min_ready_seconds=30.0,
    )


def test_chart_max_unavailable_does_not_apply_to_surge_then_drain() -> None:
    policy = update_policy(None, CHART_DEFAULT_POLICY)
    assert policy.strategy == UpdateStrategyType.SURGE_THEN_DRAIN
    assert (policy.max_surge, policy.max_unavailable) == ("25%", None)


def test_no_cluster_default_means_no_budget() -> None:
    policy = update_policy(None)
    assert (policy.max_surge, policy.max_unavailable) == (None, None)


def test_user_max_unavailable_kept_for_surge_then_drain() -> None:
    from models.inferenceservice import LifecycleSpec

    lifecycle = LifecycleSpec.model_validate({"updateStrategy": {"rollingUpdate": {"maxUnavailable": 1}}})
    assert update_policy(lifecycle, CHART_DEFAULT_POLICY).max_unavailable == 1


def test_bad_budget_names_the_field() -> None:
    from planning.replica.budget import BudgetError, surge_budget

    with pytest.raises(BudgetError, match="maxSurge must be a whole number or a percentage"):
        surge_budget(UpdatePolicy(max_surge="many"), 3)
