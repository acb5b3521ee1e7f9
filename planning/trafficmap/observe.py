"""When the TrafficMap looks at its homes, and what it learns (spec reference §18, §19).

- `settle`: a probe setting change lifts every gate and resets the counts; a capacity
  setting change resets every home's readings, an endpoint change that home's; a home that
  left is forgotten. Without probes or polling nothing is scheduled.
- `due`: the requests of this period (a probe per home every probe period, a capacity poll
  per home every capacity period), in one batch.
- `fold`: each answer into the home's probe state or readings, and the next period's times.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from models.routing_ops import HttpTarget, ObserveHomesInput, ObserveHomesResult
from planning.trafficmap.capacity import Reading, Readings, observe
from planning.trafficmap.policy import CapacitySettings, ProbeSettings, Resolved
from planning.trafficmap.probes import ProbeState, classify, record
from planning.trafficmap.state import TrafficMapState


def _endpoints(state: TrafficMapState) -> dict[str, str]:
    homes = state.report.homes if state.report is not None else []
    return {h.cluster: h.endpoint for h in homes if h.endpoint}


def settle(state: TrafficMapState, resolved: Resolved) -> TrafficMapState:
    """The state with what a settings or homes change invalidates dropped."""
    endpoints = _endpoints(state)
    update: dict[str, object] = {}
    probe_key = resolved.probe.key if resolved.probe is not None else None
    if probe_key != state.probe_key:
        update |= {"probes": {}, "probe_times": {}, "probe_key": probe_key, "next_probe_at": None}
    else:
        update |= {
            "probes": {c: p for c, p in state.probes.items() if c in endpoints},
            "probe_times": {c: t for c, t in state.probe_times.items() if c in endpoints},
        }
    capacity_key = resolved.capacity.key if resolved.capacity is not None else None
    if capacity_key != state.capacity_key:
        update |= {"readings": {}, "capacity_key": capacity_key, "next_capacity_at": None}
    else:
        update["readings"] = {
            c: r for c, r in state.readings.items() if c in endpoints and state.capacity_endpoints.get(c) == endpoints[c]
        }
    update["capacity_endpoints"] = endpoints
    return state.model_copy(update=update)


def due(state: TrafficMapState, resolved: Resolved, now: datetime) -> ObserveHomesInput:
    """This period's requests (empty when nothing is due)."""
    endpoints = sorted(_endpoints(state).items())
    probe, poll = resolved.probe, resolved.capacity
    probe_due = probe is not None and (state.next_probe_at is None or now >= state.next_probe_at)
    poll_due = poll is not None and (state.next_capacity_at is None or now >= state.next_capacity_at)
    return ObserveHomesInput(
        probes=_targets(endpoints, probe) if probe is not None and probe_due else [],
        capacity=_targets(endpoints, poll) if poll is not None and poll_due else [],
    )


def _targets(endpoints: list[tuple[str, str]], settings: ProbeSettings | CapacitySettings) -> list[HttpTarget]:
    """One request per home: `<entry.endpoint><path>`."""
    return [
        HttpTarget(cluster=cluster, url=f"{endpoint.rstrip('/')}{settings.path}",
                   method=settings.method, timeout_seconds=settings.timeout_seconds)
        for cluster, endpoint in endpoints
    ]


def fold(state: TrafficMapState, asked: ObserveHomesInput, answers: ObserveHomesResult | None, resolved: Resolved,
         now: datetime) -> TrafficMapState:
    """The state after one period's answers (None: the batch failed; nothing learnt), with the
    next period scheduled for each kind asked."""
    probes = dict(state.probes)
    probe_times = dict(state.probe_times)
    readings = dict(state.readings)
    update: dict[str, object] = {}
    if asked.probes and resolved.probe is not None:
        policy = resolved.probe.policy
        for answer in answers.probes if answers is not None else []:
            result, message = classify(answer.status, answer.error, policy)
            probes[answer.cluster] = record(probes.get(answer.cluster, ProbeState()), result, message, policy)
            probe_times[answer.cluster] = now
        update["next_probe_at"] = now + timedelta(seconds=resolved.probe.period_seconds)
    if asked.capacity and resolved.capacity is not None:
        policy_c = resolved.capacity.policy
        for reading in answers.capacity if answers is not None else []:
            outcome: Reading | str
            if reading.failure is not None or reading.servable is None or reading.observed_at is None:
                outcome = reading.failure or "capacity report has no servable count"
            else:
                outcome = Reading(reading.servable, reading.observed_at)
            readings[reading.cluster] = observe(readings.get(reading.cluster, Readings()), outcome, policy_c)
        update["next_capacity_at"] = now + timedelta(seconds=policy_c.period_seconds)
    return state.model_copy(update={"probes": probes, "probe_times": probe_times, "readings": readings, **update})

