"""Admission rules for `spec.routing.probe` and `spec.routing.capacity` (reference §18, §19).

OME reports these errors late, in its log (`validate routing policy: ...`), and stops
updating the TrafficMap; we refuse them at admission with the same wording.

Public API: `check_probe(probe, findings)`, `check_capacity_poll(capacity, findings)`.
"""

from __future__ import annotations

from models.admission_result import Findings
from models.duration import format_duration, parse_duration
from models.inferenceservice import RoutingCapacity, RoutingProbe

REASON = "InvalidRoutingPolicy"
PROBE_FIELDS = (
    "path", "method", "acceptStatuses", "gateStatuses", "period", "timeout",
    "failureThreshold", "successThreshold", "allFailedPolicy",
)
# A gate on these would drain a cluster because of credentials or rate limits, not health.
FORBIDDEN_GATE_STATUSES = (401, 403, 429)
MIN_PROBE_PERIOD_SECONDS = 1.0
CAPACITY_FORMATS = ("Report",)


def check_probe(probe: RoutingProbe, findings: Findings, where: str = "spec.routing.probe") -> None:
    """`where` names the block in messages: the InferenceService's, or the chart's `routing.probe`."""
    if probe.disabled:
        return
    values = probe.model_dump(by_alias=True)
    missing = [name for name in PROBE_FIELDS if values.get(name) is None]
    if missing:
        findings.deny(REASON, where,
                      f"{where} replaces the cluster's probe wholesale and must set all nine fields "
                      f"({', '.join(PROBE_FIELDS)}); missing {', '.join(missing)}, or set disabled: true")
        return
    accept = probe.accept_statuses or []
    gate = probe.gate_statuses or []
    for status in sorted(set(accept) & set(gate)):
        findings.deny(REASON, f"{where}.gateStatuses",
                      f"{where} status {status} is in both acceptStatuses and gateStatuses")
    for status in gate:
        if status in FORBIDDEN_GATE_STATUSES:
            findings.deny(REASON, f"{where}.gateStatuses",
                          f"{where}.gateStatuses must not contain {status}: it signals credentials or rate "
                          "limits, not a failed endpoint")
    assert probe.period is not None and probe.timeout is not None
    period, timeout = parse_duration(probe.period), parse_duration(probe.timeout)
    if period < MIN_PROBE_PERIOD_SECONDS:
        findings.deny(REASON, f"{where}.period", f'{where}.period must be at least 1s, got "{probe.period}"')
    if not 0 < timeout < period:
        findings.deny(REASON, f"{where}.timeout",
                      f"{where}.timeout ({format_duration(timeout)}) must be positive and shorter than "
                      f"{where}.period ({format_duration(period)})")
    for name, value in (("failureThreshold", probe.failure_threshold), ("successThreshold", probe.success_threshold)):
        if value is not None and value < 1:
            findings.deny(REASON, f"{where}.{name}", f"{where}.{name} must be at least 1, got {value}")


def check_capacity_poll(capacity: RoutingCapacity, findings: Findings, where: str = "spec.routing.capacity") -> None:
    """`where` names the block in messages: the InferenceService's, or the chart's `routing.capacity`."""
    if capacity.disabled:
        return
    if capacity.options is not None:
        findings.deny(REASON, f"{where}.options", f"{where}.options must be omitted; remove it")
    required = (capacity.path, capacity.method, capacity.format, capacity.period, capacity.timeout,
                capacity.samples, capacity.quorum, capacity.max_age)
    if any(value is None for value in required):
        findings.deny(REASON, where,
                      "an enabled capacity poll must specify path, method, format, period, timeout, samples, "
                      "quorum, and maxAge")
        return
    assert capacity.path is not None and capacity.samples is not None and capacity.quorum is not None
    assert capacity.period is not None and capacity.timeout is not None and capacity.max_age is not None
    if not capacity.path.startswith("/"):
        findings.deny(REASON, f"{where}.path", f'{where}.path must start with "/", got "{capacity.path}"')
    if capacity.format not in CAPACITY_FORMATS:
        findings.deny(REASON, f"{where}.format",
                      f'{where}.format "{capacity.format}" is not registered in this build (available: [Report])')
    if capacity.samples < 1:
        findings.deny(REASON, f"{where}.samples", f"{where}.samples must be at least 1, got {capacity.samples}")
    elif not 1 <= capacity.quorum <= capacity.samples:
        findings.deny(REASON, f"{where}.quorum",
                      f"{where}.quorum must be from 1 to samples ({capacity.samples}), got {capacity.quorum}")
    period, timeout = parse_duration(capacity.period), parse_duration(capacity.timeout)
    max_age = parse_duration(capacity.max_age)
    if period <= 0:
        findings.deny(REASON, f"{where}.period", f'{where}.period must be positive, got "{capacity.period}"')
    if timeout >= period or timeout <= 0:
        findings.deny(REASON, f"{where}.timeout",
                      f"{where}.timeout ({format_duration(timeout)}) must be shorter than "
                      f"{where}.period ({format_duration(period)})")
    if max_age < capacity.quorum * period:
        findings.deny(REASON, f"{where}.maxAge",
                      f"{where}.maxAge ({format_duration(max_age)}) must span at least quorum "
                      f"({capacity.quorum}) period intervals")
