"""The InferenceService `pause` / `resume` signals, as pure decisions (spec reference §5).

The `pause` signal takes what the `ome.io/rollout-paused` annotation takes: no input (or
`"true"`, or JSON `true`) is a fleet-change pause, `"freeze"` also stops repairs. Any other
value (e.g. `"True"`) is not a pause: the signal is refused with an Event naming the value
and the fix. A pause never downgrades a freeze, and pausing what is already paused at that
depth is refused with the spec's text; `resume` removes either depth and is refused when
there is no pause. Refusals become Events on the InferenceService (`PauseRefused`,
`ResumeRefused`), since a signal has no answer.

The depth is projected onto each OMENative InferenceReplica as `spec.pauseMode`
(`Recover` / `Freeze`), and from there onto every Instance.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from models.instance import InstancePauseMode
from planning.service.pause import PauseMode, parse_pause_mode, request_pause, request_resume

EventType = Literal["Normal", "Warning"]
PlannedPauseEvent = tuple[str, str, EventType]
"""(reason, message, type) of an Event on the InferenceService."""

PAUSE_REFUSED = "PauseRefused"
RESUME_REFUSED = "ResumeRefused"
PAUSED = "Paused"
RESUMED = "Resumed"


def invalid_pause_message(value: object) -> str:
    shown = json.dumps(value) if not isinstance(value, str) else f'"{value}"'
    return (
        f"action refused: pause value {shown} is not a pause; send the pause signal with no input "
        'for a fleet-change pause (true), or with input "freeze" to stop repairs too'
    )


DISCARD_PENDING = "discard_pending_actions"
"""`pause` input `{"mode": "true", "discard_pending_actions": true}`: also drops the promote and
rollback requests a canary has not acted on yet (the CLI's `--discard-pending-actions`)."""


def discards_pending(value: object) -> bool:
    return isinstance(value, dict) and value.get(DISCARD_PENDING) is True


def pause_mode_of(value: object) -> PauseMode | None:
    """The depth a `pause` signal input asks for; None when the value is not a pause."""
    if isinstance(value, dict) and set(value) <= {"mode", DISCARD_PENDING}:
        value = value.get("mode")
    if value is None or value is True:
        return PauseMode.RECOVER
    if isinstance(value, str):
        return parse_pause_mode(value)
    return None


@dataclass(frozen=True)
class PauseOutcome:
    """The depth after the signal, and the Event to record: (reason, message, type)."""

    mode: PauseMode | None
    event: PlannedPauseEvent


def on_pause(current: PauseMode | None, value: object) -> PauseOutcome:
    requested = pause_mode_of(value)
    if requested is None:
        return PauseOutcome(current, (PAUSE_REFUSED, invalid_pause_message(value), "Warning"))
    # The signal acts whether or not work is in flight: a pause also holds what comes next.
    decision = request_pause(current, requested, active_work=True)
    if decision.refusal is not None:
        return PauseOutcome(current, (PAUSE_REFUSED, decision.refusal, "Warning"))
    return PauseOutcome(decision.mode, (PAUSED, f"rollout paused ({requested.value})", "Normal"))


def on_resume(current: PauseMode | None) -> PauseOutcome:
    decision = request_resume(current)
    if decision.refusal is not None:
        return PauseOutcome(current, (RESUME_REFUSED, decision.refusal, "Warning"))
    shown = current.value if current is not None else ""
    return PauseOutcome(None, (RESUMED, f"rollout resumed (was {shown})", "Normal"))


def replica_pause_mode(mode: PauseMode | None) -> InstancePauseMode | None:
    """`spec.pauseMode` of the InferenceReplicas, also what every Instance is told."""
    if mode is None:
        return None
    return "Freeze" if mode == PauseMode.FREEZE else "Recover"
