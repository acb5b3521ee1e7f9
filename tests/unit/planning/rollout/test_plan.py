"""The plan a rollout run pins: groups, progressions, digests, sequences and parking."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from models.inferenceservice import RolloutSpec
from planning.rollout.plan import Parked, RolloutPlan, group_digest, plan_digest, resolve_plan

pytestmark = pytest.mark.unit

BLUE_GREEN_DIGEST = "rp1:cca45ec1fb0f"


def plan_of(rollout: dict[str, Any]) -> RolloutPlan:
    plan = resolve_plan(RolloutSpec.model_validate(rollout))
    assert isinstance(plan, RolloutPlan), plan
    return plan


@pytest.mark.parametrize(
    "group",
    [{"components": ["engine", "decoder"]}, {"components": ["engine", "decoder"], "blueGreen": {}}],
    ids=["no progression", "blueGreen: {}"],
)
def test_a_blue_green_group_has_the_reference_digest(group: dict[str, Any]) -> None:
    plan = plan_of({"groups": [group]})
    assert plan.groups[0].digest == BLUE_GREEN_DIGEST
    assert plan.groups[0].progression == "blueGreen"
    expected = "rp1:" + hashlib.sha256(BLUE_GREEN_DIGEST.encode()).hexdigest()[:12]
    assert plan.digest == expected == plan_digest([BLUE_GREEN_DIGEST])


def test_plan_digest_joins_the_group_digests_in_order_with_a_bar() -> None:
    plan = plan_of({"groups": [{"components": ["decoder"], "soak": "10m"}, {"components": ["engine"]}]})
    joined = f"{BLUE_GREEN_DIGEST}|{BLUE_GREEN_DIGEST}"
    assert plan.digest == "rp1:" + hashlib.sha256(joined.encode()).hexdigest()[:12]


@pytest.mark.parametrize(
    "a, b, same",
    [
        ({"rollingUpdate": {}}, {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}, True),
        ({"rollingUpdate": {"maxSurge": 1}}, {"rollingUpdate": {"maxSurge": 2}}, False),
        ({"blueGreen": {}}, {"rollingUpdate": {}}, False),
        # A group's digest covers its progression only: soak and ratio are topology (§4).
        ({"blueGreen": {}, "soak": "10m"}, {"blueGreen": {}}, True),
    ],
)
def test_group_digest_covers_the_progression_with_its_defaults(
    a: dict[str, Any], b: dict[str, Any], same: bool
) -> None:
    first = RolloutSpec.model_validate({"groups": [{"components": ["engine"], **a}]}).groups
    second = RolloutSpec.model_validate({"groups": [{"components": ["engine"], **b}]}).groups
    assert first is not None and second is not None
    assert (group_digest(first[0]) == group_digest(second[0])) is same


def test_rolling_update_group_pins_its_budgets_and_ratio_tolerance() -> None:
    plan = plan_of(
        {
            "groups": [
                {
                    "components": ["engine", "decoder"],
                    "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
                    "maintainRatio": {"tolerance": 25},
                }
            ]
        }
    )
    (group,) = plan.groups
    assert (group.progression, group.max_surge, group.max_unavailable, group.ratio_tolerance) == (
        "rollingUpdate", 1, 0, 25,
    )
    assert not plan.sequence


@pytest.mark.parametrize(
    "ratio, tolerance",
    [(None, None), ({}, 5), ({"tolerance": 0}, 0), ({"tolerance": 100}, 100)],
)
def test_maintain_ratio_tolerance_defaults_to_five(ratio: dict[str, Any] | None, tolerance: int | None) -> None:
    group: dict[str, Any] = {"components": ["engine", "decoder"]}
    if ratio is not None:
        group["maintainRatio"] = ratio
    assert plan_of({"groups": [group]}).groups[0].ratio_tolerance == tolerance


@pytest.mark.parametrize(
    "groups, sequence, soak",
    [
        ([{"components": ["decoder"], "soak": "10m"}, {"components": ["engine"]}], True, 600.0),
        ([{"components": ["decoder"], "soak": "1m"}, {"components": ["engine"], "soak": "5m"}, {"components": ["router"]}], True, 300.0),
        # The last group's soak never counts: nothing comes after it.
        ([{"components": ["decoder"]}, {"components": ["engine"], "soak": "1h"}], True, 0.0),
        ([{"components": ["engine", "decoder"]}], False, 0.0),
        ([{"components": ["decoder"]}, {"components": ["engine"], "rollingUpdate": {}}], False, 0.0),
    ],
    ids=["decoder then engine", "longest soak", "last soak ignored", "one group", "not all blue-green"],
)
def test_sequences_and_their_soak(groups: list[dict[str, Any]], sequence: bool, soak: float) -> None:
    plan = plan_of({"groups": groups, "groupOrdering": "Sequential" if sequence else "Concurrent"})
    assert (plan.sequence, plan.sequence_soak_seconds) == (sequence, soak)


def test_no_groups_no_plan() -> None:
    assert resolve_plan(None) is None
    assert resolve_plan(RolloutSpec.model_validate({"pairingProtocol": "kv-v1"})) is None


def test_a_group_that_only_names_a_policy_parks_and_never_falls_back_to_blue_green() -> None:
    parked = resolve_plan(
        RolloutSpec.model_validate({"groups": [{"components": ["engine"], "policyRef": {"name": "safe"}}]})
    )
    assert isinstance(parked, Parked)
    assert parked.reason == "PolicyNotFound" and '"safe"' in parked.message


def test_group_of_finds_the_components_group() -> None:
    plan = plan_of({"groups": [{"components": ["engine", "decoder"]}], "pairingProtocol": "kv-v2"})
    assert plan.group_of("decoder") is plan.groups[0] and plan.group_of("router") is None
    assert plan.grouped == ("engine", "decoder") and plan.pairing_protocol == "kv-v2"
