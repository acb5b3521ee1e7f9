"""Conditions of an InferenceReplica, and the component condition it puts on the ISVC.

`Ready` (spec reference §8) takes the first row that matches, in this order:

| Reason                 | Status  | When                                                    |
|------------------------|---------|---------------------------------------------------------|
| `InstanceFailed`       | False   | an Instance is Failed                                   |
| `Staged`               | True    | a partition holds Instances and the rest are updated    |
| `RolloutInProgress`    | Unknown | Instances are moving to the update revision             |
| `NoReplicas`           | False   | no desired Instances                                    |
| `AllInstancesReady`    | True    | every desired Instance is Ready                         |
| `MinimumAvailable`     | True    | serving >= desired - maxUnavailable                     |
| `ReplicaCountMismatch` | False   | otherwise                                               |

Also `GangSchedulingUnavailable`, `InstanceReadyTimeoutUnconfigured`, `DrainOverdue`, and the ISVC's
`EngineReady` / `DecoderReady` / `RouterReady` from the same counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from models.duration import format_duration
from planning.replica.facts import InstanceFacts, ReplicaCounts
from planning.replica.update import on_revision, partition_split

ConditionStatus = Literal["True", "False", "Unknown"]


@dataclass(frozen=True)
class PlannedCondition:
    type: str
    status: ConditionStatus
    reason: str
    message: str


@dataclass(frozen=True)
class RolloutProgress:
    """Where the component stands between its prior revision and the update revision."""

    revision: str
    in_flight: bool
    staged: bool
    updated: int
    total: int
    held: int
    partition: int


def _moving(instance: InstanceFacts, revision: str) -> bool:
    """Still to reach `revision` from another one (a first create is not a rollout)."""
    if on_revision(instance, revision):
        return False
    if instance.operation == "Update":
        return True
    return instance.running_revision is not None and instance.running_revision != revision


def rollout_progress(
    instances: Sequence[InstanceFacts], update_revision: str, partition: int
) -> RolloutProgress:
    held, free = partition_split(instances, partition)
    everyone = held + free
    updated = sum(1 for instance in everyone if instance.running_revision == update_revision)
    in_flight = any(_moving(instance, update_revision) for instance in free)
    held_behind = sum(
        1
        for instance in held
        if instance.running_revision is not None and instance.running_revision != update_revision
    )
    return RolloutProgress(
        revision=update_revision,
        in_flight=in_flight,
        staged=partition > 0 and held_behind > 0 and not in_flight,
        updated=updated,
        total=len(everyone),
        held=held_behind,
        partition=partition,
    )


def ready_condition(
    desired: int, counts: ReplicaCounts, minimum: int, progress: RolloutProgress | None
) -> PlannedCondition:
    """The IR `Ready` condition: first matching row of the §8 table."""
    if counts.failed > 0:
        return PlannedCondition("Ready", "False", "InstanceFailed", "At least one Instance has Phase=Failed")
    if progress is not None and progress.staged:
        return PlannedCondition(
            "Ready",
            "True",
            "Staged",
            f"Staged at partition {progress.partition}: {progress.updated}/{progress.total} Instances on "
            f"{progress.revision}, {progress.held} held on the prior revision",
        )
    if progress is not None and progress.in_flight:
        return PlannedCondition(
            "Ready",
            "Unknown",
            "RolloutInProgress",
            f"Rolling out {progress.revision} ({progress.updated}/{progress.total} Instances on target)",
        )
    if desired == 0:
        return PlannedCondition("Ready", "False", "NoReplicas", "InferenceReplica has no desired Instances")
    ready = min(counts.ready, desired)
    serving = min(counts.serving, desired)
    if ready >= desired:
        return PlannedCondition("Ready", "True", "AllInstancesReady", f"{ready}/{desired} Instances Ready")
    if serving >= minimum:
        return PlannedCondition(
            "Ready",
            "True",
            "MinimumAvailable",
            f"{serving}/{desired} Instances serving (min {minimum})",
        )
    return PlannedCondition(
        "Ready",
        "False",
        "ReplicaCountMismatch",
        f"{serving}/{desired} Instances serving, need {minimum} (no rollout in flight)",
    )


COMPONENT_CONDITION_TYPES = {"engine": "EngineReady", "decoder": "DecoderReady", "router": "RouterReady"}


def component_condition_type(component: str) -> str:
    return COMPONENT_CONDITION_TYPES.get(component, f"{component[:1].upper()}{component[1:]}Ready")


def component_ready(
    component: str, desired: int, all_ready: bool, serving: int, minimum: int
) -> PlannedCondition:
    """§8 last bullet: the ISVC's `<Component>Ready`, whatever runs the component.

    `all_ready`: every desired Instance (or pod) is Ready; `serving` is capped at `desired`.
    """
    kind = component_condition_type(component)
    if desired <= 0:
        return PlannedCondition(kind, "False", "NoReplicas", "Component has no desired Instances")
    if all_ready:
        return PlannedCondition(kind, "True", "Ready", "All Instances are Ready")
    serving = min(serving, desired)
    if serving >= minimum:
        return PlannedCondition(
            kind, "True", "MinimumAvailable", f"{serving}/{desired} Instances serving (min {minimum})"
        )
    return PlannedCondition(
        kind, "False", "InsufficientAvailable", f"{serving}/{desired} Instances serving, need {minimum}"
    )


def component_condition(
    component: str, desired: int, counts: ReplicaCounts, minimum: int
) -> PlannedCondition:
    """`<Component>Ready` of an OMENative component, from the InferenceReplica's counts."""
    all_ready = counts.ready >= desired and counts.failed == 0
    return component_ready(component, desired, all_ready, counts.serving, minimum)


def gang_scheduling_condition(multi_pod: bool, podgroup_crd_installed: bool) -> PlannedCondition:
    """`GangSchedulingUnavailable`: True when multi-pod Instances can schedule partially."""
    if multi_pod and not podgroup_crd_installed:
        return PlannedCondition(
            "GangSchedulingUnavailable",
            "True",
            "PodGroupCRDNotInstalled",
            "the scheduler-plugins PodGroup CRD is not installed, so the pods of a multi-pod Instance "
            "can schedule partially; install the CRD and set schedulerName to a gang-aware scheduler",
        )
    message = (
        "a PodGroup is created for each multi-pod Instance"
        if multi_pod
        else "Instances are single pods, which need no gang scheduling"
    )
    return PlannedCondition("GangSchedulingUnavailable", "False", "GangSchedulingAvailable", message)


def ready_timeout_condition(instance_ready_timeout_seconds: float | None) -> PlannedCondition:
    """`InstanceReadyTimeoutUnconfigured` (§10): `0s` and negatives count as unset."""
    if instance_ready_timeout_seconds is None or instance_ready_timeout_seconds <= 0:
        return PlannedCondition(
            "InstanceReadyTimeoutUnconfigured",
            "True",
            "InstanceReadyTimeoutUnconfigured",
            "no instanceReadyTimeout is set, so an Instance that never becomes ready waits forever and "
            "migrations fail; set lifecycle.instanceReadyTimeout such as 30m",
        )
    return PlannedCondition(
        "InstanceReadyTimeoutUnconfigured",
        "False",
        "InstanceReadyTimeoutConfigured",
        f"Instance readiness deadline is {format_duration(instance_ready_timeout_seconds)}",
    )


def overdue_drains(deletions: Sequence[tuple[int, datetime]], now: datetime) -> list[tuple[int, datetime]]:
    """The deletions (index, drain deadline) past their deadline, lowest index first (§15)."""
    return sorted((index, deadline) for index, deadline in deletions if now > deadline)


def drain_overdue_condition(deletions: Sequence[tuple[int, datetime]], now: datetime) -> PlannedCondition:
    """`DrainOverdue` (§8, §15): True while a deletion is past its start + `instanceReadyTimeout`.

    An overdue drain never fails the Instance: it stays Deleting until its pods are gone."""
    overdue = overdue_drains(deletions, now)
    if not overdue:
        return PlannedCondition(
            "DrainOverdue", "False", "DrainsWithinDeadline", "no Instance's drain is past its deadline"
        )
    indexes = ",".join(str(index) for index, _ in overdue)
    earliest = min(deadline for _, deadline in overdue).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return PlannedCondition(
        "DrainOverdue",
        "True",
        "DrainsOverdue",
        f"drain of instance(s) {indexes} overdue (earliest deadline {earliest}); pods still Terminating",
    )


def next_drain_deadline(deletions: Sequence[tuple[int, datetime]], now: datetime) -> datetime | None:
    """The next moment a deletion becomes overdue: when `DrainOverdue` must be looked at again."""
    upcoming = [deadline for _, deadline in deletions if deadline >= now]
    return min(upcoming) if upcoming else None
