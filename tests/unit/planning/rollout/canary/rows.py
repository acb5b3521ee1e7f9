"""Compact constructors for canary planning tables: plans, observations, states at a step."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from models.inferenceservice import GroupCanary
from planning.rollout.canary.decision import CanaryDecision
from planning.rollout.canary.machine import step
from planning.rollout.canary.observation import (
    CanaryObservation,
    ComponentObservation,
    SampleVerdict,
    Verdict,
)
from planning.rollout.canary.requests import Mailbox, PromoteRequest, RetryRequest, RollbackRequest
from planning.rollout.canary.state import CanaryState, start
from planning.rollout.canary.steps import gate_phase, step_at

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
RUN = "run-7"
GROUP = ("engine", "decoder")
CANARY = {"engine": "e2", "decoder": "d2"}
STABLE = {"engine": "e1", "decoder": "d1"}
DESIRED = {"engine": 4, "decoder": 2}
TIMEOUT = 900.0

FULL = {"capacity": "100%", "traffic": 100}
"""The last step most tables end with: every Instance on the canary, all its traffic."""


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def canary_of(*steps: dict[str, Any], **fields: Any) -> GroupCanary:
    return GroupCanary.model_validate({"steps": list(steps), **fields})


MANUAL_THEN_FULL = canary_of(
    {"capacity": "25%", "traffic": 10, "pause": {}},
    {"capacity": "100%", "traffic": 100},
)


def analysis(
    failure_limit: int = 2,
    interval: str = "1m",
    initial_delay: str | None = None,
    on_inconclusive: str | None = None,
) -> dict[str, Any]:
    found: dict[str, Any] = {
        "interval": interval,
        "failureLimit": failure_limit,
        "metrics": [{"name": "errors", "query": "q", "operator": "LT", "threshold": "0.01"}],
    }
    if initial_delay is not None:
        found["initialDelay"] = initial_delay
    if on_inconclusive is not None:
        found["onInconclusive"] = on_inconclusive
    return found


def observe(
    ready: dict[str, int] | None = None,
    *,
    desired: Mapping[str, int | None] | None = None,
    instances: dict[str, int] | None = None,
    on_canary: dict[str, int] | None = None,
    targets: dict[str, str] | None = None,
    retained: bool = True,
    paused: bool = False,
    sample: SampleVerdict | None = None,
    run_id: str = RUN,
) -> CanaryObservation:
    """`ready`: Instances serving on the canary revision per component (0 when left out)."""
    ready = ready or {}
    wanted: Mapping[str, int | None] = DESIRED if desired is None else desired
    components = {}
    for name in GROUP:
        want = wanted.get(name)
        components[name] = ComponentObservation(
            target=(targets or CANARY)[name],
            desired=want,
            instances=(instances or {}).get(name, want or 0),
            ready_canary=ready.get(name, 0),
            on_canary=(on_canary or {}).get(name, ready.get(name, 0)),
            stable_retained=retained,
        )
    return CanaryObservation(run_id=run_id, components=components, paused=paused, sample=sample)


def ready_for(canary: GroupCanary, index: int) -> dict[str, int]:
    """Every component's count of step `index` ready (desired 4 engines, 2 decoders)."""
    capacity = step_at(canary, index).capacity
    if isinstance(capacity, int):
        return {name: min(capacity, DESIRED[name]) for name in GROUP}
    percent = int(capacity[:-1])
    return {name: -(-percent * DESIRED[name] // 100) for name in GROUP}


def fresh(now: datetime = T0) -> CanaryState:
    return start(RUN, GROUP, CANARY, STABLE, now)


def entered(canary: GroupCanary, index: int = 0, since: datetime = T0, **fields: Any) -> CanaryState:
    """A canary whose step `index` serves since `since`, at its gate."""
    state = replace(
        fresh(),
        current_step=index,
        phase=gate_phase(canary, index),
        step_entered_time=since,
        observed_traffic_weight=step_at(canary, index).traffic,
        capacity_wait_since=None,
    )
    return replace(state, **fields)


def with_promote(state: CanaryState, override: bool = False, request_id: str = "p1") -> CanaryState:
    return replace(
        state, mailbox=Mailbox(promote=PromoteRequest(state.canary_revision_hash, override, request_id))
    )


def with_rollback(state: CanaryState) -> CanaryState:
    return replace(state, mailbox=replace(state.mailbox, rollback=RollbackRequest("r1")))


def with_retry(state: CanaryState) -> CanaryState:
    return replace(
        state, mailbox=replace(state.mailbox, retry=RetryRequest(state.canary_revision_hash, "t1"))
    )


def verdict(sequence: int, seconds: float, outcome: Verdict) -> SampleVerdict:
    return SampleVerdict(sequence, at(seconds), outcome, ({"name": "errors", "passed": outcome == "Pass"},))


def go(
    canary: GroupCanary,
    state: CanaryState,
    seen: CanaryObservation,
    seconds: float,
    timeout: float | None = TIMEOUT,
) -> CanaryDecision:
    return step(canary, state, seen, at(seconds), timeout)
