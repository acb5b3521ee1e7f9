"""The pairing-protocol transition: a same-token engine and decoder pair serves throughout."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from models.inferenceservice import RolloutSpec
from planning.replica.hold import HoldGate
from planning.rollout.gates import ComponentProgress, allowances
from planning.rollout.pairing import Cohorts, drain_hold, pair_serves, with_pairing
from planning.rollout.plan import RolloutPlan, resolve_plan

pytestmark = pytest.mark.unit

NOW = datetime(2026, 12, 1, tzinfo=UTC)

SEED_REASON = (
    'pairing protocol transition to "kv-v2": the replacement engine cannot pair because no serving '
    'decoder runs cohort "kv-v2" yet; holding the drain of the serving engine of cohort "kv-v1" until one does'
)


def test_the_replacement_that_cannot_pair_holds_the_drain_with_the_seed_reason() -> None:
    engine = Cohorts("engine", old_serving=1, new_serving=1)
    decoder = Cohorts("decoder", old_serving=1, new_serving=0)
    hold = drain_hold(engine, decoder, "kv-v1", "kv-v2")
    assert hold is not None and hold.gate == HoldGate.PAIRING and hold.reason == SEED_REASON


def test_the_other_components_first_new_token_pod_releases_the_hold() -> None:
    engine = Cohorts("engine", old_serving=1, new_serving=1)
    decoder = Cohorts("decoder", old_serving=1, new_serving=1)
    assert drain_hold(engine, decoder, "kv-v1", "kv-v2") is None


def test_a_recreating_peer_does_not_hold_by_the_first_case() -> None:
    """The first case needs the other component to surge; under RecreatePod it only runs the
    new token once its old pods leave rotation, so holding would deadlock."""
    engine = Cohorts("engine", old_serving=2, new_serving=1)
    decoder = Cohorts("decoder", old_serving=1, new_serving=0, surges=False)
    assert drain_hold(engine, decoder, "kv-v1", "kv-v2") is None


def test_the_drain_of_the_last_same_token_pair_waits_for_the_new_token_on_both() -> None:
    engine = Cohorts("engine", old_serving=1, new_serving=0, surges=False)
    decoder = Cohorts("decoder", old_serving=1, new_serving=0, surges=False)
    hold = drain_hold(engine, decoder, "kv-v1", "kv-v2")
    assert hold is not None and hold.gate == HoldGate.PAIRING
    assert hold.reason.startswith('pairing protocol transition to "kv-v2": draining the serving engine of cohort "kv-v1"')


@pytest.mark.parametrize("engines, decoders", [(1, 1), (2, 1), (4, 2)])
def test_surge_then_drain_on_both_keeps_a_pair_serving_through_the_change(engines: int, decoders: int) -> None:
    """Both components surge: each new pod comes up whatever waits, and each old pod drains
    only when its drain is not held; a same-token pair serves at every step, and it ends."""
    state = {"engine": [engines, 0, engines], "decoder": [decoders, 0, decoders]}  # old, new, left to surge
    for _ in range(40):
        if all(old == 0 for old, _, _ in state.values()):
            break
        for name, other in (("engine", "decoder"), ("decoder", "engine")):
            old, new, left = state[name]
            if left:  # surge: one new pod comes up whatever waits
                state[name] = [old, new + 1, left - 1]
            e, d = state["engine"], state["decoder"]
            assert pair_serves(Cohorts("engine", e[0], e[1]), Cohorts("decoder", d[0], d[1]))
            old, new, left = state[name]
            peer = state[other]
            if old and drain_hold(Cohorts(name, old, new), Cohorts(other, peer[0], peer[1]), "kv-v1", "kv-v2") is None:
                state[name] = [old - 1, new, left]
            e, d = state["engine"], state["decoder"]
            assert pair_serves(Cohorts("engine", e[0], e[1]), Cohorts("decoder", d[0], d[1]))
    assert state == {"engine": [0, engines, 0], "decoder": [0, decoders, 0]}


def _plan(pairing: str) -> RolloutPlan:
    plan = resolve_plan(
        RolloutSpec.model_validate({"pairingProtocol": pairing, "groups": [{"components": ["engine", "decoder"], "blueGreen": {}}]})
    )
    assert isinstance(plan, RolloutPlan)
    return plan


@pytest.mark.parametrize(
    "pairing_from, engine_new, decoder_new, held",
    [
        # Before either new pod serves, both drains are held: a Instance drains the moment its surge serves.
        ("kv-v1", 0, 0, {"engine", "decoder"}),
        ("kv-v1", 1, 0, {"engine", "decoder"}),
        ("kv-v1", 1, 1, set()),
        # Setting a token for the first time, or keeping it, is no transition.
        (None, 0, 0, set()),
        ("kv-v2", 0, 0, set()),
    ],
)
def test_the_run_holds_the_drains_until_the_new_token_pairs(
    pairing_from: str | None, engine_new: int, decoder_new: int, held: set[str]
) -> None:
    plan = _plan("kv-v2")
    progress = {
        "engine": ComponentProgress("engine", 1, updated=1, updated_serving=engine_new, serving=1 + engine_new),
        "decoder": ComponentProgress("decoder", 1, updated=1, updated_serving=decoder_new, serving=1 + decoder_new),
    }
    found = with_pairing(plan, progress, allowances(plan, progress, NOW), pairing_from)
    assert {a.component for a in found if a.drain_hold is not None} == held
    for allowance in found:
        if allowance.drain_hold is not None:
            assert allowance.hold is not None and allowance.hold.gate == HoldGate.PAIRING
    if "engine" in held and engine_new:
        engine = next(a for a in found if a.component == "engine")
        assert engine.drain_hold is not None and engine.drain_hold.reason == SEED_REASON
