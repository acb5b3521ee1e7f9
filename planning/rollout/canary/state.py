"""The canary's state: every field of `status.components.<primary>.canary` and its
`rolloutPhase`, plus what the machine needs to keep its promises (spec reference §1.5, §2.6).

One frozen value per canary group; the machine (`planning.rollout.canary.machine`) returns a
new one on every call. It survives continue-as-new as is (a pydantic `TypeAdapter` reads and
writes it). The primary component is the router when it is in the group, else the engine.

Samples: the machine numbers each sample it asks for (`sample_sequence`) and waits for that
one verdict (`pending_sample`); a verdict with another number, or one arriving again, is
ignored, so no sample is ever counted twice. `step_samples`, `last_verdict` and
`last_pass_time` belong to the current step and restart with it, as `analysisFailedChecks` does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from models.isvc_status import CanaryFailure, CanaryStatus, ComponentStatus
from planning.rollout.canary.observation import Verdict
from planning.rollout.canary.requests import Mailbox
from planning.rollout.canary.texts import FailureReason, Phase, RollbackCause
from planning.rollout.canary.traffic import traffic_targets


@dataclass(frozen=True)
class Failure:
    """`canary.failed`: why the canary is held in `Failed` and since when (unchanged while held)."""

    reason: FailureReason
    time: datetime


@dataclass(frozen=True)
class CanaryState:
    target_id: str
    """The run whose targets this canary moves to (`targetID`)."""
    primary: str
    canary_revisions: Mapping[str, str]
    """Component -> the revision hash it moves to."""
    stable_revisions: Mapping[str, str]
    """Component -> the revision hash it returns to on rollback."""
    phase: Phase = "Pending"
    current_step: int = 0
    step_entered_time: datetime | None = None
    observed_traffic_weight: int = 0
    promoted_through: str | None = None
    pre_step_hold: bool = False
    rolled_back_revisions: Mapping[str, str] = field(default_factory=dict)
    analysis_failed_checks: int = 0
    last_evaluation_time: datetime | None = None
    last_conclusive_evaluation_time: datetime | None = None
    metric_results: tuple[Mapping[str, Any], ...] = ()
    capacity_wait_since: datetime | None = None
    failed: Failure | None = None
    rollback_cause: RollbackCause | None = None
    step_samples: int = 0
    """Verdicts applied at the current step."""
    last_verdict: Verdict | None = None
    last_pass_time: datetime | None = None
    sample_sequence: int = 0
    """The number of the last sample asked for (never reused)."""
    pending_sample: int | None = None
    """The sample asked for whose verdict has not come yet."""
    mailbox: Mailbox = field(default_factory=Mailbox)

    @property
    def canary_revision_hash(self) -> str:
        return self.canary_revisions[self.primary]

    @property
    def stable_revision_hash(self) -> str | None:
        """Cleared once the canary completes (§2.6)."""
        return None if self.phase == "Stable" else self.stable_revisions.get(self.primary)

    @property
    def rolled_back_revision_hash(self) -> str | None:
        return self.rolled_back_revisions.get(self.primary)

    @property
    def step_entered(self) -> bool:
        return self.step_entered_time is not None

    def to_status(self, isvc: str, pairing_protocol: str | None = None) -> dict[str, Any]:
        """`status.components.<primary>`'s `rolloutPhase`, `canary` and `traffic`, camelCase."""
        canary = CanaryStatus(
            target_id=self.target_id,
            canary_revision_hash=self.canary_revision_hash,
            stable_revision_hash=self.stable_revision_hash,
            current_step=self.current_step,
            step_entered_time=self.step_entered_time,
            observed_traffic_weight=self.observed_traffic_weight,
            promoted_through=self.promoted_through,
            pre_step_hold=self.pre_step_hold,
            rolled_back_revision_hash=self.rolled_back_revision_hash,
            analysis_failed_checks=self.analysis_failed_checks,
            last_evaluation_time=self.last_evaluation_time,
            last_conclusive_evaluation_time=self.last_conclusive_evaluation_time,
            metric_results=[dict(result) for result in self.metric_results],
            capacity_wait_since=self.capacity_wait_since,
            failed=None
            if self.failed is None
            else CanaryFailure(reason=self.failed.reason, time=self.failed.time),
        )
        traffic = traffic_targets(
            isvc,
            self.primary,
            self.canary_revision_hash,
            self.stable_revisions.get(self.primary),
            self.observed_traffic_weight,
            pairing_protocol,
            completed=self.phase == "Stable",
        )
        status = ComponentStatus(rollout_phase=self.phase, canary=canary, traffic=traffic)
        return status.to_manifest()


def primary_of(components: tuple[str, ...] | list[str]) -> str:
    """The router when it is in the group, else the engine (§1.5)."""
    return "router" if "router" in components else "engine"


def start(
    target_id: str,
    components: tuple[str, ...] | list[str],
    canary_revisions: Mapping[str, str],
    stable_revisions: Mapping[str, str],
    now: datetime,
) -> CanaryState:
    """A canary at step 1 (index 0), waiting for its capacity (`Pending`)."""
    return CanaryState(
        target_id=target_id,
        primary=primary_of(components),
        canary_revisions=dict(canary_revisions),
        stable_revisions=dict(stable_revisions),
        capacity_wait_since=now,
    )


def restarted(
    state: CanaryState, target_id: str, canary_revisions: Mapping[str, str], now: datetime
) -> CanaryState:
    """Step 1 again with fresh counters and clocks (§1.5 newer revision, §3.1 retry). The
    stable revisions stay, except after completion, when the completed revision is stable.
    The sample numbering goes on, so a late verdict of the old canary can never count."""
    stable = state.canary_revisions if state.phase == "Stable" else state.stable_revisions
    fresh = start(target_id, (state.primary,), canary_revisions, stable, now)
    return replace(fresh, primary=state.primary, sample_sequence=state.sample_sequence)
