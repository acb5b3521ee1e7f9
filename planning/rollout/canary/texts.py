"""The canary's user-facing texts: phases, failure reasons, refusals and Events (spec
reference §1.5, §1.6, §2.7, §3.2, §4, §5).

Texts the reference gives are quoted verbatim; the Event reasons it leaves open
(`Canary*`) are ours. Tests and code quote these constants, so a text exists once.
"""

from __future__ import annotations

from typing import Literal

Phase = Literal[
    "Pending", "Canarying", "Paused", "Promoting", "Stable", "Failed", "RollingBack", "RolledBack"
]
FailureReason = Literal["CapacityTimeout", "AnalysisStalled", "StableRevisionMissing"]
RollbackCause = Literal["analysis", "manual"]
EventType = Literal["Normal", "Warning"]

ACTIVE_PHASES: tuple[Phase, ...] = ("Pending", "Canarying", "Paused", "Promoting")
"""The canary moves (or waits at a gate) in these phases."""
ROLLBACK_PHASES: tuple[Phase, ...] = ("Pending", "Canarying", "Paused", "Promoting", "Failed")
"""§3.2: `rollback` is accepted in these phases."""
RETRY_PHASES: tuple[Phase, ...] = ("Failed", "RolledBack")
"""§3.1: `ome.io/rollout-resume` retries a canary parked in these phases."""

# --- refusals of operator requests (§3.2, §5) ---------------------------------------
REFUSED_GATE = (
    "action refused: promote requires an active indefinite manual gate; analysis requires explicit override"
)
REFUSED_PAUSED = "action refused: globally paused canary cannot consume a request"
REFUSED_MAILBOX = "action refused: a rollout promote or rollback mailbox is present"
REFUSED_NO_WORK = "action refused: no applicable active rollout or lifecycle work was observed"
REFUSED_STALE = "action refused: controller safety evidence is stale or inconsistent"
REFUSED_ALREADY_PAUSED = "action refused: service is already paused; freeze is preserved"
REFUSED_NOT_PAUSED = "action refused: service has no recognized pause"


def refused_revision(named: str, running: str) -> str:
    """Ours: a request naming another revision than the canary's (§3.1: a value naming an
    older canary revision never advances anything)."""
    return f"action refused: the request names revision {named} but the canary runs {running}; name {running}"


def refused_pre_step(running: str) -> str:
    """Ours: the CanaryPreStep hold after a repin is released only by a promote naming the hash (§4)."""
    return (
        f"action refused: the canary is held before its step after a repin (CanaryPreStep); "
        f"release it with a promote naming revision {running}"
    )


# --- repin (§4) ------------------------------------------------------------------
REPIN_NO_RUN = "rollout repin refused: no active pinned run"
REPIN_EMPTY = "rollout repin refused: empty live plans are not supported by this command"
REPIN_ALREADY_PINNED = "rollout repin refused: the current plan is already pinned"
REPIN_TOPOLOGY = "rollout repin refused: live and pinned rollout topology differ"
REPIN_CANARY_GROUPS = "rollout repin refused: this command supports at most one canary group"
REPIN_MAILBOX = "rollout repin refused: a rollout action mailbox is already present"
REPIN_NOW = "now"
"""The repin value that skips the digest check."""


def repin_digest_mismatch(want: str, have: str) -> str:
    return (
        f"expected render digest {want} but the current render is {have} "
        "(a concurrent edit landed; re-issue with the current digest)"
    )


def repin_unrenderable(cause: str) -> str:
    return f"the current source does not render: {cause}"


def repin_applied(run: str, old: str, new: str) -> str:
    return f"run {run} repinned: {old} -> {new}"


# --- Events ----------------------------------------------------------------------
RUN_CLOSED = "RolloutRunClosed"
PLAN_REPINNED = "RolloutPlanRepinned"
REPIN_REJECTED = "RolloutRepinRejected"
STEP_READY = "CanaryStepReady"
STEP_ADVANCED = "CanaryStepAdvanced"
PRE_STEP_RELEASED = "CanaryPreStepReleased"
CAPACITY_LOST = "CanaryCapacityLost"
CAPACITY_RECOVERED = "CanaryCapacityRecovered"
PROMOTING = "CanaryPromoting"
COMPLETED = "CanaryCompleted"
FAILED = "CanaryFailed"
ROLLING_BACK = "CanaryRollingBack"
RESTARTED = "CanaryRestarted"
RETRIED = "CanaryRetried"
REQUEST_DROPPED = "CanaryRequestDropped"
REQUEST_REJECTED = "RolloutRequestRejected"
"""A steering signal refused (a signal has no answer): Warning, with the refusal text."""


def run_closed(run: str, outcome: str) -> str:
    return f"run {run} closed: {outcome}"
