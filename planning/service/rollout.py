"""What the InferenceService shows of its rollout runs (spec reference §4, §6, §7), and when
it opens one.

- `status.rollout`: the pinned run (`activeRun`: id, start time, plan digest, targets) and a
  row per group (`observedDigest`, phase).
- Conditions `RolloutPlanReady` (`Pinned` while a run is active, `NoActiveRun` between runs,
  `False` with the park reason) and `RolloutPlanDrift` (`SpecNewerThanRun` when the live
  `spec.rollout` renders another plan than the pinned one, `InSync` otherwise).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from models.inferenceservice import RolloutSpec
from planning.replica.conditions import PlannedCondition
from planning.rollout.plan import Parked, resolve_plan
from planning.rollout.runs import supersedes

READY = "RolloutPlanReady"
DRIFT = "RolloutPlanDrift"


@dataclass(frozen=True)
class RunSeen:
    """The latest report of the active (or last) run, as the InferenceService keeps it."""

    run: int
    started_at: datetime | None
    """None while the run is opening (no report from it yet)."""
    targets: dict[str, str]
    plan_digest: str | None
    group_digests: list[str]
    group_phases: list[str]
    parked_reason: str | None = None
    parked_message: str | None = None
    outcome: str | None = None

    @property
    def active(self) -> bool:
        return self.outcome is None


def live_digest(rollout: RolloutSpec | None) -> str | None:
    """The plan digest the current `spec.rollout` renders; None when it does not render."""
    plan = resolve_plan(rollout)
    return None if plan is None or isinstance(plan, Parked) else plan.digest


def conditions(run: RunSeen | None, rollout: RolloutSpec | None) -> list[PlannedCondition]:
    if run is None or not run.active:
        return [
            PlannedCondition(READY, "True", "NoActiveRun", "no rollout run is active"),
            PlannedCondition(DRIFT, "False", "InSync", "no rollout run is active"),
        ]
    if run.started_at is None:
        ready = PlannedCondition(READY, "Unknown", "Opening", f"run {run.run} is pinning its plan")
    elif run.parked_reason is not None:
        ready = PlannedCondition(READY, "False", run.parked_reason, run.parked_message or run.parked_reason)
    else:
        ready = PlannedCondition(READY, "True", "Pinned", f"run {run.run} pinned plan {run.plan_digest}")
    live = live_digest(rollout)
    if run.plan_digest is not None and live != run.plan_digest:
        drift = PlannedCondition(
            DRIFT,
            "True",
            "SpecNewerThanRun",
            f"live render {live or '(unresolvable)'} differs from pinned {run.plan_digest}; "
            "it applies to the next run",
        )
    else:
        drift = PlannedCondition(DRIFT, "False", "InSync", f"run {run.run} runs the live plan")
    return [ready, drift]


def rollout_status(run: RunSeen | None) -> dict[str, Any] | None:
    """`status.rollout` (wire form); None before any run."""
    if run is None:
        return None
    groups = [
        {"observedDigest": digest, "phase": phase}
        for digest, phase in zip(run.group_digests, run.group_phases, strict=False)
    ]
    if not run.active:
        # The status is written as a merge patch: a closed run's `activeRun` is cleared by null.
        return {"activeRun": None, "groups": groups}
    active: dict[str, Any] = {"id": str(run.run), "targetRevisions": dict(run.targets)}
    if run.started_at is not None:
        active["startedAt"] = run.started_at.strftime("%Y-%m-%dT%H:%M:%SZ")
    if run.plan_digest is not None:
        active["planDigest"] = run.plan_digest
    return {"activeRun": active, "groups": groups}


@dataclass(frozen=True)
class RunChange:
    """What a pass does about rollout runs."""

    open: dict[str, str]
    """Component -> revision name of a run to open now; empty: none."""
    supersede: bool = False
    """The active run closes as `Superseded` (the new one takes over)."""


def run_change(
    asked: dict[str, str],
    active: dict[str, str] | None,
    last: dict[str, str] | None,
    wanted: dict[str, str] | None = None,
) -> RunChange:
    """`asked`: each grouped component the spec moves (current revision serving, another
    asked for) -> the revision asked for; `wanted`: every grouped component's revision the
    spec asks for, moved or not. A run opens when something is asked that neither the active
    run nor the last closed one moved to. A run whose target the spec no longer asks for (a
    newer revision, or the one serving asked for again) is superseded; only what is still
    asked opens the next."""
    if active is not None:
        reverted = wanted is not None and any(wanted.get(c, t) != t for c, t in active.items())
        if reverted or supersedes(active, asked):
            return RunChange(dict(asked), supersede=True)
        return RunChange({})
    if not asked:
        return RunChange({})
    if last is not None and not supersedes(last, asked):
        return RunChange({})  # the closed run's components are still flipping their current revision
    return RunChange(dict(asked))
