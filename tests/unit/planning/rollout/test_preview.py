"""The plan a change would run, as the `preview` query shows it before `apply`."""

from __future__ import annotations

from typing import Any

import pytest

from models.inferenceservice import RolloutSpec
from planning.rollout.preview import preview

pytestmark = pytest.mark.unit


def spec(rollout: dict[str, Any]) -> RolloutSpec:
    return RolloutSpec.model_validate(rollout)


def test_a_blue_green_group_moves_in_quarters_and_the_router_alone() -> None:
    shown = preview(
        spec({"groups": [{"components": ["engine", "decoder"]}]}),
        {"engine": "e2", "decoder": "d2", "router": "r2"},
        {"engine": 4, "decoder": 2},
        {},
    )
    (group,) = shown.groups
    assert group.strategy == "BlueGreen" and group.moves == ("engine", "decoder")
    assert group.batches == {"engine": [1, 2, 3, 4], "decoder": [1, 2]}
    assert shown.stages == (("engine", "decoder"),) and shown.independent == ("router",)


def test_a_rolling_update_moves_by_its_budget_and_meets_the_ratio_gate() -> None:
    shown = preview(
        spec({"groups": [{"components": ["engine", "decoder"], "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}, "maintainRatio": {"tolerance": 25}}]}),
        {"engine": "e2", "decoder": "d2"},
        {"engine": 4, "decoder": 2},
        {"engine": True, "decoder": False},
    )
    (group,) = shown.groups
    # The decoder updates by RecreatePod: it reads maxUnavailable 0 and would never move.
    assert group.batches == {"engine": [1, 2, 3, 4], "decoder": []}
    assert group.gates == ("Budget", "Ratio")


def test_a_sequence_is_one_component_per_stage_with_the_soak() -> None:
    shown = preview(
        spec({"groups": [{"components": ["decoder"], "soak": "10m"}, {"components": ["engine"]}]}),
        {"engine": "e2", "decoder": "d2"},
        {"engine": 1, "decoder": 1},
        {},
    )
    assert shown.stages == (("decoder",), ("engine",))
    assert [g.gates for g in shown.groups] == [("Budget",), ("Budget", "Sequential")]
    assert shown.notes == ["each component after the first waits 10m0s after the one before it finishes"]


def test_a_change_that_leaves_a_sequences_component_alone_skips_it() -> None:
    shown = preview(
        spec({"groups": [{"components": ["decoder"], "soak": "10m"}, {"components": ["engine"]}]}),
        {"engine": "e2"},
        {"engine": 1},
        {},
    )
    assert shown.stages == (("engine",),) and shown.groups[0].moves == ()


def test_a_pairing_change_meets_the_pairing_gate() -> None:
    shown = preview(
        spec({"pairingProtocol": "kv-v2", "groups": [{"components": ["engine", "decoder"], "blueGreen": {}}]}),
        {"engine": "e2", "decoder": "d2"},
        {"engine": 1, "decoder": 1},
        {},
        pairing_change=True,
    )
    assert "Pairing" in shown.groups[0].gates


def test_a_plan_that_does_not_resolve_is_shown_parked() -> None:
    shown = preview(spec({"groups": [{"components": ["engine"], "policyRef": {"name": "p"}}]}), {"engine": "e2"}, {}, {})
    assert shown.parked is not None and shown.parked.startswith("PolicyNotFound")
