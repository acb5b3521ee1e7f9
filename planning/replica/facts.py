"""What the InferenceReplica's decisions read about each of its Instances.

The InferenceReplica workflow learns about its Instances from their `instance_changed`
signals (`models.instance.InstanceStatus`) and from what it started itself (which Instance
is the replacement of which, in a migration or a multi-pod surge handover). `InstanceFacts`
condenses both into the few facts the scale, update, retry, reset and condition rules read,
so each rule is a pure function over a list of small frozen rows that tables can spell out.

Surge-slot accounting (spec reference §7) needs pod-level detail: `surge_slots_from_pods`
computes an Instance's slots from its `PodSummary` list, counting a Terminating pod only
until its deletion grace elapses, and says which pod holds the slot and when it stops.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from models.instance import InstancePhase, InstanceStatus, UpdateStrategyType
from models.pods import PodSummary

# Phases in which an Instance is being built, moved or removed: a rule that would start
# another operation on it waits for this one to end.
IN_FLIGHT_PHASES = frozenset(
    {
        InstancePhase.CREATING,
        InstancePhase.UPDATING,
        InstancePhase.RESTARTING,
        InstancePhase.MIGRATING,
        InstancePhase.DELETING,
    }
)


@dataclass(frozen=True)
class SurgeSlots:
    """Surge slots one Instance holds, and why (for the rolloutHold reason)."""

    slots: int = 0
    explanation: str = ""
    """e.g. `Terminating pod p still counts against the surge budget until its deletion grace elapses`."""
    releases_at: datetime | None = None
    """When a Terminating pod stops counting: the workflow wakes then to re-plan."""


NO_SLOTS = SurgeSlots()


@dataclass(frozen=True)
class InstanceFacts:
    """One Instance as the InferenceReplica's rules see it."""

    index: int
    phase: InstancePhase = InstancePhase.READY
    running_revision: str | None = None
    target_revision: str | None = None
    desired_pods: int = 1
    ready: bool = False
    serving: bool = False
    serving_since: datetime | None = None
    operation: str | None = None
    """`Create`, `Update`, `Restart`, `Migrate`, `Delete`, or None when at rest."""
    operation_strategy: UpdateStrategyType | None = None
    has_pods: bool = True
    failure_reason: str | None = None
    failure_counting: bool = False
    surge: SurgeSlots = NO_SLOTS
    replaces: int | None = None
    """Set on a migration or multi-pod surge replacement: the index of the Instance it replaces."""

    @property
    def deleting(self) -> bool:
        return self.phase == InstancePhase.DELETING or self.operation == "Delete"

    @property
    def at_rest(self) -> bool:
        return self.operation is None and self.phase not in IN_FLIGHT_PHASES

    def settled(self, now: datetime, min_ready_seconds: float) -> bool:
        """Serving for at least `minReadySeconds` (spec §9 "Available"), so it stops pacing."""
        if not self.serving:
            return False
        if min_ready_seconds <= 0:
            return True
        if self.serving_since is None:
            return False
        return now >= self.serving_since + timedelta(seconds=min_ready_seconds)

    def settles_at(self, min_ready_seconds: float) -> datetime | None:
        if not self.serving or self.serving_since is None or min_ready_seconds <= 0:
            return None
        return self.serving_since + timedelta(seconds=min_ready_seconds)

    def surge_slots_held(self) -> int:
        """Slots from extra pods, and at least one for a SurgeThenDrain update in flight.

        An update that has been admitted but has not listed its extra pod yet must still
        hold its slot, or a second start could slip in between two observations.
        """
        in_flight_surge = (
            self.operation == "Update" and self.operation_strategy == UpdateStrategyType.SURGE_THEN_DRAIN
        )
        return max(self.surge.slots, 1 if in_flight_surge else 0)


def facts_from_status(
    status: InstanceStatus,
    surge: SurgeSlots | None = None,
    replaces: int | None = None,
) -> InstanceFacts:
    """Condense an Instance's `instance_changed` report into the facts the rules read.

    Without pod-level detail, the extra pods an Instance lists beyond its own count hold
    slots (rounded up per pod count, as §7 counts a gang).
    """
    if surge is None:
        extra = max(0, status.total_pods - status.desired_pods)
        surge = SurgeSlots(slots=math.ceil(extra / max(1, status.desired_pods))) if extra else NO_SLOTS
    operation = status.operation
    return InstanceFacts(
        index=status.index,
        phase=status.phase,
        running_revision=status.running_revision,
        target_revision=status.target_revision,
        desired_pods=status.desired_pods,
        ready=status.ready,
        serving=status.serving,
        serving_since=status.ready_since if status.serving else None,
        operation=operation.type if operation is not None else None,
        operation_strategy=operation.strategy if operation is not None else None,
        has_pods=status.total_pods > 0,
        failure_reason=status.last_failure.reason if status.last_failure is not None else None,
        failure_counting=status.last_failure.counting if status.last_failure is not None else False,
        surge=surge,
        replaces=replaces,
    )


def surge_slots_from_pods(
    desired_pods: int,
    pods: Sequence[PodSummary],
    now: datetime,
    update_in_flight: bool,
    running_revision: str | None = None,
) -> SurgeSlots:
    """Spec §7 surge-slot accounting for one Instance's listed pods.

    Every listed pod beyond the Instance's own pod count holds a slot; a Terminating pod
    holds it only until its deletion deadline (deletionTimestamp is the request time plus
    the grace period), then stops counting even if it lingers; a live leftover pod of a
    failed attempt holds one until the next start on the Instance evicts it. A gang counts
    extra pods divided by its pod count, rounded up (8 draining pods of an 8-pod gang hold 1).
    """
    size = max(1, desired_pods)
    counting: list[PodSummary] = []
    releases_at: datetime | None = None
    terminating_name = ""
    for pod in pods:
        if pod.terminating:
            deadline = pod.deletion_timestamp
            if deadline is not None and now >= deadline:
                continue
            if deadline is not None and (releases_at is None or deadline < releases_at):
                releases_at = deadline
            terminating_name = terminating_name or pod.name
        counting.append(pod)
    extra = max(0, len(counting) - size)
    if extra == 0:
        return NO_SLOTS
    slots = math.ceil(extra / size)
    if terminating_name:
        explanation = (
            f"Terminating pod {terminating_name} still counts against the surge budget "
            "until its deletion grace elapses"
        )
    elif not update_in_flight:
        # The leftover is the pod of another revision than the one the Instance runs.
        strays = sorted(pod.name for pod in counting if running_revision and pod.revision != running_revision)
        leftover = strays[0] if strays else sorted(pod.name for pod in counting)[-1]
        explanation = f"extra pod {leftover} holds a surge slot until a start on its Instance replaces it"
    else:
        explanation = ""
    return SurgeSlots(slots=slots, explanation=explanation, releases_at=releases_at)


@dataclass(frozen=True)
class ReplicaCounts:
    """The InferenceReplica's counts (§7/§9): `replicas` is every Instance in any phase."""

    replicas: int = 0
    ready: int = 0
    serving: int = 0
    available: int = 0
    updated: int = 0
    updated_ready: int = 0
    failed: int = 0


def replica_counts(
    instances: Sequence[InstanceFacts],
    update_revision: str | None,
    now: datetime,
    min_ready_seconds: float,
) -> ReplicaCounts:
    """Counts over every listed Instance; during a migration `replicas` is desired + 1."""
    updated = [
        instance
        for instance in instances
        if update_revision is not None and instance.running_revision == update_revision
    ]
    return ReplicaCounts(
        replicas=len(instances),
        ready=sum(1 for instance in instances if instance.ready),
        serving=sum(1 for instance in instances if instance.serving),
        available=sum(1 for instance in instances if instance.settled(now, min_ready_seconds)),
        updated=len(updated),
        updated_ready=sum(1 for instance in updated if instance.ready),
        failed=sum(1 for instance in instances if instance.phase == InstancePhase.FAILED),
    )
