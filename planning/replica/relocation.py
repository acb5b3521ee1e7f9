"""Automatic relocation (spec reference §13): an Instance whose create or single-pod update
got stuck or timed out with all its pods on one node, for a cause not the workload's, is
tried again on another node.

OME: "on stuck/timeout of a new Instance or single-pod update, when all pods were on one
node, failure not workload-caused, mode Auto/Surge, attempts remain (`autoMigrate.maxAttempts`,
chart 3; unset = off); avoids previously left nodes". Each relocation is recorded as a
`Relocated` row in `status.migrations` with a Normal `AutoMigrationTriggered` Event; a failure
past the last attempt records one Warning `AutoMigrationCapReached` and relocates nothing.

The Instance reports each failed attempt's operation and the nodes its pods were on
(`InstanceFailure.operation`, `.node_names`). A relocation keeps the Instance's index: the
InferenceReplica sends it its spec with a required node affinity keeping it off every node
it left (`planning.replica.migrations.placed_away`), and, when it rests `Failed`, a restart
so it is rebuilt now; a single-pod SurgeThenDrain that failed rests `Ready` on the old pod and
takes the placed spec on its next attempt. The attempts are forgotten once the Instance is
Ready on its target revision, or gone.

`plan_relocations` is pure; the workflow sends the signals and records the Events.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from datetime import datetime

from models.instance import InstanceFailure, InstancePhase, InstanceStatus
from models.migration import MigrationPhase
from planning.replica.events import PlannedEvent
from planning.replica.migrations import MigrationTicket

WORKLOAD_REASONS = frozenset(
    {
        "ImagePullBackOff",
        "ErrImagePull",
        "InvalidImageName",
        "CreateContainerConfigError",
        "InvalidPodSpec",
        "CrashLoopBackOff",
        "CreateContainerError",
        "RunContainerError",
    }
)
"""Failures of the workload itself: another node would not help (§10, §11)."""
NOT_NODE_REASONS = frozenset({"Unschedulable", "QuotaExceeded", "Forbidden", "NameTaken", "NotFound", "CreateFailed"})
"""Failures before any pod ran on a node: there is no node to leave."""
RELOCATE_REASON = "AutoMigration"
"""The restart's reason: the Instance's own history names it."""


@dataclass(frozen=True)
class Relocation:
    """One Instance's relocations, as the InferenceReplica keeps them."""

    attempts: int = 0
    left_nodes: tuple[str, ...] = ()
    """Every node it was moved off, oldest first: its pods are kept off all of them."""
    seen_failure_at: datetime | None = None
    """The last failure looked at (each failure is decided once)."""
    cap_warned: bool = False
    """`AutoMigrationCapReached` recorded: not again until the attempts are forgotten."""


@dataclass(frozen=True)
class Move:
    """Relocate Instance `index` off `node`: its spec kept off `avoid`; `restart` when it rests
    Failed (rebuilt now), not when it rests Ready on the old pod of a failed update."""

    index: int
    node: str
    avoid: tuple[str, ...]
    revision: str
    restart: bool
    attempt: int


@dataclass(frozen=True)
class RelocationContext:
    component: str
    now: datetime
    max_attempts: int | None = 3
    """`autoMigrate.maxAttempts`; None: relocation is off."""
    mode: str = "Auto"
    """`migrationPolicy.mode`: `Never` turns relocation off."""
    frozen: bool = False
    """Paused at `Freeze` (§5): repairs stop, so relocations wait for the resume."""
    excluded: Collection[int] = ()
    """Instances not relocated whatever happens to them: being removed, a migration's or a
    multi-pod handover's replacement (their owner deals with their failure)."""


@dataclass(frozen=True)
class RelocationPlan:
    relocations: dict[int, Relocation]
    moves: tuple[Move, ...] = ()
    events: tuple[PlannedEvent, ...] = ()
    tickets: tuple[MigrationTicket, ...] = ()
    """`Relocated` rows for `status.migrations`, one per move."""

    @property
    def acts(self) -> bool:
        return bool(self.moves or self.events)


def relocatable(status: InstanceStatus) -> InstanceFailure | None:
    """The failure that may move `status`'s Instance, if it rests after one that may: a create
    (a new Instance, or its rebuild) or a single-pod update that failed, not for the workload's
    fault, with all its pods on one node."""
    failure = status.last_failure
    if failure is None or status.operation is not None or status.deleted or status.abandoned:
        return None
    if failure.operation == "Create":
        resting = status.phase == InstancePhase.FAILED
    elif failure.operation == "Update" and status.desired_pods == 1:
        # A SurgeThenDrain rests Ready on its old pod; other strategies rest Failed.
        resting = status.phase == InstancePhase.FAILED or (
            status.phase == InstancePhase.READY and status.running_revision != status.target_revision
        )
    else:
        return None
    if not resting or failure.reason in WORKLOAD_REASONS or failure.reason in NOT_NODE_REASONS:
        return None
    return failure if len(set(failure.node_names)) == 1 else None


def settled(status: InstanceStatus) -> bool:
    """Ready on its target revision: the relocations are over."""
    return (
        status.phase == InstancePhase.READY
        and status.operation is None
        and status.running_revision == status.target_revision
    )


def plan_relocations(
    instances: Mapping[int, InstanceStatus], kept: Mapping[int, Relocation], ctx: RelocationContext
) -> RelocationPlan:
    """What to relocate in this pass, and the relocations to keep."""
    relocations = {
        index: entry for index, entry in kept.items() if index in instances and not settled(instances[index])
    }
    if ctx.max_attempts is None or ctx.mode == "Never" or ctx.frozen:
        return RelocationPlan(relocations)
    moves: list[Move] = []
    events: list[PlannedEvent] = []
    tickets: list[MigrationTicket] = []
    for index in sorted(instances):
        status = instances[index]
        failure = relocatable(status)
        if failure is None or index in ctx.excluded:
            continue
        entry = relocations.get(index, Relocation())
        if entry.seen_failure_at is not None and failure.time <= entry.seen_failure_at:
            continue
        entry = replace(entry, seen_failure_at=failure.time)
        node = failure.node_names[0]
        subject = f"OMENative auto-migration component={ctx.component} instance={index}"
        if entry.attempts >= ctx.max_attempts:
            if not entry.cap_warned:
                entry = replace(entry, cap_warned=True)
                events.append(
                    PlannedEvent(
                        "Warning",
                        "AutoMigrationCapReached",
                        f"{subject}: not relocated off node {node} after {failure.reason}: "
                        f"{entry.attempts}/{ctx.max_attempts} attempts used (autoMigrate.maxAttempts)",
                        on_isvc=True,
                    )
                )
            relocations[index] = entry
            continue
        attempt = entry.attempts + 1
        left = (*[n for n in entry.left_nodes if n != node], node)
        entry = replace(entry, attempts=attempt, left_nodes=left)
        relocations[index] = entry
        moves.append(
            Move(
                index=index,
                node=node,
                avoid=left,
                revision=status.target_revision,
                restart=status.phase == InstancePhase.FAILED,
                attempt=attempt,
            )
        )
        message = (
            f"relocated off node {node} after {failure.reason} (attempt {attempt}/{ctx.max_attempts}; "
            f"avoiding {', '.join(left)})"
        )
        events.append(PlannedEvent("Normal", "AutoMigrationTriggered", f"{subject}: {message}", on_isvc=True))
        tickets.append(
            MigrationTicket(
                uuid=f"auto-{ctx.component}-{index}-{attempt}-{failure.time:%Y%m%dT%H%M%S%f}",
                instance=index,
                from_node=node,
                accepted_at=ctx.now,
                deadline=None,
                reason=failure.reason,
                requested_by="auto-migration",
                phase=MigrationPhase.RELOCATED,
                message=message,
                revision=status.target_revision,
                ended_at=ctx.now,
            )
        )
    return RelocationPlan(relocations, tuple(moves), tuple(events), tuple(tickets))


def avoided(relocations: Mapping[int, Relocation], index: int) -> tuple[str, ...]:
    """The nodes Instance `index`'s pods are kept off: every node it was relocated from."""
    entry = relocations.get(index)
    return entry.left_nodes if entry is not None else ()
