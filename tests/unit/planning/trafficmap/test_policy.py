"""The routing policy a map runs with and the errors that stop it (§17-§20), and the chart's
blocks checked at worker start (§18's `invalid multi-cluster configuration`)."""

from __future__ import annotations

from typing import Any

import pytest

from planning.trafficmap.policy import chart_problems, resolve
from tests.unit.planning.trafficmap.routing_blocks import CAPACITY, PROBE

pytestmark = pytest.mark.unit



@pytest.mark.parametrize(
    ("routing", "annotations", "errors"),
    [
        pytest.param({"capacityFactors": {"worker-b": "0"}}, {},
                     ['validate routing policy: spec.routing.capacityFactors["worker-b"] must be positive, got "0"'],
                     id="zero factor: the page's log line"),
        pytest.param({"capacityFactors": {"worker-b": "-1"}}, {},
                     ['validate routing policy: spec.routing.capacityFactors["worker-b"] must be positive, got "-1"'],
                     id="negative factor"),
        pytest.param({"probe": PROBE | {"gateStatuses": [200, 503]}}, {},
                     ["validate routing policy: spec.routing.probe status 200 is in both acceptStatuses and "
                      "gateStatuses"], id="probe overlap"),
        pytest.param({"capacity": CAPACITY | {"maxAge": "20s", "samples": 3, "quorum": 3}}, {},
                     ["validate routing policy: spec.routing.capacity.maxAge (20s) must span at least quorum (3) "
                      "period intervals"], id="maxAge too short"),
        pytest.param({"capacity": CAPACITY | {"format": "report"}}, {},
                     ['resolve capacity policy: spec.routing.capacity.format "report" is not registered in this '
                      "build (available: [Report])"], id="unknown format"),
        pytest.param({}, {"ome.io/traffic-drain": "[1]"},
                     ["parse ome.io/traffic-drain: want a JSON object of override IDs, got list"],
                     id="malformed drain annotation"),
        pytest.param({"capacityFactors": {"worker-b": "3"}}, {}, [], id="valid"),
    ],
)
def test_errors_that_stop_the_map(routing: dict[str, Any], annotations: dict[str, str], errors: list[str]) -> None:
    assert resolve(routing, annotations, None, None).errors == errors


def test_factors_are_canonical() -> None:
    assert resolve({"capacityFactors": {"b": "1.5", "c": "3", "d": "0.5"}}, {}, None, None).factors == {
        "b": "1500m", "c": "3", "d": "500m"
    }


@pytest.mark.parametrize(
    ("routing", "chart", "probing"),
    [
        pytest.param({}, None, False, id="neither: no probes"),
        pytest.param({}, PROBE, True, id="the chart's"),
        pytest.param({"probe": {"disabled": True}}, PROBE, False, id="disabled per service"),
        pytest.param({"probe": PROBE | {"path": "/ready"}}, None, True, id="the service's own"),
    ],
)
def test_a_service_probe_replaces_the_charts_wholesale(routing: dict[str, Any], chart: dict[str, Any] | None,
                                                       probing: bool) -> None:
    resolved = resolve(routing, {}, chart, None)
    assert (resolved.probe is not None) is probing


def test_a_probe_or_capacity_setting_change_changes_its_key() -> None:
    first = resolve({}, {}, PROBE, CAPACITY)
    again = resolve({}, {}, dict(PROBE), dict(CAPACITY))
    other = resolve({"probe": PROBE | {"failureThreshold": 3}, "capacity": CAPACITY | {"samples": 4, "quorum": 2}}, {}, PROBE,
                    CAPACITY)
    assert first.probe is not None and first.capacity is not None and other.probe is not None
    assert first.probe.key == again.probe.key and first.probe.key != other.probe.key  # type: ignore[union-attr]
    assert other.capacity is not None and first.capacity.key != other.capacity.key


def test_global_host_annotation() -> None:
    assert resolve({}, {"ome.io/global-host": "chat.example.com"}, None, None).global_host == "chat.example.com"


@pytest.mark.parametrize(
    ("probe", "capacity", "problems"),
    [
        pytest.param(None, CAPACITY | {"period": "10"}, [
            'invalid multi-cluster configuration: routing.capacity.period: "10" is not a duration (use forms like '
            '"30s", "5m")'], id="a period without unit"),
        pytest.param(None, CAPACITY | {"timeout": "10s", "maxAge": "1m"}, [
            "invalid multi-cluster configuration: routing.capacity.timeout (10s) must be shorter than "
            "routing.capacity.period (10s)"], id="timeout not shorter than period"),
        pytest.param(PROBE | {"gateStatuses": [503, 429]}, None, [
            "invalid multi-cluster configuration: routing.probe.gateStatuses must not contain 429: it signals "
            "credentials or rate limits, not a failed endpoint"], id="429 gates"),
        pytest.param(PROBE, CAPACITY, [], id="valid"),
    ],
)
def test_chart_blocks_are_checked_at_start(probe: dict[str, Any] | None, capacity: dict[str, Any] | None,
                                           problems: list[str]) -> None:
    assert chart_problems(probe, capacity) == problems
