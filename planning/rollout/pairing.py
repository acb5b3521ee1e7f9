"""The pairing-protocol transition: at least one engine and decoder pair with the same
`spec.rollout.pairingProtocol` token serves at every moment (spec: the rollout groups page,
"Change the engine-decoder wire protocol"; reference §6, gate `Pairing`).

A new token gives the engine and the decoder a new revision, rolled out in one blue-green
group. A pod of one cohort (token) pairs only with a pod of the other component in the same
cohort. The drain of an old pod waits, gate `Pairing`, in two cases:
1. its component's replacement cannot pair yet, because no serving pod of the other
   component runs the new token, and the other component also updates by SurgeThenDrain
   (its new pods come up whether or not a drain waits, so the hold cannot deadlock);
2. the drain would take the last same-token pair out of service: it waits until the new
   token serves on both components.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from planning.replica.hold import HoldGate
from planning.rollout.gates import Allowance, ComponentProgress, Hold
from planning.rollout.plan import RolloutPlan

PAIRED = ("engine", "decoder")


@dataclass(frozen=True)
class Cohorts:
    """Serving Instances of one component per token during a transition."""

    component: str
    old_serving: int
    new_serving: int
    surges: bool = True


def _pairs(a_old: int, a_new: int, b_old: int, b_new: int) -> int:
    return min(a_old, b_old) + min(a_new, b_new)


def drain_hold(draining: Cohorts, other: Cohorts, old_token: str, new_token: str) -> Hold | None:
    """Whether the drain of one old-token serving Instance of `draining` must wait."""
    name, peer = draining.component, other.component
    if draining.old_serving <= 0:
        return None
    # Set before the replacement serves: a SurgeThenDrain Instance drains the moment it does.
    if other.new_serving == 0 and other.surges:
        return Hold(
            HoldGate.PAIRING,
            f'pairing protocol transition to "{new_token}": the replacement {name} cannot pair because '
            f'no serving {peer} runs cohort "{new_token}" yet; holding the drain of the serving {name} '
            f'of cohort "{old_token}" until one does',
            f'a serving {peer} of cohort "{new_token}"',
        )
    before = _pairs(draining.old_serving, draining.new_serving, other.old_serving, other.new_serving)
    after = _pairs(draining.old_serving - 1, draining.new_serving, other.old_serving, other.new_serving)
    if before > 0 and after == 0:
        return Hold(
            HoldGate.PAIRING,
            f'pairing protocol transition to "{new_token}": draining the serving {name} of cohort '
            f'"{old_token}" would leave no {PAIRED[0]} and {PAIRED[1]} pair serving; holding it until '
            f'cohort "{new_token}" serves on both',
            f'cohort "{new_token}" serving on both {PAIRED[0]} and {PAIRED[1]}',
        )
    return None


def pair_serves(engine: Cohorts, decoder: Cohorts) -> bool:
    """The invariant: some engine and decoder of the same token serve."""
    return _pairs(engine.old_serving, engine.new_serving, decoder.old_serving, decoder.new_serving) > 0


def transition(plan: RolloutPlan, pairing_from: str | None) -> tuple[str, str] | None:
    """(old token, new token) while the run changes the pairing protocol of an engine and a
    decoder rolled out in one group; None otherwise (setting a token first, or clearing it)."""
    new = plan.pairing_protocol
    group = plan.group_of(PAIRED[0])
    if not pairing_from or not new or pairing_from == new or group is None or PAIRED[1] not in group.components:
        return None
    return pairing_from, new


def cohorts(c: ComponentProgress) -> Cohorts:
    """Serving per token: an Instance at a held drain serves both its old and its new pod."""
    new = c.updated_serving + c.surge_serving
    return Cohorts(c.name, old_serving=max(0, c.serving - c.updated_serving), new_serving=new, surges=c.surges)


def with_pairing(
    plan: RolloutPlan, progress: Mapping[str, ComponentProgress], found: list[Allowance], pairing_from: str | None
) -> list[Allowance]:
    """The allowances with each paired component's drain hold; a held component with no other
    hold shows the `Pairing` gate."""
    tokens = transition(plan, pairing_from)
    if tokens is None or any(name not in progress for name in PAIRED):
        return found
    engine, decoder = (cohorts(progress[name]) for name in PAIRED)
    holds = {
        PAIRED[0]: drain_hold(engine, decoder, *tokens),
        PAIRED[1]: drain_hold(decoder, engine, *tokens),
    }
    return [
        replace(a, drain_hold=holds[a.component], hold=a.hold or holds[a.component]) if a.component in holds else a
        for a in found
    ]
