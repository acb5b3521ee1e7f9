"""What a canary step waits for: its gate and the clocks it reads (spec reference §1.2, §1.4
step 3, §2.1).

| Gate        | Step config          | Passes when                                               |
| `Immediate` | capacity and traffic | at once, when its weight is recorded                      |
| `Timed`     | `pause.duration`     | the duration has elapsed since the new Instances were ready |
| `Manual`    | `pause: {}`          | a promote                                                 |
| `Analysis`  | `analysis`           | a passing sample after `initialDelay` and no earlier than `pause.duration` (minimum bake); a promote with override |

On an analysis step, `pause.duration` is the minimum bake and `pause: {}` is ignored.
"""

from __future__ import annotations

from typing import Literal

from models.duration import parse_duration
from models.inferenceservice import CanaryStep, GroupCanary

Gate = Literal["Immediate", "Timed", "Manual", "Analysis"]


def gate_of(step: CanaryStep) -> Gate:
    if step.analysis is not None:
        return "Analysis"
    if step.pause is None:
        return "Immediate"
    return "Manual" if step.pause.duration is None else "Timed"


def _seconds(text: str | None) -> float:
    return 0.0 if text is None else max(0.0, parse_duration(text))


def timed_seconds(step: CanaryStep) -> float:
    """A Timed gate's duration (0 for the other gates)."""
    return _seconds(step.pause.duration) if gate_of(step) == "Timed" and step.pause is not None else 0.0


def bake_seconds(step: CanaryStep) -> float:
    """An Analysis gate's minimum bake (`pause.duration`; `pause: {}` adds none)."""
    if step.analysis is None or step.pause is None:
        return 0.0
    return _seconds(step.pause.duration)


def initial_delay_seconds(step: CanaryStep) -> float:
    return 0.0 if step.analysis is None else _seconds(step.analysis.initial_delay)


def interval_seconds(step: CanaryStep) -> float:
    return 0.0 if step.analysis is None else _seconds(step.analysis.interval)


def on_inconclusive(step: CanaryStep) -> str:
    """`Hold` (default), `Rollback` or `RollbackOnStall`."""
    return "Hold" if step.analysis is None else step.analysis.on_inconclusive or "Hold"


def last_index(canary: GroupCanary) -> int:
    return len(canary.steps) - 1


def step_at(canary: GroupCanary, index: int) -> CanaryStep:
    """The step at `index`, clamped into the plan (a finished canary reads its last step)."""
    return canary.steps[max(0, min(index, last_index(canary)))]


def gate_phase(canary: GroupCanary, index: int) -> Literal["Canarying", "Paused"]:
    """The phase while a step's gate is evaluated: `Paused` at a manual gate and at any gate
    of the last step (§1.4 step 5), `Canarying` while a timer or the analysis runs."""
    if index >= last_index(canary) or gate_of(step_at(canary, index)) == "Manual":
        return "Paused"
    return "Canarying"


def step_label(canary: GroupCanary, index: int) -> str:
    """`step 2/3`: messages count steps from 1, as `status` and `explain` do (§3.2)."""
    return f"step {index + 1}/{len(canary.steps)}"
