"""Deleting an InferenceReplica (spec reference §15): its finalizer and the teardown deadline.

The object carries the finalizer `ome.io/ir-teardown` from its first write. Deleting the
InferenceService deletes it (the workflow's `delete` signal); the finalizer then holds the
object, Terminating, until the component's pods and PodGroups are gone, and the workflow
removes it. `lifecycle.teardown.deadline`, counted from that delete, bounds the wait: at the
deadline the finalizer goes anyway (`TeardownDeadlineExceeded`) and what is left is the
garbage collector's. Without a valid deadline the finalizer holds until the cleanup completes,
and `TeardownBlocked` is repeated while owned objects remain, so a slow but healthy drain is
not reported as blocked at once:

- first once no Instance is left draining (only pods and PodGroups remain) and a re-check
  interval has passed since the delete, or, while Instances still drain, once the drain window
  (`instanceReadyTimeout`, the deadline of an Instance's drain, §15) has passed;
- then at most once per `BLOCKED_REPEAT` (or the re-check interval, if longer), and a blocked
  teardown looks again at that pace, so neither its Events nor its history grow every few seconds.

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
BLOCKED_REPEAT = timedelta(minutes=1)
"""`TeardownBlocked` is repeated no more often than this."""
DEFAULT_DRAIN_WINDOW = timedelta(minutes=30)
"""How long Instances may drain before a teardown without a deadline is reported blocked,
without an `instanceReadyTimeout` (the chart's 30m)."""


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


def drain_window(instance_ready_timeout_seconds: float | None) -> timedelta:
    """How long Instances may drain before the teardown is reported blocked: the deadline of an
    Instance's drain (`instanceReadyTimeout`), else `DEFAULT_DRAIN_WINDOW`."""
    if instance_ready_timeout_seconds is None or instance_ready_timeout_seconds <= 0:
        return DEFAULT_DRAIN_WINDOW
    return timedelta(seconds=instance_ready_timeout_seconds)


@dataclass(frozen=True)
class TeardownClock:
    """When the teardown began, its deadline setting, and when it last said it was blocked."""

    started_at: datetime
    deadline_seconds: float | None
    recheck: timedelta
    blocked_at: datetime | None = None
    drain_window: timedelta = DEFAULT_DRAIN_WINDOW
    """Instances still draining are not reported blocked before this long after the delete."""

    @property
    def deadline(self) -> datetime | None:
        return teardown_deadline(self.started_at, self.deadline_seconds)

    @property
    def repeat(self) -> timedelta:
        """How often `TeardownBlocked` is repeated, and a blocked teardown looks again."""
        return max(self.recheck, BLOCKED_REPEAT)

    def blocked_at_earliest(self, instances_left: int) -> datetime:
        """When `TeardownBlocked` may be said next, if owned objects remain."""
        if self.blocked_at is not None:
            return self.blocked_at + self.repeat
        if instances_left == 0:
            return self.started_at + self.recheck
        return self.started_at + max(self.drain_window, self.recheck)

    def blocked_due(self, instances_left: int, now: datetime) -> bool:
        if valid_deadline(self.deadline_seconds):
            return False
        return now >= self.blocked_at_earliest(instances_left)

    def needs_look(self, instances_left: int, now: datetime) -> bool:
        """Whether this pass must list the owned pods and PodGroups to decide."""
        deadline = self.deadline
        return (
            instances_left == 0
            or (deadline is not None and now >= deadline)
            or self.blocked_due(instances_left, now)
        )


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
    if deadline is not None:
        return TeardownStep(TeardownOutcome.WAIT, min(deadline, now + clock.recheck))
    # No valid deadline: look again when blocked may be said next (the Instances' reports wake
    # a pass meanwhile), so a blocked teardown looks at `repeat`'s pace, not every re-check.
    if pods_left is not None and (pods_left or pod_groups_left) and clock.blocked_due(instances_left, now):
        return TeardownStep(TeardownOutcome.BLOCKED, now + clock.repeat)
    due = clock.blocked_at_earliest(instances_left)
    return TeardownStep(TeardownOutcome.WAIT, due if due > now else now + clock.recheck)
