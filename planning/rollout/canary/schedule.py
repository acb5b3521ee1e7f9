"""What the InferenceReplicas hold and when the canary must be looked at again (spec
reference §1.3, §1.4, §1.6, §2.4, §5).

- Capacities: the current step's counts while the canary runs or is held `Failed` (its
  Instances are kept); the last step's once `Stable`; 0 with the stable revision to return
  to while rolling back and after.
- Wake-up: the earliest future instant at which the decision changes with no news: the
  capacity wait's timeout, a timed gate's end, an analysis stall, the next sample,
  `scaleDownDelaySeconds` running out. None while globally paused (resume is news; the
  clocks that ran out act then) and once nothing more happens by itself.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from models.inferenceservice import GroupCanary
from planning.rollout.canary.capacity import ComponentCapacity, step_capacities
from planning.rollout.canary.observation import CanaryObservation
from planning.rollout.canary.sampling import next_sample_at
from planning.rollout.canary.state import CanaryState
from planning.rollout.canary.steps import gate_of, step_at, timed_seconds
from planning.rollout.canary.texts import ACTIVE_PHASES
from planning.rollout.canary.timeouts import capacity_deadline, stall_deadline
from planning.rollout.canary.transitions import promoting_end


def held_capacities(
    canary: GroupCanary, state: CanaryState, seen: CanaryObservation
) -> dict[str, ComponentCapacity]:
    if state.phase in ("RollingBack", "RolledBack"):
        return {c: ComponentCapacity(c, 0, 0, state.stable_revisions.get(c)) for c in state.canary_revisions}
    found = step_capacities(step_at(canary, state.current_step), seen.components)
    return {c: found[c] for c in state.canary_revisions if c in found}


def wake_at(
    canary: GroupCanary, state: CanaryState, seen: CanaryObservation, now: datetime, timeout: float | None
) -> datetime | None:
    if seen.paused or state.phase not in ACTIVE_PHASES:
        return None
    candidates = [capacity_deadline(state, timeout)]
    entered = state.step_entered_time
    if entered is not None and state.capacity_wait_since is None:
        step = step_at(canary, state.current_step)
        if state.phase == "Promoting":
            candidates.append(promoting_end(canary, state))
        elif gate_of(step) == "Timed":
            candidates.append(entered + timedelta(seconds=timed_seconds(step)))
        elif gate_of(step) == "Analysis":
            candidates.append(stall_deadline(state, timeout))
        candidates.append(next_sample_at(canary, state))
    future = [moment for moment in candidates if moment is not None and moment > now]
    return min(future, default=None)
