"""Pause and resume of an InferenceService, as pure decisions (reference §5).

Pause has two depths: `true` (a fleet-change pause) and `freeze` (also stops repairs).
While paused, no Instance starts an update, no new Instance starts (one being created may
finish), migrations neither start nor advance, and spec changes wait; repairs continue at
`true` and stop at `freeze`; kubelet restarts, scale-down and deletion always proceed (the
InferenceReplicas and Instances enforce this from `spec.pauseMode`). Resume removes either
depth. Pausing needs active work to pause, never downgrades a freeze, and resuming needs a
pause; refusals use the spec's wording.

Deletion (§15) is the workflow's `tear_down` (`workflows.service.components`): every
InferenceReplica drains and removes its Instances, then its own object; then each
component's PodDisruptionBudget or Deployment and its Service; the InferenceService object
last, so while anything remains `kubectl get inferenceservice` still shows it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class PauseMode(StrEnum):
    """`ome.io/rollout-paused` values: `true` is Recover (repairs go on), `freeze` stops them."""

    RECOVER = "true"
    FREEZE = "freeze"


REFUSED_ALREADY_PAUSED = "action refused: service is already paused; freeze is preserved"
REFUSED_NOT_PAUSED = "action refused: service has no recognized pause"
REFUSED_NO_WORK = "action refused: no applicable active rollout or lifecycle work was observed"


def parse_pause_mode(value: str | None) -> PauseMode | None:
    """A pause value exactly as the annotation takes it; anything else (e.g. `True`) is no pause."""
    if value == PauseMode.RECOVER.value:
        return PauseMode.RECOVER
    if value == PauseMode.FREEZE.value:
        return PauseMode.FREEZE
    return None


@dataclass(frozen=True)
class PauseDecision:
    mode: PauseMode | None
    refusal: str | None = None


def request_pause(current: PauseMode | None, requested: PauseMode, active_work: bool) -> PauseDecision:
    """Pause at `requested` depth: a freeze is never downgraded, and idle services refuse."""
    if current == PauseMode.FREEZE or current == requested:
        return PauseDecision(current, REFUSED_ALREADY_PAUSED)
    if current is None and not active_work:
        return PauseDecision(None, REFUSED_NO_WORK)
    return PauseDecision(requested)


def request_resume(current: PauseMode | None) -> PauseDecision:
    if current is None:
        return PauseDecision(None, REFUSED_NOT_PAUSED)
    return PauseDecision(None)
