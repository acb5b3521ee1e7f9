"""Where a multi-cluster InferenceService runs: its candidates and its homes (reference §16).

`select_clusters` sorts the registered WorkloadClusters into candidates (match the selectors
and are Ready), matching clusters that are not Ready, and clusters the selectors exclude
(with the first requirement each one fails). `choose_homes` picks the homes among the
candidates by mode, with each home's replica override:

- `Single`: one home. OME runs an admission race and the first cluster to admit wins; we are
  deterministic instead: the current home stays while it is a Ready candidate, otherwise the
  first candidate by name wins (so a retry or a replay picks the same one).
- `All`: every candidate; each home autoscales on its own (no override).
- `Split`: the fleet floor (`split.replicas`, default the engine's minReplicas) in equal
  shares, the remainder one each to the first homes by name. Factors in
  `spec.routing.capacityFactors` do not weigh in: they steer traffic, not placement.
  The legacy `minReplicasPerCluster` trims the homes so each gets at least that many
  (current homes kept first, then by name).
- `SplitByCapacity`: the floor apportioned by each candidate's reported whole-replica
  capacity (largest remainder, ties to the first by name). Every candidate must report;
  until then the plan is held (`PlacementCapacityFresh` Unknown `CapacityNotObserved`).

A share of 0 makes no home. A plan that puts more than `split.maxReplicasPerCluster` (0: no
extra ceiling) on any home is held, as is a floor the candidates cannot take: a held plan
keeps the current homes as they are (`PlacementPlan.hold` says why; `homes` then lists the
current homes without overrides and the workflow changes nothing).

Public API: `ClusterInfo`, `CandidateSet`, `select_clusters`, `candidates`,
`HomePlan`, `PlanHold`, `PlacementPlan`, `choose_homes`, `split_floor`, `apportion`,
`PlacementMode`, hold reasons `CAPACITY_NOT_OBSERVED`, `MAX_PER_CLUSTER_EXCEEDED`,
`INSUFFICIENT_CAPACITY`, `NO_REPLICA_FLOOR`, `MIN_PER_CLUSTER_UNMET`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from models.inferenceservice import PlacementSpec
from planning.service.placement_selector import (
    Requirement,
    SelectorError,
    parse_selector,
    term_requirements,
    unmet,
)

PlacementMode = Literal["Single", "All", "Split", "SplitByCapacity"]
ACCELERATOR_REQUIREMENTS_ANNOTATION = "ome.io/accelerator-requirements"
CLUSTER_SELECTOR_ANNOTATION = "ome.io/cluster-selector"

CAPACITY_NOT_OBSERVED = "CapacityNotObserved"
MAX_PER_CLUSTER_EXCEEDED = "MaxReplicasPerClusterExceeded"
INSUFFICIENT_CAPACITY = "InsufficientCapacity"
NO_REPLICA_FLOOR = "NoReplicaFloor"
MIN_PER_CLUSTER_UNMET = "MinReplicasPerClusterUnmet"


@dataclass(frozen=True)
class ClusterInfo:
    """A WorkloadCluster as placement sees it. `capacity`: the nominal whole-replica capacity it
    reports (SplitByCapacity only), None while it reports none."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    ready: bool = True
    capacity: int | None = None


@dataclass(frozen=True)
class CandidateSet:
    """Registered clusters, by name, sorted into candidates, not Ready matches and exclusions.
    `problem` is set when the selectors themselves are invalid; nothing is a candidate then."""

    candidates: tuple[ClusterInfo, ...] = ()
    not_ready: tuple[str, ...] = ()
    excluded: Mapping[str, str] = field(default_factory=dict)
    """Cluster -> the first requirement it fails."""
    problem: str | None = None

    def __post_init__(self) -> None:
        # Sorted by name whoever builds it, so every decision below is deterministic.
        object.__setattr__(self, "candidates", tuple(sorted(self.candidates, key=lambda c: c.name)))
        object.__setattr__(self, "not_ready", tuple(sorted(self.not_ready)))
        object.__setattr__(self, "excluded", dict(sorted(self.excluded.items())))

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.candidates]

    @property
    def registered(self) -> int:
        return len(self.candidates) + len(self.not_ready) + len(self.excluded)


def _legacy_selectors(placement: PlacementSpec, annotations: Mapping[str, str]) -> list[Requirement]:
    sources = (
        ("spec.placement.requirements", placement.requirements),
        ("spec.placement.clusterSelector", placement.cluster_selector),
        (f'metadata.annotations["{ACCELERATOR_REQUIREMENTS_ANNOTATION}"]',
         annotations.get(ACCELERATOR_REQUIREMENTS_ANNOTATION)),
        (f'metadata.annotations["{CLUSTER_SELECTOR_ANNOTATION}"]', annotations.get(CLUSTER_SELECTOR_ANNOTATION)),
    )
    return [r for where, text in sources if text is not None for r in parse_selector(text, where)]


def _why_excluded(terms: Sequence[Sequence[Requirement]], legacy: Sequence[Requirement], cluster: ClusterInfo) -> str | None:
    failed = unmet(legacy, cluster.name, cluster.labels)
    if failed is not None:
        return f"selector requires {failed.describe()}"
    misses = [(index, unmet(term, cluster.name, cluster.labels)) for index, term in enumerate(terms)]
    if not terms or any(miss is None for _, miss in misses):
        return None
    detail = "; ".join(f"term {index}: {miss.describe()}" for index, miss in misses if miss is not None)
    return f"matches no clusterAffinity term ({detail})"


def select_clusters(
    placement: PlacementSpec, clusters: Sequence[ClusterInfo], annotations: Mapping[str, str] | None = None
) -> CandidateSet:
    """Sort `clusters` (every WorkloadCluster registration) by the placement's selectors.

    Omitted `clusterAffinity` selects every registration; a legacy selector string, where
    set (field or annotation), narrows either form (all of them ANDed).
    """
    try:
        terms = [term_requirements(term, index) for index, term in enumerate(placement.cluster_affinity or [])]
        legacy = _legacy_selectors(placement, annotations or {})
    except SelectorError as error:
        return CandidateSet(problem=str(error))
    chosen: list[ClusterInfo] = []
    not_ready: list[str] = []
    excluded: dict[str, str] = {}
    for cluster in sorted(clusters, key=lambda c: c.name):
        why = _why_excluded(terms, legacy, cluster)
        if why is not None:
            excluded[cluster.name] = why
        elif not cluster.ready:
            not_ready.append(cluster.name)
        else:
            chosen.append(cluster)
    return CandidateSet(tuple(chosen), tuple(not_ready), excluded)


def candidates(
    placement: PlacementSpec, clusters: Sequence[ClusterInfo], annotations: Mapping[str, str] | None = None
) -> list[str]:
    """The names of the Ready clusters the placement selects, sorted."""
    return select_clusters(placement, clusters, annotations).names


@dataclass(frozen=True)
class HomePlan:
    """A home and its engine replica override (None: the component's own min/max)."""

    cluster: str
    replicas: int | None = None

    def floor(self, engine_min_replicas: int) -> int:
        """The ready replicas this home owes: its share, else the engine's minReplicas."""
        return engine_min_replicas if self.replicas is None else self.replicas


@dataclass(frozen=True)
class PlanHold:
    """Why the plan keeps the current homes; `reason` is the condition's reason."""

    reason: str
    message: str

    @property
    def awaits_capacity(self) -> bool:
        """Held only until every candidate reports capacity: not a failure of the spec."""
        return self.reason == CAPACITY_NOT_OBSERVED


@dataclass(frozen=True)
class PlacementPlan:
    mode: PlacementMode
    homes: tuple[HomePlan, ...]
    selection: CandidateSet
    engine_min_replicas: int = 0
    floor: int | None = None
    hold: PlanHold | None = None

    @property
    def home_names(self) -> list[str]:
        return [home.cluster for home in self.homes]


def split_floor(placement: PlacementSpec, engine_min_replicas: int) -> int:
    """The fleet floor a split distributes: `split.replicas`, else the engine's minReplicas."""
    replicas = placement.split.replicas if placement.split is not None else None
    return engine_min_replicas if replicas is None else replicas


def apportion(total: int, weights: Mapping[str, int]) -> dict[str, int]:
    """`total` in whole shares proportional to `weights` (largest remainder; ties to the first
    name). The shares add up to `total` exactly; all weights 0 gives nothing to anyone."""
    weight_sum = sum(weights.values())
    if weight_sum <= 0:
        return {name: 0 for name in weights}
    shares = {name: total * weight // weight_sum for name, weight in weights.items()}
    by_remainder = sorted(weights, key=lambda name: (-(total * weights[name] % weight_sum), name))
    for name in by_remainder[: total - sum(shares.values())]:
        shares[name] += 1
    return shares


def _single(selection: CandidateSet, current: Sequence[str]) -> list[HomePlan]:
    names = selection.names
    keep = next((home for home in current if home in names), None)
    chosen = keep if keep is not None else (names[0] if names else None)
    return [HomePlan(chosen)] if chosen is not None else []


def _split_weights(placement: PlacementSpec, selection: CandidateSet, current: Sequence[str], floor: int) -> dict[str, int]:
    ordered = sorted(selection.names, key=lambda name: (name not in current, name))
    least = (placement.split.min_replicas_per_cluster or 0) if placement.split is not None else 0
    room = floor // least if least > 0 else len(ordered)
    return {name: 1 for name in ordered[: min(room, floor)]}


def _split_hold(placement: PlacementSpec, selection: CandidateSet, floor: int, shares: Mapping[str, int]) -> PlanHold | None:
    ceiling = (placement.split.max_replicas_per_cluster or 0) if placement.split is not None else 0
    if floor <= 0:
        return PlanHold(NO_REPLICA_FLOOR, "nothing to split: spec.placement.split.replicas is unset and "
                        "spec.engine.minReplicas is 0; set spec.placement.split.replicas")
    if sum(shares.values()) < floor:
        offered = ", ".join(f"{c.name}={c.capacity}" for c in selection.candidates)
        return PlanHold(INSUFFICIENT_CAPACITY, f"the floor of {floor} replica(s) does not fit the capacity the "
                        f"candidates report ({offered}); add clusters or lower spec.placement.split.replicas")
    over = sorted(name for name, share in shares.items() if ceiling > 0 and share > ceiling)
    if over:
        worst = max(shares[name] for name in over)
        homes = sorted(name for name, share in shares.items() if share > 0)
        return PlanHold(MAX_PER_CLUSTER_EXCEEDED, f"the floor of {floor} replica(s) across {len(homes)} home(s) "
                        f"({', '.join(homes)}) puts {worst} on {', '.join(over)}, above split.maxReplicasPerCluster "
                        f"{ceiling}; add clusters or raise maxReplicasPerCluster")
    return None


def _held(plan: PlacementPlan, hold: PlanHold, current: Sequence[str]) -> PlacementPlan:
    return PlacementPlan(plan.mode, tuple(HomePlan(home) for home in current), plan.selection,
                         plan.engine_min_replicas, plan.floor, hold)


def choose_homes(
    placement: PlacementSpec, selection: CandidateSet, current_homes: Sequence[str], engine_min_replicas: int
) -> PlacementPlan:
    """The homes for `placement` among `selection`'s candidates, given the current homes."""
    mode: PlacementMode = placement.mode or "Single"
    if mode == "Single":
        return PlacementPlan(mode, tuple(_single(selection, current_homes)), selection, engine_min_replicas)
    if mode == "All":
        return PlacementPlan(mode, tuple(HomePlan(n) for n in selection.names), selection, engine_min_replicas)
    floor = split_floor(placement, engine_min_replicas)
    base = PlacementPlan(mode, (), selection, engine_min_replicas, floor)
    if not selection.candidates:
        return base
    if mode == "SplitByCapacity":
        silent = [c.name for c in selection.candidates if c.capacity is None]
        if silent:
            return _held(base, PlanHold(CAPACITY_NOT_OBSERVED, f"no capacity report yet from {', '.join(silent)} "
                                        f"({len(silent)} of {len(selection.candidates)} candidate(s)); the split "
                                        "keeps its current homes until every candidate reports"), current_homes)
        weights = {c.name: max(c.capacity or 0, 0) for c in selection.candidates}
        shares = apportion(min(floor, sum(weights.values())), weights)
    else:
        weights = _split_weights(placement, selection, current_homes, floor)
        if floor > 0 and not weights:
            least = placement.split.min_replicas_per_cluster if placement.split is not None else None
            return _held(base, PlanHold(MIN_PER_CLUSTER_UNMET, f"the floor of {floor} replica(s) cannot give any "
                                        f"home split.minReplicasPerCluster {least}; raise spec.placement.split."
                                        "replicas or lower minReplicasPerCluster"), current_homes)
        shares = apportion(floor, weights)
    hold = _split_hold(placement, selection, floor, shares)
    if hold is not None:
        return _held(base, hold, current_homes)
    homes = tuple(HomePlan(name, share) for name, share in sorted(shares.items()) if share > 0)
    return PlacementPlan(mode, homes, selection, engine_min_replicas, floor)
