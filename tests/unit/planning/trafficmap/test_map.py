"""The map's table and conditions (`planning.trafficmap.map.build`), and every example and
troubleshooting case of the capacity factors page (spec 000) as a test."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from models.trafficmap import TrafficMapSpec
from planning.trafficmap import texts
from planning.trafficmap.capacity import Reading, Readings
from planning.trafficmap.drains import Drain
from planning.trafficmap.map import build
from planning.trafficmap.objects import published_condition
from planning.trafficmap.policy import resolve
from planning.trafficmap.probes import ProbeState
from planning.trafficmap.state import HomeReport, HomesReport, Publication
from tests.unit.planning.trafficmap.routing_blocks import CAPACITY, NOW, PROBE

pytestmark = pytest.mark.unit



def report(homes: dict[str, tuple[int, int]], routing: dict[str, Any] | None = None, generation: int = 6,
           annotations: dict[str, str] | None = None) -> HomesReport:
    return HomesReport(
        generation=generation, mode="All", routing=routing or {}, annotations=annotations or {}, placed=bool(homes),
        homes=[HomeReport(cluster=c, endpoint=f"http://{c}.example/prod/chat", allocated=a, ready=r)
               for c, (a, r) in homes.items()],
    )


def built(homes: dict[str, tuple[int, int]], routing: dict[str, Any] | None = None, *,
          drains: dict[str, Drain] | None = None, probes: dict[str, ProbeState] | None = None,
          readings: dict[str, Readings] | None = None, chart_probe: dict[str, Any] | None = None,
          chart_capacity: dict[str, Any] | None = None) -> tuple[TrafficMapSpec, dict[str, tuple[str, str, str]]]:
    r = report(homes, routing)
    resolved = resolve(r.routing, r.annotations, chart_probe, chart_capacity)
    assert resolved.errors == []
    result = build("chat", r, resolved, drains or {}, probes or {}, {}, readings or {}, NOW)
    return result.spec, {c.type: (c.status, c.reason, c.message) for c in result.conditions}


def step2(spec: TrafficMapSpec) -> list[str]:
    """The page's Step 2 jsonpath: `cluster allocated= ready= factor= weight=` per entry, with
    zero counts and an unset factor printed empty as kubectl prints an omitted field."""
    lines = []
    for entry in spec.model_dump(by_alias=True, exclude_none=True, mode="json")["entries"]:
        capacity = entry["capacity"]
        lines.append(f"{entry['cluster']} allocated={capacity.get('allocated', '')} ready={capacity.get('ready', '')} "
                     f"factor={capacity.get('factor', '')} weight={entry['weight']}")
    return lines


# --- spec 000: how factors change the weights ------------------------------------------------


def test_step_2_example_four_on_worker_a_two_on_worker_b_with_factor_3() -> None:
    spec, _ = built({"worker-a": (4, 4), "worker-b": (2, 2)}, {"capacityFactors": {"worker-b": "3"}})
    assert step2(spec) == [
        "worker-a allocated=4 ready=4 factor= weight=2",
        "worker-b allocated=2 ready=2 factor=3 weight=3",
    ]


def test_without_the_factor_the_weights_would_be_2_and_1() -> None:
    spec, _ = built({"worker-a": (4, 4), "worker-b": (2, 2)})
    assert [e.weight for e in spec.entries] == [2, 1]


def test_only_the_ratios_between_factors_matter() -> None:
    spec, _ = built({"worker-a": (4, 4), "worker-b": (2, 2)}, {"capacityFactors": {"worker-a": "2", "worker-b": "6"}})
    assert [e.weight for e in spec.entries] == [2, 3]


def test_a_factor_shows_in_canonical_form() -> None:
    spec, _ = built({"worker-a": (2, 2), "worker-b": (2, 2)}, {"capacityFactors": {"worker-b": "1.5"}})
    assert spec.entries[1].capacity.factor == "1500m" and [e.weight for e in spec.entries] == [2, 3]
    assert step2(spec)[1] == "worker-b allocated=2 ready=2 factor=1500m weight=3"


def test_a_slower_cluster_gets_a_factor_below_1() -> None:
    spec, _ = built({"worker-a": (2, 2), "worker-b": (2, 2)}, {"capacityFactors": {"worker-b": "0.5"}})
    assert [e.weight for e in spec.entries] == [2, 1] and spec.entries[1].capacity.factor == "500m"


@pytest.mark.parametrize(
    ("homes", "weights"),
    [
        pytest.param({"worker-a": (4, 4), "worker-b": (2, 2)}, [2, 3], id="as the example"),
        pytest.param({"worker-a": (4, 4), "worker-b": (4, 4)}, [1, 3], id="worker-b scales to 4"),
        pytest.param({"worker-a": (4, 4), "worker-b": (2, 1)}, [4, 3], id="a worker-b replica stops being ready"),
        pytest.param({"worker-a": (4, 4), "worker-b": (0, 0)}, [1, 0], id="worker-b has nothing ready"),
    ],
)
def test_a_factor_counts_per_replica(homes: dict[str, tuple[int, int]], weights: list[int]) -> None:
    spec, _ = built(homes, {"capacityFactors": {"worker-b": "3"}})
    assert [e.weight for e in spec.entries] == weights


def test_empty_counts_mean_zero() -> None:
    spec, _ = built({"worker-a": (4, 4), "worker-b": (0, 0)})
    assert step2(spec)[1] == "worker-b allocated= ready= factor= weight=0"


def test_a_factor_naming_no_home_has_no_effect() -> None:
    spec, _ = built({"worker-a": (4, 4), "worker-b": (2, 2)}, {"capacityFactors": {"worker-c": "3"}})
    assert [(e.capacity.factor, e.weight) for e in spec.entries] == [(None, 2), (None, 1)]


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        pytest.param("drain", [2, 0], id="a drain holds it at 0"),
        pytest.param("probe", [1, 0], id="a probe gate"),
        pytest.param("capacity", [4, 3], id="a capacity ceiling of 1"),
    ],
)
def test_polls_probes_and_drains_lower_a_weight_whatever_its_factor(kind: str, expected: list[int]) -> None:
    homes = {"worker-a": (4, 4), "worker-b": (2, 2)}
    routing = {"capacityFactors": {"worker-b": "3"}}
    if kind == "drain":
        spec, _ = built(homes, routing, drains={"maint": Drain(cluster="worker-b")})
    elif kind == "probe":
        spec, _ = built(homes, routing, probes={"worker-b": ProbeState("Failing", "HTTP 503", True, 2)},
                        chart_probe=PROBE)
    else:
        spec, _ = built(homes, routing, readings={"worker-b": Readings((Reading(1, NOW),), None, True)},
                        chart_capacity=CAPACITY)
    assert [e.weight for e in spec.entries] == expected


def test_zero_factor_troubleshooting_published_false_invalid_owner() -> None:
    error = 'validate routing policy: spec.routing.capacityFactors["worker-b"] must be positive, got "0"'
    assert resolve({"capacityFactors": {"worker-b": "0"}}, {}, None, None).errors == [error]
    assert published_condition(Publication(reason="Published", published=True), [error]) == (
        "False", texts.INVALID_OWNER, error
    )


# --- entries and conditions --------------------------------------------------------------------


def test_entries_carry_probe_capacity_and_drains() -> None:
    spec, conditions = built(
        {"worker-a": (4, 4), "worker-b": (2, 2)},
        drains={"maint": Drain(cluster="worker-a")},
        probes={"worker-b": ProbeState("Passing", "HTTP 200", False, 0, 3)},
        readings={"worker-a": Readings((Reading(3, NOW - timedelta(seconds=5)),), None, True)},
        chart_probe=PROBE, chart_capacity=CAPACITY,
    )
    a, b = spec.entries
    assert (a.capacity.allocated, a.capacity.source, a.capacity.reported) == (3, "Endpoint", 3)
    assert a.drain_refs == ["maint"] and a.weight == 0 and a.healthy
    assert b.capacity.fallback_reason == "no capacity report yet" and b.capacity.source == "ControlPlane"
    assert b.probe is not None and b.probe.result == "Passing" and b.weight == 2
    assert conditions[texts.OVERRIDE_ACTIVE][:2] == ("True", "OverridesApplied")
    assert conditions[texts.CAPACITY_FALLBACK] == (
        "True", "EndpointCapacityUnavailable",
        "1 of 2 home(s) are using control-plane capacity; inspect spec.entries[].capacity.fallbackReason",
    )


@pytest.mark.parametrize(
    ("homes", "reason"),
    [
        pytest.param({}, "NotPlaced", id="no home"),
        pytest.param({"worker-a": (2, 0)}, "AllHomesUnready", id="nothing ready"),
        pytest.param({"worker-a": (2, 2)}, "Routable", id="routable"),
    ],
)
def test_routable_condition(homes: dict[str, tuple[int, int]], reason: str) -> None:
    _, conditions = built(homes)
    assert conditions[texts.ROUTABLE][1] == reason


def test_capacity_condition_without_polling() -> None:
    _, conditions = built({"worker-a": (2, 2)})
    assert conditions[texts.CAPACITY_FALLBACK][:2] == ("False", "CapacityPollingDisabled")


def test_a_home_without_endpoint_is_no_entry() -> None:
    r = HomesReport(generation=1, homes=[HomeReport(cluster="worker-a", allocated=2, ready=2)], placed=True)
    result = build("chat", r, resolve({}, {}, None, None), {}, {}, {}, {}, NOW)
    assert result.spec.entries == []
    assert result.conditions[0].reason == "NoAddressableHome"
