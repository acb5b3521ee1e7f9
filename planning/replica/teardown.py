"""Deleting an InferenceReplica (spec reference §15): its finalizer and the teardown deadline.

The object carries the finalizer `ome.io/ir-teardown` from its first write. Deleting the
InferenceService deletes it (the workflow's `delete` signal); the finalizer then holds the
object, Terminating, until the component's pods and PodGroups are gone, and the workflow
removes it. `lifecycle.teardown.deadline`, counted from that delete, bounds the wait: at the
deadline the finalizer goes anyway (`TeardownDeadlineExceeded`) and what is left is the
garbage collector's. Without a valid deadline the finalizer holds until the cleanup completes,
and each look that finds owned objects left repeats `TeardownBlocked` (at most once per
re-check interval, so a slow but healthy drain is not reported as blocked at once).

`decide_teardown` is the decision of one pass; the workflow lists the owned objects only
when `needs_look` says the answer depends on them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

TEARDOWN_FINALIZER = "ome.io/ir-teardown"

DEFAULT_RECHECK = timedelta(minutes=5)
"""How often a teardown looks again without `scaleDownRequeueInterval` (the safety re-check)."""


class TeardownOutcome(StrEnum):
    RELEASE = "Release"
    """Every Instance, pod and PodGroup is gone: remove the finalizer, the object goes."""
    EXCEEDED = "Exceeded"
    """The deadline passed: remove the finalizer although owned objects remain."""
    BLOCKED = "Blocked"
    """No valid deadline and owned objects remain after a re-check interval: say so, wait."""
    WAIT = "Wait"


def valid_deadline(deadline_seconds: float | None) -> bool:
    return deadline_seconds is not None and deadline_seconds > 0


def deadline_invalid(deadline_seconds: float | None) -> bool:
    """Configured, but zero or negative: the finalizer holds as if none were set."""
    return deadline_seconds is not None and deadline_seconds <= 0


def teardown_deadline(started_at: datetime, deadline_seconds: float | None) -> datetime | None:
    if not valid_deadline(deadline_seconds):
        return None
    assert deadline_seconds is not None
    return started_at + timedelta(seconds=deadline_seconds)


def recheck_interval(requeue_seconds: float | None) -> timedelta:
    """`scaleDownRequeueInterval` when set, else the slow safety re-check."""
    if requeue_seconds is None or requeue_seconds <= 0:
        return DEFAULT_RECHECK
    return timedelta(seconds=requeue_seconds)


@dataclass(frozen=True)
class TeardownClock:
    """When the teardown began, its deadline setting, and when it last said it was blocked."""

    started_at: datetime
    deadline_seconds: float | None
    recheck: timedelta
    blocked_at: datetime | None = None

    @property
    def deadline(self) -> datetime | None:
        return teardown_deadline(self.started_at, self.deadline_seconds)

    def blocked_due(self, now: datetime) -> bool:
        if valid_deadline(self.deadline_seconds):
            return False
        return now >= (self.blocked_at or self.started_at) + self.recheck

    def needs_look(self, instances_left: int, now: datetime) -> bool:
        """Whether this pass must list the owned pods and PodGroups to decide."""
        deadline = self.deadline
        return instances_left == 0 or (deadline is not None and now >= deadline) or self.blocked_due(now)


@dataclass(frozen=True)
class TeardownStep:
    outcome: TeardownOutcome
    wake_at: datetime | None = None
    """When to look again (the deadline, or the next re-check); None once released."""


def decide_teardown(
    clock: TeardownClock, instances_left: int, pods_left: int | None, pod_groups_left: int, now: datetime
) -> TeardownStep:
    """One pass of a teardown; `pods_left` None: not listed (`needs_look` said no need)."""
    if instances_left == 0 and pods_left == 0 and pod_groups_left == 0:
        return TeardownStep(TeardownOutcome.RELEASE)
    deadline = clock.deadline
    if deadline is not None and now >= deadline:
        return TeardownStep(TeardownOutcome.EXCEEDED)
    again = now + clock.recheck
    wake = min(deadline, again) if deadline is not None else again
    if pods_left is not None and (pods_left or pod_groups_left) and clock.blocked_due(now):
        return TeardownStep(TeardownOutcome.BLOCKED, wake)
    return TeardownStep(TeardownOutcome.WAIT, wake)
