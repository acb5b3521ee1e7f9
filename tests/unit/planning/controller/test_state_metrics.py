"""The state gauges rendered from InferenceReplica objects (`planning.controller.state_metrics`)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from planning.controller.state_metrics import (
    DRAINS_OVERDUE,
    INSTANCES,
    ROLLOUT_HOLD_DEADLINE,
    ROLLOUT_HOLD_SINCE,
    SCALE_DOWN_ACTIVE_PODS,
    TRAFFICMAP_FALLBACK_HOMES,
    Sample,
    exposition,
    ready_timeout_seconds,
    state_samples,
)

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
SINCE = "2026-01-01T11:00:00Z"
SINCE_TS = int(datetime(2026, 1, 1, 11, 0, tzinfo=UTC).timestamp())
MINE = {"namespace": "demo", "isvc": "chat", "component": "engine"}
CONFIGURED_45M = {
    "type": "InstanceReadyTimeoutUnconfigured", "status": "False", "reason": "InstanceReadyTimeoutConfigured",
    "message": "Instance readiness deadline is 45m0s",
}  # fmt: skip
UNCONFIGURED = {
    "type": "InstanceReadyTimeoutUnconfigured", "status": "True", "reason": "InstanceReadyTimeoutUnconfigured",
    "message": "no instanceReadyTimeout is set, so an Instance that never becomes ready waits forever",
}  # fmt: skip


def ir(
    status: dict[str, Any] | None = None, component: str = "engine", lifecycle: dict[str, Any] | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {"inferenceService": "chat", "component": component, "revision": "chat-engine-rev-a"}
    if lifecycle is not None:
        spec["lifecycle"] = lifecycle
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceReplica",
        "metadata": {"namespace": "demo", "name": f"chat-{component}"},
        "spec": spec,
        "status": status or {},
    }


def row(index: int, phase: str, operation: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"index": index, "phase": phase, **({"operation": operation} if operation else {})}


def values(samples: list[Sample], name: str, **labels: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {
        tuple(sorted(s.labels.items())): s.value
        for s in samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    }


def one(samples: list[Sample], name: str, **labels: str) -> float | None:
    found = values(samples, name, **labels)
    assert len(found) <= 1, found
    return next(iter(found.values()), None)


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        ([], {"Ready": 0, "Failed": 0, "Creating": 0}),
        ([row(0, "Ready"), row(1, "Ready"), row(2, "Failed")], {"Ready": 2, "Failed": 1, "Creating": 0}),
        ([row(0, "Creating"), row(1, "Deleting"), row(2, "Bogus")], {"Creating": 1, "Deleting": 1, "Ready": 0}),
    ],
)
def test_instances_by_phase_every_phase_shown(rows: list[dict[str, Any]], expected: dict[str, int]) -> None:
    samples = state_samples([ir({"instanceStatuses": rows})], NOW)
    assert len(values(samples, INSTANCES)) == 8, "every phase of the reference, 0 when empty"
    for phase, count in expected.items():
        assert one(samples, INSTANCES, phase=phase, **MINE) == count


@pytest.mark.parametrize(
    ("condition", "rows", "expected"),
    [
        (None, [], 0),
        ({"type": "DrainOverdue", "status": "False", "reason": "DrainsWithinDeadline"}, [], 0),
        (
            {"type": "DrainOverdue", "status": "True", "reason": "DrainsOverdue"},
            [
                row(1, "Deleting", {"id": "d1", "type": "Delete", "deadline": "2026-01-01T11:30:00Z"}),
                row(2, "Deleting", {"id": "d2", "type": "Delete", "deadline": "2026-01-01T11:50:00Z"}),
                row(3, "Deleting", {"id": "d3", "type": "Delete", "deadline": "2026-01-01T12:30:00Z"}),
            ],
            2,
        ),
        # True but the rows say nothing (written a moment before the scrape): at least one.
        ({"type": "DrainOverdue", "status": "True", "reason": "DrainsOverdue"}, [], 1),
        # False wins over rows: the condition is the projection's verdict.
        (
            {"type": "DrainOverdue", "status": "False", "reason": "DrainsWithinDeadline"},
            [row(1, "Deleting", {"id": "d1", "type": "Delete", "deadline": "2026-01-01T11:30:00Z"})],
            0,
        ),
    ],
)
def test_drains_overdue_follow_the_condition(
    condition: dict[str, Any] | None, rows: list[dict[str, Any]], expected: int
) -> None:
    status = {"instanceStatuses": rows, "conditions": [condition] if condition else []}
    assert one(state_samples([ir(status)], NOW), DRAINS_OVERDUE, **MINE) == expected


@pytest.mark.parametrize(
    ("status", "lifecycle", "since", "deadline"),
    [
        # Not held: every gate reads 0, no deadline.
        ({}, None, {}, None),
        # Held at Budget, component timeout 45m (the condition the workflow wrote).
        (
            {"rolloutHold": {"gate": "Budget", "reason": "r", "since": SINCE}, "conditions": [CONFIGURED_45M]},
            None,
            {"Budget": SINCE_TS},
            SINCE_TS + 45 * 60,
        ),
        # Held, timeout unset (InstanceReadyTimeoutUnconfigured=True): no deadline sample.
        (
            {"rolloutHold": {"gate": "Ratio", "reason": "r", "since": SINCE}, "conditions": [UNCONFIGURED]},
            {"instanceReadyTimeout": "30m"},
            {"Ratio": SINCE_TS},
            None,
        ),
        # A status from before the condition: the spec's lifecycle.
        (
            {"rolloutHold": {"gate": "Held", "reason": "r", "since": SINCE}},
            {"instanceReadyTimeout": "10m"},
            {"Held": SINCE_TS},
            SINCE_TS + 600,
        ),
        # Neither: no deadline.
        ({"rolloutHold": {"gate": "Held", "reason": "r", "since": SINCE}}, None, {"Held": SINCE_TS}, None),
    ],
)
def test_rollout_hold_since_and_deadline(
    status: dict[str, Any], lifecycle: dict[str, Any] | None, since: dict[str, int], deadline: int | None
) -> None:
    samples = state_samples([ir(status, lifecycle=lifecycle)], NOW)
    shown = {labels[1][1]: value for labels, value in values(samples, ROLLOUT_HOLD_SINCE).items() if value}
    assert len(values(samples, ROLLOUT_HOLD_SINCE)) == 7, "every gate, 0 when not holding"
    assert shown == since
    found = values(samples, ROLLOUT_HOLD_DEADLINE)
    if deadline is None:
        assert found == {}
    else:
        gate = next(iter(since))
        assert found == {tuple(sorted({**MINE, "gate": gate}.items())): deadline}


def test_ready_timeout_from_condition_then_spec() -> None:
    assert ready_timeout_seconds(ir({"conditions": [CONFIGURED_45M]})) == 2700
    assert ready_timeout_seconds(ir({"conditions": [UNCONFIGURED]}, lifecycle={"instanceReadyTimeout": "5m"})) is None
    assert ready_timeout_seconds(ir({}, lifecycle={"instanceReadyTimeout": "0s"})) is None
    assert ready_timeout_seconds(ir({}, lifecycle={"instanceReadyTimeout": "1h"})) == 3600


def test_two_components_and_an_object_without_identity() -> None:
    broken = {"metadata": {"namespace": "demo", "name": "x"}, "spec": {}, "status": {}}
    samples = state_samples([ir({"instanceStatuses": [row(0, "Ready")]}, component="router"), ir(), broken], NOW)
    assert {s.labels["component"] for s in samples} == {"engine", "router"}
    assert one(samples, INSTANCES, phase="Ready", component="router") == 1
    assert one(samples, INSTANCES, phase="Ready", component="engine") == 0


def test_exposition_groups_families_and_escapes() -> None:
    text = exposition(state_samples([ir({"instanceStatuses": [row(0, "Ready")]})], NOW))
    lines = text.splitlines()
    assert lines[0] == "# HELP ome_instances Instances of the component by phase (InferenceReplica status.instanceStatuses)"
    assert lines[1] == "# TYPE ome_instances gauge"
    assert 'ome_instances{namespace="demo",isvc="chat",component="engine",phase="Ready"} 1' in lines
    assert "# TYPE ome_rollout_hold_deadline_timestamp_seconds gauge" in lines, "an empty family still announces itself"
    names = [line.split("{")[0] for line in lines if not line.startswith("#")]
    order = [INSTANCES, DRAINS_OVERDUE, ROLLOUT_HOLD_SINCE, SCALE_DOWN_ACTIVE_PODS]
    assert names == sorted(names, key=order.index), "families contiguous"
    assert exposition([Sample("ome_instances", {"isvc": 'a"b\\c'}, 2.5)]).splitlines()[2] == (
        'ome_instances{isvc="a\\"b\\\\c"} 2.5'
    )


def deleting(index: int, total: int | None) -> dict[str, Any]:
    return {**row(index, "Deleting"), **({"pods": {"total": total}} if total is not None else {})}


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        pytest.param([], 0, id="nothing removed"),
        pytest.param([row(0, "Ready"), row(1, "Updating")], 0, id="no Deleting row"),
        pytest.param([deleting(2, 1)], 1, id="one single-pod Instance"),
        pytest.param([deleting(2, 4), deleting(3, 2)], 6, id="live and Terminating pods of each"),
        pytest.param([deleting(2, 0), deleting(3, None)], 2, id="only cleanup left costs 1 each"),
        pytest.param([deleting(2, 3), row(3, "Ready"), row(4, "Failed")], 3, id="other phases cost nothing"),
    ],
)
def test_scale_down_active_pods_from_the_deleting_rows(rows: list[dict[str, Any]], expected: int) -> None:
    """§14's gauge as the scale-down budget counts it (`planning.replica.batching.deletion_cost`)."""
    assert one(state_samples([ir({"instanceStatuses": rows})], NOW), SCALE_DOWN_ACTIVE_PODS, **MINE) == expected


def trafficmap(*reasons: str | None, name: str = "chat") -> dict[str, Any]:
    entries = [
        {"cluster": f"c{i}", "capacity": {"source": "ControlPlane" if reason else "Endpoint",
                                          **({"fallbackReason": reason} if reason else {})}}
        for i, reason in enumerate(reasons)
    ]  # fmt: skip
    return {"kind": "TrafficMap", "metadata": {"namespace": "demo", "name": name}, "spec": {"service": name, "entries": entries}}


@pytest.mark.parametrize(
    ("reasons", "expected"),
    [
        pytest.param((), 0, id="no homes"),
        pytest.param((None, None), 0, id="endpoint capacity everywhere"),
        pytest.param((None, "no capacity report yet"), 1, id="one home falls back"),
        pytest.param(("capacity endpoint returned HTTP 404", "no capacity report yet"), 2, id="every home"),
    ],
)
def test_trafficmap_fallback_homes_count_the_entries_with_a_fallback_reason(
    reasons: tuple[str | None, ...], expected: int
) -> None:
    samples = state_samples([], NOW, [trafficmap(*reasons)])
    assert values(samples, TRAFFICMAP_FALLBACK_HOMES) == {(("namespace", "demo"), ("trafficmap", "chat")): expected}


def test_trafficmaps_render_beside_the_replicas_and_without_identity_nothing() -> None:
    nameless = {"metadata": {"namespace": "demo"}, "spec": {"entries": [{"cluster": "a"}]}}
    samples = state_samples([ir()], NOW, [trafficmap("r", name="b"), nameless, trafficmap(None, name="a")])
    shown = [s.labels["trafficmap"] for s in samples if s.name == TRAFFICMAP_FALLBACK_HOMES]
    assert shown == ["a", "b"], "in (namespace, name) order, the nameless map skipped"
    assert one(samples, INSTANCES, phase="Ready", **MINE) == 0
