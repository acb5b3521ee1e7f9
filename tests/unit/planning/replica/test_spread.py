"""Spread constraint rendering (spec 003 "How the spread works")."""

from __future__ import annotations

from typing import Any

import pytest

from models.inferenceservice import ComponentSpec
from planning.replica.spread import SpreadSettings, spread_constraint, spread_summary, with_spread

pytestmark = pytest.mark.unit

ZONE = "topology.kubernetes.io/zone"
RACK = "topology.kubernetes.io/rack"
CLIQUE = "nvidia.com/gpu.clique"


@pytest.mark.parametrize(
    ("name", "settings", "key", "when"),
    [
        ("required on spread key", SpreadSettings("Required", ZONE, None), ZONE, "DoNotSchedule"),
        ("preferred on spread key", SpreadSettings("Preferred", ZONE, None), ZONE, "ScheduleAnyway"),
        ("falls back to topologyKey", SpreadSettings("Required", None, CLIQUE), CLIQUE, "DoNotSchedule"),
        ("spread key wins over topologyKey", SpreadSettings("Required", ZONE, CLIQUE), ZONE, "DoNotSchedule"),
        ("no key no spread", SpreadSettings("Required", None, None), None, None),
        ("empty key no spread", SpreadSettings("Preferred", "", ""), None, None),
        ("unset spread ignores keys", SpreadSettings(None, ZONE, CLIQUE), None, None),
    ],
)
def test_constraint_table(name: str, settings: SpreadSettings, key: str | None, when: str | None) -> None:
    constraint = spread_constraint(settings, "chat", "engine")
    if key is None:
        assert constraint is None, name
        return
    assert constraint is not None, name
    assert constraint["topologyKey"] == key
    assert constraint["whenUnsatisfiable"] == when
    assert constraint["maxSkew"] == 1
    assert "nodeAffinityPolicy" not in constraint and "nodeTaintsPolicy" not in constraint


def test_selector_counts_this_components_instances_only() -> None:
    constraint = spread_constraint(SpreadSettings("Required", ZONE), "chat", "decoder")
    assert constraint is not None
    assert constraint["labelSelector"] == {
        "matchLabels": {"ome.io/inferenceservice": "chat", "ome.io/component": "decoder"},
        "matchExpressions": [{"key": "ome.io/role", "operator": "In", "values": ["leader", "default"]}],
    }


def test_engine_and_decoder_select_separately() -> None:
    engine = spread_constraint(SpreadSettings("Required", ZONE), "chat", "engine")
    decoder = spread_constraint(SpreadSettings("Required", ZONE), "chat", "decoder")
    assert engine is not None and decoder is not None
    assert engine["labelSelector"] != decoder["labelSelector"]


def test_with_spread_appends_to_other_keys() -> None:
    existing = {"topologyKey": RACK, "maxSkew": 2, "whenUnsatisfiable": "ScheduleAnyway"}
    pod: dict[str, Any] = {"containers": [], "topologySpreadConstraints": [existing]}
    constraint = spread_constraint(SpreadSettings("Required", ZONE), "chat", "engine")
    result = with_spread(pod, constraint)
    assert result["topologySpreadConstraints"] == [existing, constraint]
    assert pod["topologySpreadConstraints"] == [existing], "input must not change"


def test_with_spread_keeps_a_user_constraint_on_the_same_key() -> None:
    users = {"topologyKey": ZONE, "maxSkew": 3, "whenUnsatisfiable": "ScheduleAnyway"}
    pod: dict[str, Any] = {"containers": [], "topologySpreadConstraints": [users]}
    result = with_spread(pod, spread_constraint(SpreadSettings("Required", ZONE), "chat", "engine"))
    assert result["topologySpreadConstraints"] == [users]


def test_with_spread_none_is_unchanged() -> None:
    assert with_spread({"containers": []}, None) == {"containers": []}


def test_settings_from_component() -> None:
    component = ComponentSpec.model_validate(
        {"topologySpread": "Preferred", "topologySpreadKey": ZONE, "topologyKey": CLIQUE}
    )
    assert SpreadSettings.of(component) == SpreadSettings("Preferred", ZONE, CLIQUE)


@pytest.mark.parametrize(
    ("settings", "summary"),
    [
        (SpreadSettings(None, ZONE), "no topology spread (topologySpread is unset)"),
        (SpreadSettings("Required"), "no topology spread (neither topologySpreadKey nor topologyKey is set)"),
        (SpreadSettings("Required", ZONE), f"Instances spread over {ZONE} (Required: DoNotSchedule)"),
    ],
)
def test_summary(settings: SpreadSettings, summary: str) -> None:
    assert spread_summary(settings) == summary
