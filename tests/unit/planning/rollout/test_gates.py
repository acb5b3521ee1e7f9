"""How far each grouped component may move at each moment, or the gate that holds it."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from models.inferenceservice import RolloutSpec
from planning.replica.hold import HoldGate
from planning.rollout.gates import (
    Allowance,
    ComponentProgress,
    allowances,
    drain_in_band,
    surge_in_band,
    wave_limit,
)
from planning.rollout.plan import RolloutPlan, resolve_plan

pytestmark = pytest.mark.unit

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def plan_of(rollout: dict[str, Any]) -> RolloutPlan:
    plan = resolve_plan(RolloutSpec.model_validate(rollout))
    assert isinstance(plan, RolloutPlan)
    return plan


def by_name(found: list[Allowance]) -> dict[str, Allowance]:
    return {a.component: a for a in found}


@pytest.mark.parametrize(
    "replicas, limits",
    [(1, [0, 1, 1, 1, 1]), (2, [0, 1, 1, 2, 2]), (4, [0, 1, 2, 3, 4]), (10, [0, 3, 5, 8, 10]), (0, [0] * 5)],
)
def test_blue_green_waves_move_at_most_25_percent_rounded_up(replicas: int, limits: list[int]) -> None:
    assert [wave_limit(replicas, wave) for wave in range(5)] == limits
    steps = [b - a for a, b in zip(limits, limits[1:], strict=False)]
    assert all(step <= -(-replicas // 4) for step in steps)


BLUE_GREEN = plan_of({"groups": [{"components": ["engine", "decoder"]}]})


@pytest.mark.parametrize(
    "engine, decoder, expected",
    [
        # Nothing moved yet: wave 1 lets each move its first 25%.
        ((4, 0, 0), (2, 0, 0), {"engine": 1, "decoder": 1}),
        # The engine's first moved but the decoder's isn't serving: the engine waits for it.
        ((4, 1, 1), (2, 1, 0), {"engine": 1, "decoder": 1}),
        # Both serve wave 1: wave 2.
        ((4, 1, 1), (2, 1, 1), {"engine": 2, "decoder": 1}),
        ((4, 2, 2), (2, 1, 1), {"engine": 3, "decoder": 2}),
        ((4, 4, 4), (2, 2, 2), {"engine": 4, "decoder": 2}),
    ],
)
def test_a_blue_green_group_moves_together_wave_by_wave(
    engine: tuple[int, int, int], decoder: tuple[int, int, int], expected: dict[str, int]
) -> None:
    progress = {
        name: ComponentProgress(name, replicas=r, updated=u, updated_serving=s)
        for name, (r, u, s) in (("engine", engine), ("decoder", decoder))
    }
    found = by_name(allowances(BLUE_GREEN, progress, T0))
    assert {name: a.limit for name, a in found.items()} == expected


def test_a_component_waiting_for_its_group_says_for_whom() -> None:
    progress = {
        "engine": ComponentProgress("engine", replicas=4, updated=1, updated_serving=1),
        "decoder": ComponentProgress("decoder", replicas=2, updated=1, updated_serving=0),
    }
    engine = by_name(allowances(BLUE_GREEN, progress, T0))["engine"]
    assert engine.hold is not None and engine.hold.gate == HoldGate.BUDGET
    assert engine.hold.reason == (
        "blue-green wave 1 of 4: engine moved 1/4 Instances; waits for decoder (0/1 serving) on the new revision"
    )


def test_components_outside_groups_and_unchanged_ones_get_no_allowance() -> None:
    progress = {
        "engine": ComponentProgress("engine", replicas=1),
        "decoder": ComponentProgress("decoder", replicas=1, changed=False),
        "router": ComponentProgress("router", replicas=1),
    }
    assert [a.component for a in allowances(BLUE_GREEN, progress, T0)] == ["engine"]


SEQUENCE = plan_of({"groups": [{"components": ["decoder"], "soak": "10m"}, {"components": ["engine"]}]})


@pytest.mark.parametrize(
    "decoder, now, engine_limit, reason, wake",
    [
        (ComponentProgress("decoder", 1), T0, 0, "Sequential waiting on decoder", None),
        (
            ComponentProgress("decoder", 1, updated=1, updated_serving=1, finished_at=T0),
            T0 + timedelta(minutes=4),
            0,
            "Sequential.Soak: engine waiting out the 10m0s soak after decoder",
            T0 + timedelta(minutes=10),
        ),
        (ComponentProgress("decoder", 1, updated=1, updated_serving=1, finished_at=T0), T0 + timedelta(minutes=10), 1, None, None),
        # The change leaves the decoder alone: the engine goes at once.
        (ComponentProgress("decoder", 1, changed=False), T0, 1, None, None),
        # A failed decoder keeps the engine waiting.
        (ComponentProgress("decoder", 1, updated=1, failed=1), T0 + timedelta(hours=5), 0, "Sequential waiting on decoder", None),
    ],
    ids=["decoder rolling", "soak", "soak over", "decoder unchanged", "decoder failed"],
)
def test_a_sequence_rolls_one_component_at_a_time_with_the_soak(
    decoder: ComponentProgress, now: datetime, engine_limit: int, reason: str | None, wake: datetime | None
) -> None:
    progress = {"decoder": decoder, "engine": ComponentProgress("engine", 1)}
    engine = by_name(allowances(SEQUENCE, progress, now))["engine"]
    assert engine.limit == engine_limit
    assert (engine.hold.reason if engine.hold else None) == reason
    assert engine.hold is None or engine.hold.gate == HoldGate.SEQUENTIAL
    assert engine.wake_at == wake


RATIO = plan_of(
    {
        "groups": [
            {
                "components": ["engine", "decoder"],
                "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
                "maintainRatio": {"tolerance": 25},
            }
        ]
    }
)


@pytest.mark.parametrize(
    "engine_updated, decoder_updated, held",
    [
        (0, 0, None),  # level: both may move, though a decoder's move is 50%
        (0, 1, "decoder"),  # decoder 50% -> would be 100%, engine 0%
        (1, 1, "decoder"),  # 100% vs 25%: 75% further
        (2, 1, None),  # level at 50%: both may move (the decoder to 100%, the engine to 75%)
        (3, 1, "engine"),  # engine 75% -> 100% vs 50%; the decoder, behind, moves
        (1, 0, "engine"),  # engine 25% -> 50% vs 0%
        (4, 1, None),  # the engine is done; the decoder, behind, moves
    ],
)
def test_a_move_that_would_put_a_component_too_far_ahead_is_held_at_ratio(
    engine_updated: int, decoder_updated: int, held: str | None
) -> None:
    progress = {
        "engine": ComponentProgress("engine", 4, updated=engine_updated, updated_serving=engine_updated, serving=4),
        "decoder": ComponentProgress("decoder", 2, updated=decoder_updated, updated_serving=decoder_updated, serving=2),
    }
    found = by_name(allowances(RATIO, progress, T0))
    gated = {name for name, a in found.items() if a.hold is not None and a.hold.gate == HoldGate.RATIO}
    assert gated == ({held} if held else set())


def test_the_ratio_hold_says_how_far_each_component_is() -> None:
    progress = {
        "engine": ComponentProgress("engine", 4, updated=1, updated_serving=1, serving=4),
        "decoder": ComponentProgress("decoder", 2, updated=1, updated_serving=1, serving=2),
    }
    decoder = by_name(allowances(RATIO, progress, T0))["decoder"]
    assert decoder.limit == 1 and decoder.hold is not None
    assert decoder.hold.reason == (
        "decoder is 50% through its rollout; one more Instance would put it at 100%, "
        "more than 25% further than engine (25%)"
    )


def test_in_place_components_skip_the_ratio_check() -> None:
    progress = {
        "engine": ComponentProgress("engine", 4, serving=4),
        "decoder": ComponentProgress("decoder", 2, updated=2, serving=2, in_place=True),
    }
    assert all(a.hold is None for a in allowances(RATIO, progress, T0))


@pytest.mark.parametrize(
    "engine_serving, decoder_serving, tolerance, surge_ok",
    [
        (4, 2, 25, True),  # balanced: one surge is always admitted
        (4, 2, 0, True),
        (5, 2, 25, False),  # 6:2 = 3.0, 50% off 2:1
        (4, 3, 25, True),  # 5:3 = 1.67, within 2 x (1 +- 25%)
        (4, 3, 5, False),
    ],
)
def test_surge_band(engine_serving: int, decoder_serving: int, tolerance: int, surge_ok: bool) -> None:
    engine = ComponentProgress("engine", 4, serving=engine_serving)
    decoder = ComponentProgress("decoder", 2, serving=decoder_serving)
    assert surge_in_band(engine, decoder, tolerance) is surge_ok


@pytest.mark.parametrize(
    "engine_serving, decoder_serving, tolerance, drain_ok",
    [(5, 2, 25, True), (4, 2, 25, True), (4, 2, 10, False), (4, 3, 25, True)],
)
def test_drain_band_admits_an_overshoot_within_twice_the_band(
    engine_serving: int, decoder_serving: int, tolerance: int, drain_ok: bool
) -> None:
    engine = ComponentProgress("engine", 4, serving=engine_serving)
    decoder = ComponentProgress("decoder", 2, serving=decoder_serving)
    assert drain_in_band(engine, decoder, tolerance) is drain_ok


def test_four_engines_and_two_decoders_by_rolling_update_keep_the_ratio_band() -> None:
    """The seed's 4+2 group, maxSurge 1, tolerance 25, moved one surge and one drain at a time
    as the allowances let: every serving ratio sampled stays in the band but for the escapes."""
    tol = 25
    state = {
        "engine": ComponentProgress("engine", 4, serving=4),
        "decoder": ComponentProgress("decoder", 2, serving=2),
    }
    samples: list[tuple[int, int]] = []
    for _ in range(50):
        if all(c.finished for c in state.values()):
            break
        found = by_name(allowances(RATIO, state, T0))
        movable = [n for n in ("engine", "decoder") if found[n].limit > state[n].updated and found[n].hold is None]
        assert movable, f"deadlock at {state}"
        name = min(movable, key=lambda n: state[n].fraction)
        c = state[name]
        # Surge: a new Instance serves, then the old one drains.
        state[name] = c = replace(c, updated=c.updated + 1, serving=c.serving + 1, updated_serving=c.updated_serving + 1)
        samples.append((state["engine"].serving, state["decoder"].serving))
        state[name] = replace(c, serving=c.serving - 1)
        samples.append((state["engine"].serving, state["decoder"].serving))
    assert all(c.finished for c in state.values())
    anchor = 2.0
    for engine, decoder in samples:
        off = abs(engine / decoder / anchor - 1) * 100
        # Out of the band only by the balanced-pool surge escape (one decoder surge on 4:2).
        assert off <= tol or (engine, decoder) == (4, 3), samples


def test_groups_run_side_by_side_under_concurrent_ordering() -> None:
    plan = plan_of(
        {
            "groupOrdering": "Concurrent",
            "groups": [{"components": ["router"]}, {"components": ["engine", "decoder"], "rollingUpdate": {}}],
        }
    )
    progress = {n: ComponentProgress(n, 4) for n in ("router", "engine", "decoder")}
    found = by_name(allowances(plan, progress, T0))
    assert {n: a.limit for n, a in found.items()} == {"router": 1, "engine": 4, "decoder": 4}


def test_a_surge_that_would_skew_the_serving_ratio_is_held_at_ratio() -> None:
    """The engine is behind (25% to the decoder's 50%), but its first surge still serves
    beside the old Instance (5:2): one more would make 6:2, 50% off the anchor 2:1."""
    progress = {
        "engine": ComponentProgress("engine", 4, updated=1, updated_serving=1, serving=5),
        "decoder": ComponentProgress("decoder", 2, updated=1, updated_serving=1, serving=2),
    }
    engine = by_name(allowances(RATIO, progress, T0))["engine"]
    assert engine.limit == 1 and engine.hold is not None and engine.hold.gate == HoldGate.RATIO
    assert engine.hold.reason == "surge would skew cross-Component serving ratio past tolerance"


def test_a_failed_component_does_not_stop_its_blue_green_peers() -> None:
    progress = {
        "engine": ComponentProgress("engine", 4, updated=1, updated_serving=0, failed=1),
        "decoder": ComponentProgress("decoder", 2, updated=1, updated_serving=1),
    }
    found = by_name(allowances(BLUE_GREEN, progress, T0))
    assert found["decoder"].limit == 2, "the decoder goes on past the failed engine's wave"
    assert found["engine"].limit == 1


def test_a_drain_first_strategy_is_held_when_its_drain_would_skew_the_ratio() -> None:
    """RecreatePod takes an Instance out first: 3:2 -> 2:2 is 50% off 2:1, past twice 20%."""
    plan = plan_of(
        {"groups": [{"components": ["engine", "decoder"], "rollingUpdate": {}, "maintainRatio": {"tolerance": 20}}]}
    )
    progress = {
        "engine": ComponentProgress("engine", 4, updated=1, serving=3, surges=False),
        "decoder": ComponentProgress("decoder", 2, updated=1, updated_serving=1, serving=2, surges=False),
    }
    engine = by_name(allowances(plan, progress, T0))["engine"]
    assert engine.hold is not None and engine.hold.gate == HoldGate.RATIO
    assert engine.hold.reason == "drain would skew cross-Component serving ratio past tolerance"


@pytest.mark.parametrize(
    "engine_updated, decoder_updated, engine_limit, decoder_limit",
    [
        (0, 0, 1, 1),  # level: one move each, then the drift is checked again
        (1, 1, 3, 1),  # decoder 50% vs engine 25%: the decoder waits, the engine may reach 75%
        (2, 1, 3, 2),  # level at 50%: each may move one more
        (4, 1, 4, 2),  # the engine is done: no cap on the decoder
    ],
)
def test_a_ratio_group_caps_each_component_to_the_drift_it_may_reach(
    engine_updated: int, decoder_updated: int, engine_limit: int, decoder_limit: int
) -> None:
    """An InferenceReplica moves up to its limit without waiting for the next report: a limit
    of all its replicas would let a quick component run past the tolerance between reports."""
    progress = {
        "engine": ComponentProgress("engine", 4, updated=engine_updated, updated_serving=engine_updated, serving=4),
        "decoder": ComponentProgress("decoder", 2, updated=decoder_updated, updated_serving=decoder_updated, serving=2),
    }
    found = by_name(allowances(RATIO, progress, T0))
    assert (found["engine"].limit, found["decoder"].limit) == (engine_limit, decoder_limit)
