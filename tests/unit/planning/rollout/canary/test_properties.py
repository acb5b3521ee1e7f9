"""Rules that interact, checked over random event sequences: no sample counts twice,
`analysisFailedChecks` never passes `failureLimit`, the step only moves forward."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planning.rollout.canary import steering
from planning.rollout.canary.machine import step
from planning.rollout.canary.observation import SampleVerdict, Verdict
from planning.rollout.canary.state import CanaryState
from tests.unit.planning.rollout.canary.rows import analysis, at, canary_of, fresh, observe, ready_for

pytestmark = pytest.mark.unit

VERDICTS: tuple[Verdict, ...] = ("Pass", "Fail", "Inconclusive")

action = st.one_of(
    st.tuples(st.just("wait"), st.integers(1, 400)),
    st.tuples(
        st.just("verdict"), st.sampled_from(VERDICTS), st.sampled_from([0, 0, 0, -1, 1]), st.integers(1, 3)
    ),
    st.tuples(st.just("capacity"), st.booleans()),
    st.tuples(st.just("pause"), st.booleans()),
    st.tuples(st.just("promote"), st.booleans()),
    st.tuples(st.just("rollback"), st.just(0)),
)


@dataclass
class World:
    state: CanaryState
    now: float = 0.0
    ready: bool = True
    paused: bool = False
    asked: int | None = None
    """The sample the machine asked for, until its verdict is first delivered."""


def analysis_canary(limit: int, bake: str | None) -> Any:
    def one(capacity: str, traffic: int) -> dict[str, Any]:
        found: dict[str, Any] = {
            "capacity": capacity,
            "traffic": traffic,
            "analysis": analysis(failure_limit=limit),
        }
        if bake is not None:
            found["pause"] = {"duration": bake}
        return found

    return canary_of(one("25%", 10), one("50%", 50), one("100%", 100))


@settings(max_examples=150, deadline=None)
@given(
    limit=st.integers(1, 3),
    bake=st.sampled_from([None, "3m"]),
    actions=st.lists(action, min_size=1, max_size=60),
)
def test_failed_checks_count_each_failing_sample_once_and_never_pass_the_limit(
    limit: int, bake: str | None, actions: list[tuple[Any, ...]]
) -> None:
    canary = analysis_canary(limit, bake)
    world = World(fresh())
    expected = 0

    def call(sample: SampleVerdict | None = None) -> None:
        nonlocal expected
        before = world.state
        ready = ready_for(canary, before.current_step) if world.ready else {}
        decision = step(
            canary, before, observe(ready, paused=world.paused, sample=sample), at(world.now), None
        )
        after = decision.state
        if sample is not None and sample.sequence == world.asked:
            world.asked = None
            expected += sample.verdict == "Fail"
        if after.current_step != before.current_step:
            world.asked = None  # the old step's sample is void
            if after.current_step < len(canary.steps):
                expected = 0  # a new step counts afresh; completion keeps the last step's count
        if decision.sample is not None:
            world.asked = decision.sample.sequence
        assert after.analysis_failed_checks <= limit
        assert after.analysis_failed_checks == expected
        world.state = after

    for kind, *args in actions:
        if kind == "wait":
            world.now += args[0]
        elif kind == "capacity":
            world.ready = args[0]
        elif kind == "pause":
            world.paused = args[0]
        elif kind == "verdict":
            outcome, offset, copies = args
            if world.state.sample_sequence == 0:
                continue
            sequence = world.state.sample_sequence + offset
            for _ in range(copies):
                call(SampleVerdict(sequence, at(world.now), outcome))
            continue
        call()


@settings(max_examples=150, deadline=None)
@given(actions=st.lists(action, min_size=1, max_size=60), manual=st.booleans())
def test_the_step_only_moves_forward_and_completion_means_every_step(
    actions: list[tuple[Any, ...]], manual: bool
) -> None:
    gate: dict[str, Any] = {"pause": {}} if manual else {"analysis": analysis(failure_limit=2)}
    canary = canary_of(
        {"capacity": "25%", "traffic": 10, **gate},
        {"capacity": 1, "traffic": 30, "pause": {"duration": "2m"}},
        {"capacity": "100%", "traffic": 100, **gate},
        scaleDownDelaySeconds=120,
    )
    world = World(fresh())
    for kind, *args in actions:
        state = world.state
        sample = None
        if kind == "wait":
            world.now += args[0]
        elif kind == "capacity":
            world.ready = args[0]
        elif kind == "pause":
            world.paused = args[0]
        elif kind == "verdict" and state.pending_sample is not None:
            sample = SampleVerdict(state.pending_sample, at(world.now), args[0])
        elif kind == "promote":
            found = steering.promote(canary, state, None, args[0], f"p{world.now}", world.paused)
            state = found.state or state
        elif kind == "rollback":
            state = steering.rollback(state, "r", world.paused).state or state
        ready = ready_for(canary, state.current_step) if world.ready else {}
        on_canary = ready if state.phase not in ("RollingBack", "RolledBack") else {}
        seen = observe(ready, paused=world.paused, sample=sample, on_canary=on_canary)
        after = step(canary, state, seen, at(world.now), 900.0).state
        assert after.current_step >= state.current_step
        assert after.current_step <= len(canary.steps)
        assert (after.phase == "Stable") == (after.current_step == len(canary.steps))
        if after.phase in ("RollingBack", "RolledBack"):
            assert after.observed_traffic_weight == 0
        elif after.step_entered and not after.pre_step_hold and after.phase != "Stable":
            assert after.observed_traffic_weight == canary.steps[after.current_step].traffic
        world.state = after
