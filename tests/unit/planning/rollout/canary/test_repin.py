"""Repinning a running run onto the live plan (§4)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from models.inferenceservice import RolloutSpec
from planning.rollout.canary import steering, texts
from planning.rollout.canary.repin import clamp, repin
from planning.rollout.canary.state import CanaryState
from planning.rollout.plan import RolloutPlan, resolve_plan
from tests.unit.planning.rollout.canary.rows import (
    FULL,
    at,
    canary_of,
    entered,
    go,
    observe,
    ready_for,
    with_promote,
)

pytestmark = pytest.mark.unit

THREE = [
    {"capacity": "25%", "traffic": 10, "pause": {}},
    {"capacity": "50%", "traffic": 40, "pause": {}},
    FULL,
]


def spec(steps: list[dict[str, Any]] | None = None, **group: Any) -> RolloutSpec:
    body: dict[str, Any] = {"components": ["engine", "decoder"], "canary": {"steps": steps or THREE}, **group}
    return RolloutSpec.model_validate({"groups": [body]})


def plan(rollout: RolloutSpec) -> RolloutPlan:
    found = resolve_plan(rollout)
    assert isinstance(found, RolloutPlan)
    return found


PINNED = plan(spec())
LIVE_STEPS = [{"capacity": "25%", "traffic": 10, "pause": {"duration": "5m"}}, FULL]
LIVE_SPEC = spec(LIVE_STEPS)
LIVE = plan(LIVE_SPEC)
RUNNING = entered(canary_of(*THREE), 1, at(0))


@pytest.mark.parametrize(
    "request_value, live, run_id, canary, result, message",
    [
        ("now", LIVE_SPEC, None, RUNNING, "refused", texts.REPIN_NO_RUN),
        ("now", LIVE_SPEC, "run-7", with_promote(RUNNING), "refused", texts.REPIN_MAILBOX),
        ("now", None, "run-7", RUNNING, "refused", texts.REPIN_EMPTY),
        ("now", RolloutSpec.model_validate({"groups": []}), "run-7", RUNNING, "refused", texts.REPIN_EMPTY),
        ("now", spec(), "run-7", RUNNING, "unchanged", texts.REPIN_ALREADY_PINNED),
        ("now", spec(soak="10m"), "run-7", RUNNING, "unchanged", texts.REPIN_ALREADY_PINNED),
        # The digest covers progressions only: topology changes come with a progression change here.
        ("now", spec(LIVE_STEPS, soak="10m"), "run-7", RUNNING, "refused", texts.REPIN_TOPOLOGY),
        ("now", spec(LIVE_STEPS, maintainRatio={}), "run-7", RUNNING, "refused", texts.REPIN_TOPOLOGY),
        (
            "now",
            RolloutSpec.model_validate({"groups": [{"components": ["engine", "decoder"], "blueGreen": {}}]}),
            "run-7",
            RUNNING,
            "refused",
            texts.REPIN_TOPOLOGY,
        ),
        (
            "now",
            RolloutSpec.model_validate(
                {"groups": [{"components": ["decoder", "engine"], "canary": {"steps": LIVE_STEPS}}]}
            ),
            "run-7",
            RUNNING,
            "refused",
            texts.REPIN_TOPOLOGY,
        ),
    ],
    ids=[
        "no active run",
        "a mailbox is present",
        "no live rollout",
        "no live groups",
        "already pinned",
        "a soak-only edit renders the pinned digest",
        "soak changed",
        "maintainRatio added",
        "progression kind changed",
        "component order changed",
    ],
)
def test_repin_refusals(
    request_value: str,
    live: RolloutSpec | None,
    run_id: str | None,
    canary: CanaryState,
    result: str,
    message: str,
) -> None:
    found = repin(request_value, PINNED, live, run_id, canary, at(10))
    assert (found.result, found.message, found.event, found.plan, found.canary) == (
        result,
        message,
        None,
        PINNED,
        canary,
    )


def test_a_stale_digest_is_rejected_with_a_warning_naming_both_digests() -> None:
    found = repin("rp1:000000000000", PINNED, LIVE_SPEC, "run-7", RUNNING, at(10))
    expected = (
        f"expected render digest rp1:000000000000 but the current render is {LIVE.digest} "
        "(a concurrent edit landed; re-issue with the current digest)"
    )
    assert (found.result, found.message) == ("rejected", expected)
    assert found.event is not None and (found.event.type, found.event.reason) == (
        "Warning",
        texts.REPIN_REJECTED,
    )


def test_a_live_source_that_does_not_render_is_rejected() -> None:
    live = RolloutSpec.model_validate(
        {"groups": [{"components": ["engine", "decoder"], "policyRef": {"name": "p"}}]}
    )
    found = repin("now", PINNED, live, "run-7", RUNNING, at(10))
    assert (found.result, found.message) == ("rejected", "the current source does not render: PolicyNotFound")


def test_two_canary_groups_are_refused() -> None:
    def two(steps: list[dict[str, Any]]) -> RolloutSpec:
        return RolloutSpec.model_validate(
            {
                "groupOrdering": "Concurrent",
                "groups": [
                    {"components": ["router"], "canary": {"steps": steps}},
                    {"components": ["engine", "decoder"], "canary": {"steps": steps}},
                ],
            }
        )

    found = repin("now", plan(two(THREE)), two([FULL]), "run-7", RUNNING, at(10))
    assert (found.result, found.message) == ("refused", texts.REPIN_CANARY_GROUPS)


@pytest.mark.parametrize("value", ["now", LIVE.digest], ids=["now", "the live digest"])
def test_an_applied_repin_pins_the_live_plan_and_says_so(value: str) -> None:
    found = repin(value, PINNED, LIVE_SPEC, "run-7", RUNNING, at(10))
    assert found.result == "applied" and found.plan == LIVE
    message = f"run run-7 repinned: {PINNED.digest} -> {LIVE.digest}"
    assert found.event is not None and (found.event.type, found.event.reason, found.event.message) == (
        "Normal",
        texts.PLAN_REPINNED,
        message,
    )
    assert found.canary is not None and found.canary.current_step == 1 and found.canary.pre_step_hold


@pytest.mark.parametrize(
    "index, phase, weight, steps, expected",
    [
        (
            1,
            "Paused",
            40,
            [{"capacity": "25%", "traffic": 10}, {"capacity": "50%", "traffic": 40}, FULL],
            (1, False, "Paused", 40),
        ),
        (
            1,
            "Paused",
            40,
            [{"capacity": "25%", "traffic": 10}, {"capacity": "50%", "traffic": 60}, FULL],
            (1, True, "Pending", 40),
        ),
        (
            1,
            "Paused",
            40,
            [{"capacity": "25%", "traffic": 10}, {"capacity": "50%", "traffic": 20}, FULL],
            (1, False, "Paused", 20),
        ),
        (2, "Paused", 100, [{"capacity": "25%", "traffic": 10}, FULL], (1, False, "Paused", 100)),
        (1, "Paused", 40, [FULL], (0, True, "Pending", 40)),
        (3, "Stable", 100, [FULL], (3, False, "Stable", 100)),
        (1, "RollingBack", 0, [FULL], (1, False, "RollingBack", 0)),
    ],
    ids=[
        "same traffic: step kept",
        "more traffic: CanaryPreStep hold",
        "less traffic: recorded at once",
        "fewer steps: clamped to the last",
        "clamped to a step with more traffic: hold",
        "finished stays finished",
        "rolling back stays",
    ],
)
def test_clamping_the_running_canary(
    index: int, phase: str, weight: int, steps: list[dict[str, Any]], expected: tuple[int, bool, str, int]
) -> None:
    state = replace(RUNNING, current_step=index, phase=phase, observed_traffic_weight=weight)  # type: ignore[arg-type]
    found = clamp(state, canary_of(*steps), at(10))
    assert (found.current_step, found.pre_step_hold, found.phase, found.observed_traffic_weight) == expected


def test_a_pre_step_hold_converges_capacity_then_waits_for_a_promote_naming_the_canary() -> None:
    new = canary_of({"capacity": "25%", "traffic": 10}, {"capacity": "50%", "traffic": 60}, FULL)
    held = clamp(RUNNING, new, at(10))
    ready = ready_for(new, 1)
    pending = go(new, held, observe({"engine": 1}), 20)
    assert (pending.state.phase, pending.traffic_weight) == ("Pending", 40)
    paused = go(new, pending.state, observe(ready), 30)
    assert (paused.state.phase, paused.state.pre_step_hold, paused.traffic_weight) == ("Paused", True, 40)
    assert go(new, paused.state, observe(ready), 10_000).state.current_step == 1  # never advances by itself
    promote = steering.promote(new, paused.state, "e2", request_id="p5")
    assert promote.accepted and promote.state is not None
    released = go(new, promote.state, observe(ready), 40)
    assert released.state.pre_step_hold is False
    # Step 2 entered (traffic 60% recorded), its Immediate gate passed: step 3 waits for its capacity.
    assert (released.state.current_step, released.state.phase, released.traffic_weight) == (2, "Pending", 60)
    assert released.events[0].reason == texts.PRE_STEP_RELEASED
    assert released.state.promoted_through == "p5"
