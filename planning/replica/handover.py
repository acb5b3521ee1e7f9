"""Multi-pod SurgeThenDrain: a replacement Instance at a new index, then the old one drains.

A multi-pod Instance (a leader and its workers) cannot bring a second set of pods up on its
own names, so OME surges it at the component level (spec reference §9): the update of
Instance `i` starts a replacement Instance `j` on the update revision at the lowest free
index, and only when `j` is Ready, serving and has served for `minReadySeconds` does `i`
drain and go, leaving a gap at `i`. While `j` comes up, `i` shows the operation `Update`
with step `GangSurgeTarget`; the pair counts once toward the desired number and holds one
surge slot (§7: extra pods / pod count, rounded up); once `i` drains, its pods hold that
slot until they are gone. If `j` fails, it deletes itself (`GangSurgeAbandoned`) and `i`
stays Ready on its revision; until `j`'s pods are gone, `i` shows the step
`GangSurgeTargetCleanup`, `j`'s index stays taken and its leftover pods hold the slot; then
the retry block rules decide when a new replacement may start (`planning.replica.retry`).

The InferenceReplica workflow remembers which replacement it started for which Instance
(`GangSurge`); `with_handovers` folds that into the rows the rules read, and
`plan_handovers` says which sources may now drain. A pause stops a handover on its current
step (§5): the replacement may finish coming up, the source does not drain.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from models.inferencereplica import InstanceRow, OperationRow
from models.instance import InstancePhase, UpdateStrategyType
from planning.replica.budget import UpdatePolicy
from planning.replica.facts import InstanceFacts

GANG_SURGE_STEP = "GangSurgeTarget"
"""§9 `Update` step of an Instance whose replacement is coming up at a new index."""
GANG_SURGE_CLEANUP_STEP = "GangSurgeTargetCleanup"
"""§9 `Update` step of an Instance whose replacement gave up and is removing its pods."""
GANG_SURGE_COMPLETED = "GangSurgeCompleted"
"""Delete reason of a source whose replacement serves: the Instance's own Events name it."""


@dataclass(frozen=True)
class GangSurge:
    """One handover in flight: kept by the workflow under the replacement's index."""

    source: int
    """Index of the Instance being replaced."""
    revision: str
    """Template hash the replacement runs."""
    started_at: datetime
    abandoned: bool = False
    """The replacement gave up (`GangSurgeAbandoned`) and is removing its pods."""


def gang_surge_applies(policy: UpdatePolicy, instance: InstanceFacts, update_multi_pod: bool) -> bool:
    """Whether moving `instance` to the update revision takes a replacement at a new index.

    Only a Ready Instance is surged: one that does not serve has no capacity to keep, so it
    is rebuilt on its own names like any other update.
    """
    multi_pod = instance.desired_pods > 1 or update_multi_pod
    return policy.surges and multi_pod and instance.phase == InstancePhase.READY


def with_handovers(facts: Sequence[InstanceFacts], surges: Mapping[int, GangSurge]) -> list[InstanceFacts]:
    """The rows as the rules must read them while handovers are in flight.

    A replacement carries `replaces`; its source, while it does not drain yet, is busy with
    an `Update` toward the replacement's revision, so no second replacement starts for it
    and the rollout does not count it as done. It stays busy while an abandoned replacement
    removes its pods: those pods hold the slot its update took (§7 leftover pods).
    """
    present = {fact.index for fact in facts}
    busy: dict[int, str] = {
        surge.source: surge.revision for index, surge in surges.items() if index in present or surge.abandoned
    }
    rows: list[InstanceFacts] = []
    for fact in facts:
        surge = surges.get(fact.index)
        if surge is not None:
            fact = replace(fact, replaces=surge.source)
        revision = busy.get(fact.index)
        if revision is not None and not fact.deleting and fact.operation is None:
            fact = replace(
                fact,
                target_revision=revision,
                operation="Update",
                operation_strategy=UpdateStrategyType.SURGE_THEN_DRAIN,
            )
        rows.append(fact)
    return rows


@dataclass(frozen=True)
class HandoverPlan:
    drain: tuple[int, ...] = ()
    """Sources whose replacement serves settled on its revision: drain and delete them now."""
    wake_at: datetime | None = None
    """When a replacement that serves will have served for `minReadySeconds`."""
    paused: tuple[int, ...] = ()
    """Sources a pause keeps although their replacement is ready."""


def plan_handovers(
    instances: Sequence[InstanceFacts], min_ready_seconds: float, now: datetime, paused: bool
) -> HandoverPlan:
    """Which handovers finish in this pass: the replacement Ready and serving long enough."""
    by_index = {instance.index: instance for instance in instances}
    drain: list[int] = []
    held: list[int] = []
    wake: datetime | None = None
    for replacement in instances:
        source = by_index.get(replacement.replaces) if replacement.replaces is not None else None
        if source is None or source.deleting or replacement.deleting:
            continue
        arrived = (
            replacement.running_revision is not None
            and replacement.running_revision == replacement.target_revision
            and replacement.at_rest
            and replacement.phase == InstancePhase.READY
        )
        if not arrived:
            continue
        if not replacement.settled(now, min_ready_seconds):
            settles = replacement.settles_at(min_ready_seconds)
            if settles is not None and (wake is None or settles < wake):
                wake = settles
            continue
        if paused:
            held.append(source.index)
            continue
        drain.append(source.index)
    return HandoverPlan(drain=tuple(sorted(drain)), wake_at=wake, paused=tuple(sorted(held)))


def replacement_indexes(used: Iterable[int], count: int, floor: int = 0) -> list[int]:
    """`count` new indexes: the lowest free ones at or above `floor`.

    The floor keeps a replacement above the Instances the partition holds, so the partition
    keeps holding the same Instances after the handover.
    """
    taken = set(used)
    found: list[int] = []
    candidate = max(0, floor)
    while len(found) < count:
        if candidate not in taken:
            found.append(candidate)
        candidate += 1
    return found


def settle_surges(surges: Mapping[int, GangSurge], live: Iterable[int]) -> dict[int, GangSurge]:
    """The handovers still worth remembering, given the indexes that still have an Instance.

    A record goes when its replacement is gone (removed, or abandoned and its last report
    received), or when its source is gone (the handover is over: the replacement is a plain
    Instance now). A source still draining keeps its record: its pods hold the surge slot
    until they are gone (§7). An abandoned replacement has no row any more but keeps its
    record until it reports its pods gone (`forget_replacement`).
    """
    present = set(live)
    return {
        index: surge
        for index, surge in surges.items()
        if (index in present or surge.abandoned) and surge.source in present
    }


def cleaning_up(surges: Mapping[int, GangSurge]) -> list[int]:
    """Indexes of abandoned replacements still removing their pods: not free for a new one."""
    return sorted(index for index, surge in surges.items() if surge.abandoned)


def handover_rows(rows: Sequence[InstanceRow], surges: Mapping[int, GangSurge]) -> list[InstanceRow]:
    """Status rows with each source's `Update` / `GangSurgeTarget` operation (§9).

    The source's own workflow knows nothing of the handover, so its row gets the operation
    from the InferenceReplica's record, with the replacement's deadline and progress; after
    the replacement gave up, the step is `GangSurgeTargetCleanup` until its pods are gone.
    """
    by_index = {row.index: row for row in rows}
    ops: dict[int, OperationRow] = {}
    for index, surge in surges.items():
        replacement = by_index.get(index)
        source = by_index.get(surge.source)
        if source is None or source.operation is not None:
            continue
        if replacement is None and not surge.abandoned:
            continue
        progress = replacement.operation if replacement is not None else None
        ops[surge.source] = OperationRow(
            id=f"gang-surge-{surge.source}-to-{index}",
            type="Update",
            step=GANG_SURGE_CLEANUP_STEP if surge.abandoned else GANG_SURGE_STEP,
            started_at=surge.started_at,
            last_progress_at=progress.last_progress_at if progress is not None else None,
            deadline=progress.deadline if progress is not None else None,
            waiting=progress.waiting if progress is not None else None,
        )
    targets = {surge.source: surge.revision for surge in surges.values()}
    # The source keeps its phase: it is Ready and serves until its replacement takes over.
    return [
        row.model_copy(update={"operation": ops[row.index], "target_revision": targets[row.index]})
        if row.index in ops
        else row
        for row in rows
    ]
