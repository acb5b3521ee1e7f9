"""What a canary group waits for, in words: the `explain` query's answer and the GATE and
REASON of `rollout status` for the group's components (spec reference §1.4, §1.5, §3.2).

While the canary moves through its steps the gate is the step's (`Immediate`, `Timed`,
`Manual`, `Analysis`, as `steps.gate_of` names it) and the reason says whether the step still
waits for its capacity or sits at its gate; in the other phases there is no step gate and the
reason says what the phase waits for. `release` names what moves it on: the operator request
(`promote`, `retry`, `rollback`) or the event it waits for. A canary that waits for nothing
(an entered `Immediate` step, `Stable`) has no wait.
"""

from __future__ import annotations

from dataclasses import dataclass

from models.inferenceservice import GroupCanary
from planning.rollout.canary.state import CanaryState
from planning.rollout.canary.steps import gate_of, step_at, step_label


@dataclass(frozen=True)
class CanaryWait:
    gate: str | None
    """The step's gate while the canary moves through its steps; None in the other phases."""
    reason: str
    release: str | None


def waiting(canary: GroupCanary, state: CanaryState) -> CanaryWait | None:
    running = state.canary_revision_hash
    stable = state.stable_revisions.get(state.primary)
    label = step_label(canary, state.current_step)
    if state.phase == "Stable":
        return None
    if state.phase == "Promoting":
        return CanaryWait(None, f"canary {running} passed its last step and is promoting", "scaleDownDelaySeconds ending")
    if state.phase == "Failed":
        why = state.failed.reason if state.failed is not None else "failed"
        return CanaryWait(
            None, f"canary {running} failed at {label} ({why}); its Instances and traffic stay", "retry or rollback"
        )
    if state.phase == "RollingBack":
        return CanaryWait(
            None, f"canary {running} is rolling back to stable revision {stable}", "its Instances back on the stable revision"
        )
    if state.phase == "RolledBack":
        return CanaryWait(
            None, f"canary {running} rolled back to stable revision {stable}", "retry, or apply a newer revision"
        )
    step = step_at(canary, state.current_step)
    gate = gate_of(step)
    if state.pre_step_hold:
        return CanaryWait(
            gate, f"canary {running} is held before {label} after a repin (CanaryPreStep)", f"promote naming revision {running}"
        )
    if not state.step_entered:
        return CanaryWait(
            gate,
            f"canary {running} {label} waits for capacity {step.capacity} to serve on the new revision",
            "its new Instances serving",
        )
    if gate == "Manual":
        return CanaryWait(gate, f"canary {running} {label} waits at its manual gate (pause: {{}})", "promote")
    if gate == "Timed" and step.pause is not None:
        return CanaryWait(gate, f"canary {running} {label} pauses for {step.pause.duration}", "the pause ending")
    if gate == "Analysis" and step.analysis is not None:
        reason = (
            f"canary {running} {label} is under analysis: {state.analysis_failed_checks} of "
            f"failureLimit {step.analysis.failure_limit} samples failed"
        )
        return CanaryWait(gate, reason, "a passing sample, or promote with override_analysis")
    return None
