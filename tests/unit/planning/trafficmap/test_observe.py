"""When the map looks at its homes and what survives (§18, §19): setting and endpoint changes,
the periods, folding answers, and what continue-as-new carries."""

from __future__ import annotations

from datetime import timedelta

import pytest

from models.routing_ops import CapacityAnswer, ObserveHomesResult, ProbeAnswer
from planning.trafficmap.capacity import Reading, Readings
from planning.trafficmap.observe import due, fold, settle
from planning.trafficmap.policy import resolve
from planning.trafficmap.probes import ProbeState
from planning.trafficmap.state import HomeReport, HomesReport, TrafficMapState
from tests.unit.planning.trafficmap.routing_blocks import CAPACITY, NOW, PROBE

pytestmark = pytest.mark.unit

FAST_GATE = PROBE | {"failureThreshold": 1}
POSTED = CAPACITY | {"method": "POST", "period": "30s"}
GATED = ProbeState("Failing", "HTTP 503", True, 1)
READ = Readings((Reading(2, NOW),), None, True)


def state(endpoint_b: str = "http://b.example/prod/chat", **fields: object) -> TrafficMapState:
    report = HomesReport(homes=[HomeReport(cluster="a", endpoint="http://a.example/prod/chat/", allocated=1, ready=1),
                                HomeReport(cluster="b", endpoint=endpoint_b, allocated=1, ready=1)])
    return TrafficMapState(namespace="prod", isvc="chat", report=report, **fields)  # type: ignore[arg-type]


def settled(routing: dict[str, object] | None = None) -> TrafficMapState:
    resolved = resolve(routing or {}, {}, FAST_GATE, POSTED)
    return settle(state(), resolved)


def test_unchanged_settings_keep_gates_and_readings() -> None:
    resolved = resolve({}, {}, FAST_GATE, POSTED)
    first = settle(state(), resolved).model_copy(update={"probes": {"b": GATED}, "readings": {"b": READ}})
    again = settle(first, resolved)
    assert again.probes == {"b": GATED} and again.readings == {"b": READ}


def test_a_probe_setting_change_lifts_gates_and_a_capacity_change_resets_readings() -> None:
    first = settled().model_copy(update={"probes": {"b": GATED}, "readings": {"b": READ}})
    changed = settle(first, resolve({"probe": FAST_GATE | {"failureThreshold": 3}, "capacity": POSTED | {"samples": 2}},
                                    {}, FAST_GATE, POSTED))
    assert changed.probes == {} and changed.readings == {}


def test_an_endpoint_change_resets_that_homes_readings_only() -> None:
    resolved = resolve({}, {}, FAST_GATE, POSTED)
    first = settle(state(), resolved).model_copy(update={"readings": {"a": READ, "b": READ}})
    moved = settle(first.model_copy(update={"report": state("http://b2.example/prod/chat").report}), resolved)
    assert set(moved.readings) == {"a"}


def test_continue_as_new_resets_readings_and_keeps_gates() -> None:
    first = settled().model_copy(update={"probes": {"b": GATED}, "readings": {"b": READ}})
    carried = first.for_next_run()
    assert carried.probes == {"b": GATED} and carried.readings == {} and carried.next_capacity_at is None


def test_due_requests_and_their_periods() -> None:
    resolved = resolve({}, {}, FAST_GATE, POSTED)
    s = settle(state(), resolved)
    asked = due(s, resolved, NOW)
    assert [(t.cluster, t.url, t.method) for t in asked.probes] == [
        ("a", "http://a.example/prod/chat/healthz", "GET"), ("b", "http://b.example/prod/chat/healthz", "GET")
    ]
    assert [t.method for t in asked.capacity] == ["POST", "POST"]
    answers = ObserveHomesResult(
        probes=[ProbeAnswer(cluster="a", status=200), ProbeAnswer(cluster="b", error="connection refused")],
        capacity=[CapacityAnswer(cluster="a", servable=3, observed_at=NOW),
                  CapacityAnswer(cluster="b", failure="capacity endpoint returned HTTP 500")],
    )
    after = fold(s, asked, answers, resolved, NOW)
    assert after.probes["a"].result == "Passing"
    assert after.probes["b"].gated and after.probes["b"].message == "transport error: connection refused"
    assert after.readings["a"].accepted == (Reading(3, NOW),)
    assert after.readings["b"].failure == "capacity endpoint returned HTTP 500"
    assert after.next_probe_at == NOW + timedelta(seconds=10) and after.next_capacity_at == NOW + timedelta(seconds=30)
    # 10 s later only the probes are due.
    later = due(after, resolved, NOW + timedelta(seconds=10))
    assert len(later.probes) == 2 and later.capacity == []


def test_a_failed_batch_learns_nothing_but_schedules_the_next() -> None:
    resolved = resolve({}, {}, FAST_GATE, None)
    s = settle(state(), resolved)
    asked = due(s, resolved, NOW)
    after = fold(s, asked, None, resolved, NOW)
    assert after.probes == {} and after.next_probe_at == NOW + timedelta(seconds=10)


def test_nothing_is_due_without_probes_or_polling() -> None:
    resolved = resolve({}, {}, None, None)
    asked = due(settle(state(), resolved), resolved, NOW)
    assert asked.probes == [] and asked.capacity == []
