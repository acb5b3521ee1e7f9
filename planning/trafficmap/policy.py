"""The routing policy a TrafficMap runs with, and the errors that stop the map (spec reference
§17 "Map stops updating", §18, §19, §20).

`resolve` reads what the InferenceService reported (`spec.routing` as the user wrote it, its
annotations) over the chart's probe and capacity defaults: a per-ISVC `spec.routing.probe` or
`spec.routing.capacity` replaces the chart's wholesale, `disabled: true` turns it off. Any
error (a capacity factor that is not positive, a probe or capacity block that does not hold
together, a malformed `ome.io/traffic-drain` annotation) comes back in `errors`, each the
exact line OME logs; while there is one, the map keeps its last table.

`chart_problems` checks the chart-level (`OME_ROUTING__PROBE` / `OME_ROUTING__CAPACITY`) blocks
when the worker starts, in the `invalid multi-cluster configuration` wording.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import ValidationError

from models.admission_result import Findings
from models.admission_routing import REASON, check_capacity_poll, check_probe
from models.duration import parse_duration
from models.inferenceservice import RoutingCapacity, RoutingProbe, RoutingSpec
from models.quantity import Quantity, canonical_quantity
from planning.trafficmap import texts
from planning.trafficmap.capacity import CapacityPolicy
from planning.trafficmap.drains import Drain, parse_annotation
from planning.trafficmap.probes import ProbePolicy

DURATION_FIELDS = ("period", "timeout", "maxAge")
Block = TypeVar("Block", RoutingProbe, RoutingCapacity)


@dataclass(frozen=True)
class ProbeSettings:
    path: str
    method: str
    period_seconds: float
    timeout_seconds: float
    policy: ProbePolicy
    key: str
    """The settings as canonical JSON: a change lifts every gate and resets the counts (§19)."""


@dataclass(frozen=True)
class CapacitySettings:
    path: str
    method: str
    timeout_seconds: float
    policy: CapacityPolicy
    key: str
    """The settings as canonical JSON: a change resets every home's readings (§18)."""


@dataclass(frozen=True)
class Resolved:
    factors: dict[str, str] = field(default_factory=dict)
    """Capacity factors by cluster, canonical ("1.5" -> "1500m")."""
    probe: ProbeSettings | None = None
    capacity: CapacitySettings | None = None
    annotated_drains: dict[str, Drain] = field(default_factory=dict)
    global_host: str | None = None
    errors: list[str] = field(default_factory=list)
    """The lines OME logs for an error that stops the map; empty: the map may be built."""


def _key(block: Mapping[str, Any]) -> str:
    return json.dumps(block, sort_keys=True, separators=(",", ":"))


def _probe(block: RoutingProbe) -> ProbeSettings:
    assert block.path is not None and block.method is not None and block.period is not None
    assert block.timeout is not None and block.failure_threshold is not None and block.success_threshold is not None
    assert block.all_failed_policy is not None
    policy = ProbePolicy(
        accept_statuses=frozenset(block.accept_statuses or []),
        gate_statuses=frozenset(block.gate_statuses or []),
        failure_threshold=block.failure_threshold,
        success_threshold=block.success_threshold,
        all_failed_policy=block.all_failed_policy,
    )
    return ProbeSettings(block.path, block.method, parse_duration(block.period), parse_duration(block.timeout),
                         policy, _key(block.to_manifest()))


def _capacity(block: RoutingCapacity) -> CapacitySettings:
    assert block.path is not None and block.method is not None and block.period is not None
    assert block.timeout is not None and block.max_age is not None
    assert block.samples is not None and block.quorum is not None
    policy = CapacityPolicy(
        samples=block.samples,
        quorum=block.quorum,
        period_seconds=parse_duration(block.period),
        timeout_seconds=parse_duration(block.timeout),
        max_age_seconds=parse_duration(block.max_age),
    )
    return CapacitySettings(block.path, block.method, policy.timeout_seconds, policy, _key(block.to_manifest()))


def factor_problems(factors: Mapping[str, str]) -> list[str]:
    """`spec.routing.capacityFactors["worker-b"] must be positive, got "0"`, per bad factor."""
    found: list[str] = []
    for cluster, text in sorted(factors.items()):
        where = f'spec.routing.capacityFactors["{cluster}"]'
        try:
            amount = Quantity.parse(text).amount
        except ValueError:
            found.append(f'{texts.VALIDATE_PREFIX}{where} must be a quantity such as "3" or "1500m", got "{text}"')
            continue
        if amount <= 0:
            found.append(f'{texts.VALIDATE_PREFIX}{where} must be positive, got "{text}"')
    return found


def resolve(routing: Mapping[str, Any], annotations: Mapping[str, str],
            chart_probe: Mapping[str, Any] | None, chart_capacity: Mapping[str, Any] | None) -> Resolved:
    """The policy from the InferenceService's report over the chart's defaults."""
    errors: list[str] = []
    try:
        spec = RoutingSpec.model_validate(dict(routing))
    except ValidationError as error:
        detail = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in error.errors())
        return Resolved(errors=[f"{texts.VALIDATE_PREFIX}spec.routing: {detail}"])
    factors = dict(spec.capacity_factors or {})
    errors += factor_problems(factors)

    probe_block = spec.probe if spec.probe is not None else _chart_block(RoutingProbe, chart_probe)
    capacity_block = spec.capacity if spec.capacity is not None else _chart_block(RoutingCapacity, chart_capacity)
    probe_problems = _problems(probe_block, "spec.routing.probe")
    capacity_problems = _problems(capacity_block, "spec.routing.capacity")
    errors += [_late_error(problem) for problem in [*probe_problems, *capacity_problems]]
    probe = _probe(probe_block) if probe_block and not probe_block.disabled and not probe_problems else None
    capacity = (
        _capacity(capacity_block) if capacity_block and not capacity_block.disabled and not capacity_problems else None
    )

    try:
        drains = parse_annotation(annotations.get(texts.TRAFFIC_DRAIN_ANNOTATION))
    except ValueError as error:
        errors.append(str(error))
        drains = {}
    canonical = {}
    for cluster, text in factors.items():
        try:
            canonical[cluster] = canonical_quantity(text)
        except ValueError:
            canonical[cluster] = text
    return Resolved(canonical, probe, capacity, drains, annotations.get(texts.GLOBAL_HOST_ANNOTATION) or None, errors)


def _problems(block: RoutingProbe | RoutingCapacity | None, where: str) -> list[str]:
    """The block's errors as admission words them, `where` naming it; none when off."""
    if block is None or block.disabled:
        return []
    findings = Findings()
    if isinstance(block, RoutingProbe):
        check_probe(block, findings, where)
    else:
        check_capacity_poll(block, findings, where)
    suffix = f" ({REASON})"
    return [f.message.removesuffix(suffix) for f in findings.denials]


def _late_error(problem: str) -> str:
    """The line OME logs: a capacity format it does not know fails resolving, not validating."""
    prefix = "resolve capacity policy: " if "is not registered in this build" in problem else texts.VALIDATE_PREFIX
    return prefix + problem


def _chart_block(model: type[Block], block: Mapping[str, Any] | None) -> Block | None:
    # The chart's blocks were checked when the worker started (`chart_problems`).
    return None if not block else model.model_validate(dict(block))


def chart_problems(probe: Mapping[str, Any] | None, capacity: Mapping[str, Any] | None) -> list[str]:
    """The chart-level blocks' errors, each `invalid multi-cluster configuration: routing...`."""
    found: list[str] = []
    for name, model, block in (("probe", RoutingProbe, probe), ("capacity", RoutingCapacity, capacity)):
        if not block:
            continue
        where = f"routing.{name}"
        bad_duration = False
        for duration_field in DURATION_FIELDS:
            value = block.get(duration_field)
            if value is None:
                continue
            try:
                parse_duration(value)
            except ValueError:
                bad_duration = True
                found.append(f'{where}.{duration_field}: "{value}" is not a duration (use forms like "30s", "5m")')
        if bad_duration:
            continue
        try:
            parsed = model.model_validate(dict(block))
        except ValidationError as error:
            found += [f"{where}.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in error.errors()]
            continue
        found += _problems(parsed, where)
    return [f"{texts.INVALID_CONFIGURATION}: {problem}" for problem in found]
