"""Which of an Instance's reports its parent InferenceReplica does not need: the ones that would
only tell it what it counts already from its own request, to update or to delete.

The InferenceReplica that sends an update records it (`ReplicaState.requested_updates`) and
counts the Instance as updating to that revision from then on: its surge slot, its place in the
rollout, its status row (`planning.replica.overlay`). The request stands until a report at that
revision comes. A report of the update's start, or of its surge pod coming up while the old one
still serves, says nothing more; the report at its end, or one that changes what the parent
counts (pods ready, serving or available, a failure, a retry block), does.

The InferenceReplica that tells an Instance to delete counts it as `Deleting` from then on
(`ReplicaState.requested_deletes`): out of its counts, out of rotation in its status row, its
drain deadline computed from the request. Reports while the pods go say nothing more, unless
the pods it holds of the scale-down's budget change (a multi-pod Instance's, once they are
Terminating) or a failure comes; the last one, deleted, does.
"""

from __future__ import annotations

from models.instance import InstancePhase, InstanceStatus

UNCHANGED_WHILE_COUNTED = (
    "incarnation",
    "running_revision",
    "ready",
    "serving",
    "ready_pods",
    "serving_pods",
    "available_pods",
    "last_failure",
    "gang_scheduling_unavailable",
    "draining",
    "deleted",
    "abandoned",
)
"""What a report the parent counts from its request must show as the last one it took did."""


def waiting_on(status: InstanceStatus | None) -> str | None:
    """What `status`'s operation waits on (`InstanceOperation.waiting`), or None."""
    return status.operation.waiting if status is not None and status.operation is not None else None


def shows_a_wait(status: InstanceStatus) -> bool:
    """Whether `status` says its operation waits (`InstanceOperation.waiting`: `QuotaExceeded`,
    `Unschedulable`, a held drain): news the parent cannot count from its request."""
    return waiting_on(status) is not None


def wait_changed(delivered: InstanceStatus | None, now: InstanceStatus) -> bool:
    """Whether what the operation waits on differs from the last report the parent took (a
    parent that took none counts the Instance from its launch record, which waits on nothing)."""
    return waiting_on(delivered) != waiting_on(now)


def deletion_wait_news(delivered: InstanceStatus | None, now: InstanceStatus) -> bool:
    """Whether a deletion's report carries news of a wait: one of the deletion's own (a held
    drain, a node gone unknown) starting, changing or ending. A create's or an update's wait
    ending as the deletion starts is what the request implies."""
    if not wait_changed(delivered, now):
        return False
    return shows_a_wait(now) or (delivered is not None and delivered.phase == InstancePhase.DELETING)


def counted_by_request(delivered: InstanceStatus | None, now: InstanceStatus, counted_revision: str | None) -> bool:
    """Whether the parent already counts `now` from its update request to `counted_revision`.

    `delivered` is the last report the parent took. It must show the Instance Ready on another
    revision, and `now` the update under way to `counted_revision` with nothing else changed:
    no retry block, and the same pods ready, serving and available (`UNCHANGED_WHILE_COUNTED`).
    The surge pod's extra count and the resting digest's absence are what the request implies.
    """
    if delivered is None or counted_revision is None:
        return False
    if now.phase != InstancePhase.UPDATING or now.target_revision != counted_revision or now.retry_block is not None:
        return False
    if delivered.phase != InstancePhase.READY or delivered.target_revision == counted_revision:
        return False
    return all(getattr(delivered, name) == getattr(now, name) for name in UNCHANGED_WHILE_COUNTED)


UNCHANGED_WHILE_DELETING = (
    "incarnation",
    "last_failure",
    "retry_block",
    "gang_scheduling_unavailable",
)
"""What a report of a deletion the parent counts from its request must show as the last one it
took did, beside the pods it holds (`pods_held`): the news a deletion may bring."""


def pods_held(status: InstanceStatus) -> int:
    """The pods an Instance being deleted holds of its parent's scale-down budget: its live
    pods, or 1 while only Terminating pods or its cleanup remain. The parent's own rule is
    `planning.replica.batching.deletion_cost` (a parent's rules import its children's, never
    the reverse; a test holds the two together)."""
    return max(status.total_pods, 1)


def deletion_counted(delivered: InstanceStatus | None, now: InstanceStatus) -> bool:
    """Whether the parent, which counts this Instance as `Deleting` from its own request,
    already knows all `now` tells: a deletion still under way (not its end, `deleted`), holding
    as many pods of its scale-down budget (`pods_held`: a single-pod Instance always one) and
    with no news since the last report it took (`UNCHANGED_WHILE_DELETING`). Its phase, its
    operation and its pods leaving rotation and going Terminating are what the request implies."""
    if delivered is None or now.deleted or now.abandoned or now.phase != InstancePhase.DELETING:
        return False
    if pods_held(delivered) != pods_held(now):
        return False
    return all(getattr(delivered, name) == getattr(now, name) for name in UNCHANGED_WHILE_DELETING)
