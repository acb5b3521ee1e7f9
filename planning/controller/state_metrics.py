"""The product's state gauges, produced at scrape time from the InferenceReplica and TrafficMap
objects, the way kube-state-metrics does it: one process (the controller) reads the projection
the InferenceReplica workflows write (`status.instanceStatuses`, `status.rolloutHold`, the
`DrainOverdue` and `InstanceReadyTimeoutUnconfigured` conditions) and the maps the TrafficMap
workflows write (`spec.entries[].capacity`), and renders

- `ome_instances{namespace,isvc,component,phase}`: the component's Instance rows by phase,
  every phase present (0 for an empty one);
- `ome_instance_drains_overdue{namespace,isvc,component}`: deleting Instances past their drain
  deadline while `DrainOverdue` is True (its rows with a Delete operation past its deadline,
  at least 1), else 0;
- `ome_rollout_hold_since_timestamp_seconds{namespace,isvc,component,gate}`: Unix seconds of
  `rolloutHold.since` for the holding gate, 0 for every other gate;
- `ome_rollout_hold_deadline_timestamp_seconds{namespace,isvc,component,gate}`: `since` plus the
  component's resolved `instanceReadyTimeout` (§10), for the holding gate only, and only when a
  timeout is configured (no sample without one);
- `ome_omenative_scale_down_active_pods{namespace,isvc,component}` (spec reference §14): the pods
  of the Instances being removed, each row in phase `Deleting` costing its live and Terminating
  pods (`pods.total`), or 1 once only cleanup remains, as the scale-down budget counts them
  (`planning.replica.batching.deletion_cost`);
- `ome_trafficmap_capacity_fallback_homes{namespace,trafficmap}` (§18): the map's homes whose
  `capacity.fallbackReason` is set, i.e. on control-plane capacity.

The other §14 gauge, `ome_omenative_scale_down_deferred_instances`, stays with the workflow
(`workflows.metrics`): which Instances a wave deferred is the plan's, and no status field
carries it.

Gauges set from workflow code would live in each worker's SDK runtime, which keeps the last
value of every series forever: a workflow moving to another worker would leave a stale series
behind, and a replaying worker emits nothing. Rendering from the objects has neither problem:
a deleted InferenceReplica's series are simply gone.

`state_samples` is pure (objects and the scrape's moment in, samples out); `exposition` writes
them in Prometheus's text format (version 0.0.4).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, get_args

from models.duration import parse_duration
from models.inferencereplica import HoldGate, InstancePhase
from planning.replica.batching import deletion_cost

INSTANCES = "ome_instances"
DRAINS_OVERDUE = "ome_instance_drains_overdue"
ROLLOUT_HOLD_SINCE = "ome_rollout_hold_since_timestamp_seconds"
ROLLOUT_HOLD_DEADLINE = "ome_rollout_hold_deadline_timestamp_seconds"
SCALE_DOWN_ACTIVE_PODS = "ome_omenative_scale_down_active_pods"
TRAFFICMAP_FALLBACK_HOMES = "ome_trafficmap_capacity_fallback_homes"

HELP: Mapping[str, str] = {
    INSTANCES: "Instances of the component by phase (InferenceReplica status.instanceStatuses)",
    DRAINS_OVERDUE: "deleting Instances past their drain deadline (the DrainOverdue condition)",
    ROLLOUT_HOLD_SINCE: "start of the component's rollout hold, by gate (0: not held)",
    ROLLOUT_HOLD_DEADLINE: "rolloutHold.since plus the component's instanceReadyTimeout",
    SCALE_DOWN_ACTIVE_PODS: "pods of Instances being removed",
    TRAFFICMAP_FALLBACK_HOMES: "homes using control-plane capacity",
}
"""Every metric this module renders, with its HELP text; all are gauges."""

PHASES: tuple[str, ...] = get_args(InstancePhase)
GATES: tuple[str, ...] = get_args(HoldGate)
READY_TIMEOUT_CONDITION = "InstanceReadyTimeoutUnconfigured"
_DEADLINE_MESSAGE = re.compile(r"Instance readiness deadline is (\S+)")


@dataclass(frozen=True)
class Sample:
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    value: float = 0.0


def _parse_time(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _condition(status: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for condition in status.get("conditions") or []:
        if isinstance(condition, Mapping) and condition.get("type") == kind:
            return condition
    return None


def _seconds(text: Any) -> float | None:
    if not isinstance(text, str):
        return None
    try:
        seconds = parse_duration(text)
    except ValueError:
        return None
    return seconds if seconds > 0 else None


def ready_timeout_seconds(obj: Mapping[str, Any]) -> float | None:
    """The component's resolved `instanceReadyTimeout` as the workflow wrote it: the condition
    `InstanceReadyTimeoutUnconfigured` (False: `Instance readiness deadline is 45m0s`; True: no
    deadline), else, on a status without it, the spec's `lifecycle.instanceReadyTimeout`."""
    status = obj.get("status") or {}
    condition = _condition(status, READY_TIMEOUT_CONDITION)
    if condition is not None:
        if condition.get("status") == "True":
            return None
        match = _DEADLINE_MESSAGE.search(str(condition.get("message") or ""))
        if match is not None:
            return _seconds(match.group(1))
    lifecycle = (obj.get("spec") or {}).get("lifecycle") or {}
    return _seconds(lifecycle.get("instanceReadyTimeout"))


def _identity(obj: Mapping[str, Any]) -> dict[str, str] | None:
    metadata = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    namespace = metadata.get("namespace")
    isvc = spec.get("inferenceService")
    component = spec.get("component")
    if not namespace or not isvc or not component:
        return None
    return {"namespace": str(namespace), "isvc": str(isvc), "component": str(component)}


def _overdue_drains(rows: list[Mapping[str, Any]], now: datetime) -> int:
    count = 0
    for row in rows:
        operation = row.get("operation") or {}
        deadline = _parse_time(operation.get("deadline"))
        if operation.get("type") == "Delete" and deadline is not None and now > deadline:
            count += 1
    return count


def replica_samples(obj: Mapping[str, Any], now: datetime) -> list[Sample]:
    """One InferenceReplica's samples; none for an object without namespace, isvc or component."""
    labels = _identity(obj)
    if labels is None:
        return []
    status = obj.get("status") or {}
    rows = [row for row in status.get("instanceStatuses") or [] if isinstance(row, Mapping)]
    counts = dict.fromkeys(PHASES, 0)
    for row in rows:
        phase = row.get("phase")
        if phase in counts:
            counts[phase] += 1
    samples = [Sample(INSTANCES, {**labels, "phase": phase}, float(count)) for phase, count in counts.items()]

    drain = _condition(status, "DrainOverdue")
    overdue = max(1, _overdue_drains(rows, now)) if drain is not None and drain.get("status") == "True" else 0
    samples.append(Sample(DRAINS_OVERDUE, dict(labels), float(overdue)))

    hold = status.get("rolloutHold") or {}
    gate = hold.get("gate") if isinstance(hold, Mapping) else None
    since = _parse_time(hold.get("since")) if gate else None
    if gate and since is None:
        since = now  # a hold written without `since` (not by this product): held from now on
    for each in GATES:
        value = float(int(since.timestamp())) if since is not None and each == gate else 0.0
        samples.append(Sample(ROLLOUT_HOLD_SINCE, {**labels, "gate": each}, value))
    timeout = ready_timeout_seconds(obj) if gate else None
    if gate and since is not None and timeout is not None:
        samples.append(
            Sample(ROLLOUT_HOLD_DEADLINE, {**labels, "gate": str(gate)}, float(int(since.timestamp()) + timeout))
        )
    samples.append(Sample(SCALE_DOWN_ACTIVE_PODS, dict(labels), float(_removal_pods(rows))))
    return samples


def _removal_pods(rows: list[Mapping[str, Any]]) -> int:
    total = 0
    for row in rows:
        if row.get("phase") == "Deleting":
            pods = row.get("pods") or {}
            count = pods.get("total") if isinstance(pods, Mapping) else None
            total += deletion_cost(count if isinstance(count, int) else 0)
    return total


def trafficmap_samples(obj: Mapping[str, Any]) -> list[Sample]:
    """One TrafficMap's samples; none for an object without namespace or name."""
    metadata = obj.get("metadata") or {}
    namespace, name = metadata.get("namespace"), metadata.get("name")
    if not namespace or not name:
        return []
    entries = (obj.get("spec") or {}).get("entries") or []
    falling = sum(
        1
        for entry in entries
        if isinstance(entry, Mapping) and ((entry.get("capacity") or {}).get("fallbackReason") is not None)
    )
    return [Sample(TRAFFICMAP_FALLBACK_HOMES, {"namespace": str(namespace), "trafficmap": str(name)}, float(falling))]


def _by_name(objects: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return sorted(
        objects,
        key=lambda o: (str((o.get("metadata") or {}).get("namespace")), str((o.get("metadata") or {}).get("name"))),
    )


def state_samples(
    objects: Iterable[Mapping[str, Any]], now: datetime, trafficmaps: Iterable[Mapping[str, Any]] = ()
) -> list[Sample]:
    """Every InferenceReplica's (`objects`) and TrafficMap's samples, grouped by metric name
    (the text format wants a family's samples together), objects in (namespace, name) order."""
    samples = [sample for obj in _by_name(objects) for sample in replica_samples(obj, now)]
    samples += [sample for obj in _by_name(trafficmaps) for sample in trafficmap_samples(obj)]
    order = {name: position for position, name in enumerate(HELP)}
    return sorted(samples, key=lambda s: order[s.name])  # stable: object order kept inside a family


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return str(int(value)) if value.is_integer() and abs(value) < 2**53 else repr(value)


def exposition(samples: Iterable[Sample]) -> str:
    """The samples in Prometheus's text exposition format, HELP and TYPE once per family (a
    family without samples still announces itself)."""
    by_name: dict[str, list[Sample]] = {name: [] for name in HELP}
    for sample in samples:
        by_name.setdefault(sample.name, []).append(sample)
    lines: list[str] = []
    for name, family in by_name.items():
        lines.append(f"# HELP {name} {HELP.get(name, name)}")
        lines.append(f"# TYPE {name} gauge")
        for sample in family:
            labels = ",".join(f'{key}="{_escape(value)}"' for key, value in sample.labels.items())
            lines.append(f"{name}{{{labels}}} {_number(sample.value)}" if labels else f"{name} {_number(sample.value)}")
    return "\n".join(lines) + "\n"
