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

from dataclasses import dataclass

from planning.replica.hold import HoldGate
from planning.rollout.gates import Hold

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
    if other.new_serving == 0 and other.surges and draining.new_serving > 0:
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
