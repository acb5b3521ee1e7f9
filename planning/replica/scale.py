"""How many Instances an InferenceReplica keeps, which indexes it adds, which it removes.

Rules (spec page 001 "What OMENative manages", reference §9):
- The count is the component's `minReplicas` unless the autoscaler or a transient `scale`
  signal set another, always clamped to `[minReplicas, maxReplicas]`. A transient scale
  lasts until the autoscaler or the next apply sets the count again; the workflow clears
  it then, and this module only says which value wins. Whether a `scale` request is valid
  at all is decided once, by the InferenceService (`planning.service.scale.check_scale`).
- A new Instance takes the lowest free index. An index stays in use while any Instance
  row holds it, Deleting ones included: their pods still carry the name.
- Scale-down keeps Instances in an active migration or multi-pod surge handover (and their
  replacements) first, then `Ready` ones before the others, lowest index first; it removes
  from the end of that order. A handover pair counts as one Instance and leaves together.
- While paused no new Instance starts (one being created may finish); scale-down proceeds.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from models.instance import InstancePhase
from planning.replica.facts import InstanceFacts

DEFAULT_MIN_REPLICAS = 1


@dataclass(frozen=True)
class ReplicaCount:
    """The count the InferenceReplica keeps, and where it came from (for status and history)."""

    desired: int
    source: str
    """`minReplicas`, `autoscaler` or `scale`."""
    clamped_from: int | None = None
    """The requested count when the bounds changed it, so the clamp can be explained."""

    @property
    def note(self) -> str:
        if self.clamped_from is None:
            return f"{self.desired} Instance(s) from {self.source}"
        return (
            f"{self.desired} Instance(s): {self.source} asked for {self.clamped_from}, "
            "clamped to [minReplicas, maxReplicas]"
        )


def bounds(min_replicas: int | None, max_replicas: int | None) -> tuple[int, int | None]:
    """`minReplicas` (default 1) and `maxReplicas` (unset or 0: no cap; never below min)."""
    low = DEFAULT_MIN_REPLICAS if min_replicas is None else max(0, min_replicas)
    if max_replicas is None or max_replicas <= 0:
        return low, None
    return low, max(low, max_replicas)


def desired_replicas(
    min_replicas: int | None,
    max_replicas: int | None,
    autoscaler_replicas: int | None = None,
    transient_replicas: int | None = None,
) -> ReplicaCount:
    """The Instance count: a transient scale, else the autoscaler's, else `minReplicas`."""
    low, high = bounds(min_replicas, max_replicas)
    if transient_replicas is not None:
        requested, source = transient_replicas, "scale"
    elif autoscaler_replicas is not None:
        requested, source = autoscaler_replicas, "autoscaler"
    else:
        return ReplicaCount(desired=low, source="minReplicas")
    clamped = max(low, requested)
    if high is not None:
        clamped = min(high, clamped)
    return ReplicaCount(
        desired=clamped,
        source=source,
        clamped_from=None if clamped == requested else requested,
    )


def lowest_free_indexes(used: Iterable[int], count: int) -> list[int]:
    """The `count` lowest non-negative indexes not in `used` (gaps are filled first)."""
    taken = set(used)
    found: list[int] = []
    candidate = 0
    while len(found) < count:
        if candidate not in taken:
            found.append(candidate)
        candidate += 1
    return found


@dataclass(frozen=True)
class _Unit:
    """One counted Instance: a lone Instance, or a handover source with its replacements."""

    indexes: tuple[int, ...]
    in_handover: bool
    ready: bool
    lowest_index: int

    @property
    def keep_key(self) -> tuple[int, int, int]:
        return (0 if self.in_handover else 1, 0 if self.ready else 1, self.lowest_index)


def _units(instances: Sequence[InstanceFacts]) -> list[_Unit]:
    live = [instance for instance in instances if not instance.deleting]
    live_indexes = {instance.index for instance in live}
    replacements: dict[int, list[int]] = {}
    for instance in live:
        if instance.replaces is not None and instance.replaces in live_indexes:
            replacements.setdefault(instance.replaces, []).append(instance.index)
    paired = {index for indexes in replacements.values() for index in indexes}
    units: list[_Unit] = []
    for instance in live:
        if instance.index in paired:
            continue
        partners = tuple(sorted(replacements.get(instance.index, [])))
        units.append(
            _Unit(
                indexes=(instance.index, *partners),
                in_handover=bool(partners) or instance.phase == InstancePhase.MIGRATING,
                ready=instance.phase == InstancePhase.READY,
                lowest_index=instance.index,
            )
        )
    return units


def keep_order(instances: Sequence[InstanceFacts]) -> list[int]:
    """Indexes of the counted Instances, the ones scale-down keeps longest first (§9)."""
    ordered = sorted(_units(instances), key=lambda unit: unit.keep_key)
    return [index for unit in ordered for index in unit.indexes]


def counted_instances(instances: Sequence[InstanceFacts]) -> int:
    """Instances that count toward the desired number: not Deleting, a handover pair as one."""
    return len(_units(instances))


@dataclass(frozen=True)
class ScalePlan:
    """What to do about the Instance count in this pass."""

    create: tuple[int, ...] = ()
    """Indexes of new Instances to start, lowest free first."""
    remove: tuple[int, ...] = ()
    """Indexes to drain and delete, in the order to remove them."""
    counted: int = 0
    held_by_pause: int = 0
    """New Instances the pause holds back."""

    @property
    def idle(self) -> bool:
        return not self.create and not self.remove


def plan_scale(
    desired: int,
    instances: Sequence[InstanceFacts],
    paused: bool = False,
    reserved_indexes: Iterable[int] = (),
) -> ScalePlan:
    """Start or remove Instances so the counted ones match `desired`.

    `reserved_indexes` are indexes that must not be reused yet although no row shows them,
    such as an Instance whose child workflow is still finishing.
    """
    units = _units(instances)
    counted = len(units)
    if counted < desired:
        missing = desired - counted
        if paused:
            # A pause holds new Instances (§5); the count catches up on resume.
            return ScalePlan(counted=counted, held_by_pause=missing)
        used = {instance.index for instance in instances} | set(reserved_indexes)
        return ScalePlan(create=tuple(lowest_free_indexes(used, missing)), counted=counted)
    if counted > desired:
        ordered = sorted(units, key=lambda unit: unit.keep_key)
        leaving = ordered[desired:]
        # Remove the least valuable first: the end of the keep order.
        remove = [index for unit in reversed(leaving) for index in unit.indexes]
        return ScalePlan(remove=tuple(remove), counted=counted)
    return ScalePlan(counted=counted)
