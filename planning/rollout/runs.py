"""When a rollout run opens, what it moves, and how its groups stand (spec reference §3.4,
§4, §6; the rollout groups page).

A run opens when a change gives a grouped component a new revision while an older one
serves; the very first revision of a component never runs a rollout (nothing serves yet).
Its ID is the generation that opened it. A newer revision of a grouped component during a
run closes that run as `Superseded` and opens the next; an edit to `spec.rollout` alone
changes nothing in the run (it applies to the next one).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from planning.rollout.gates import Allowance, ComponentProgress
from planning.rollout.plan import GroupPlan, RolloutPlan

GroupPhase = Literal["Pending", "Progressing", "Paused", "Failed", "Succeeded"]
Outcome = Literal["Completed", "Superseded", "Closed"]
"""`Closed`: the InferenceService was deleted during the run."""
REPORTED_ORDER = ("Failed", "RollingBack", "RolledBack", "Paused", "InProgress", "Succeeded")
"""`rollout status` REPORTED: the first that applies to any group (§3.4)."""


@dataclass(frozen=True)
class Revisions:
    """A component's revisions as its InferenceReplica last reported them."""

    current: str | None
    """Serving (`currentRevision`); None before the first revision ever served."""
    update: str
    """The revision the spec asks for now."""


def run_targets(grouped: tuple[str, ...], revisions: Mapping[str, Revisions]) -> dict[str, str]:
    """The grouped components a change moves: component -> target revision. Empty: no run."""
    return {
        name: r.update
        for name in grouped
        if (r := revisions.get(name)) is not None and r.current is not None and r.current != r.update
    }


def supersedes(active: Mapping[str, str], targets: Mapping[str, str]) -> bool:
    """Whether `targets` (what the spec asks for now) close the active run's targets."""
    return any(active.get(name) != revision for name, revision in targets.items())


def group_phase(group: GroupPlan, progress: Mapping[str, ComponentProgress], paused: bool) -> GroupPhase:
    members = [progress[c] for c in group.components if c in progress and progress[c].changed]
    if not members or all(m.finished for m in members):
        return "Succeeded"
    if any(m.failed > 0 for m in members):
        return "Failed"
    return "Paused" if paused else "Progressing"


def reported(phases: list[str]) -> str:
    """The service's REPORTED state: Failed, RollingBack, RolledBack, Paused, InProgress or
    Succeeded (§3.4); a canary group's `Stable` is `Succeeded`."""
    mapped = {
        "Failed": "Failed", "Paused": "Paused", "Progressing": "InProgress", "Pending": "InProgress",
        # A canary group's phases (§1.5).
        "Canarying": "InProgress", "Promoting": "InProgress", "RollingBack": "RollingBack", "RolledBack": "RolledBack",
    }
    found = {mapped.get(p, "Succeeded") for p in phases}
    return next((state for state in REPORTED_ORDER if state in found), "Succeeded")


def strategy_column(plan: RolloutPlan, group: GroupPlan) -> str:
    """STRATEGY: `Sequential` for a sequence's groups, else the group's progression."""
    return "Sequential" if plan.sequence else group.strategy_name


def done(progress: Mapping[str, ComponentProgress], targets: Mapping[str, str]) -> bool:
    """Every component the run moves serves its target on all its Instances."""
    return all(name in progress and progress[name].finished for name in targets)


def failed_groups(plan: RolloutPlan, progress: Mapping[str, ComponentProgress]) -> list[GroupPlan]:
    """Groups with a failed Instance on the target revision in any component."""
    return [g for g in plan.groups if group_phase(g, progress, False) == "Failed"]


def allowance_of(found: list[Allowance], component: str) -> Allowance | None:
    return next((a for a in found if a.component == component), None)
