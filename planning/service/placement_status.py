"""`status.placement` and the placement source conditions of a multi-cluster InferenceService
(reference §16), from a plan (`planning.service.placement`) and what its homes report.

Phase:

| phase       | when                                                                   |
|-------------|------------------------------------------------------------------------|
| `Failed`    | the selectors are invalid, or the plan is held for a reason the spec must fix |
| `Pending`   | no home: no Ready candidate (or capacity not reported yet and no home) |
| `Racing`    | mode Single, its home has not admitted the member copy yet             |
| `Admitting` | other modes, some home has not admitted its member copy yet            |
| `Placed`    | every home admitted                                                    |

`candidates[]` lists the clusters holding or being given a member copy (the plan's homes and
former homes whose copy is still there), `Admitting` until the copy is admitted, then
`Admitted`; `homes[]` the plan's homes that admitted, with a split's replica share and the
endpoint. `cluster`/`endpoint` are set only in mode Single, once its home admitted.

Conditions (all six, every time): `PlacementInputValid`, `PlacementSatisfied`,
`PlacementConverged`, `PlacementCapacityFresh`, `PlacementBackendReady`,
`PlacementReplicaFloorsReady`; messages name the clusters and the counts.

Public API: `HomeObserved`, `PlacementReport`, `placement_status(plan, observed)`, `describe_home`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from models.isvc_status import PlacementCandidate, PlacementHome, PlacementPhase, PlacementStatus
from planning.replica.conditions import PlannedCondition
from planning.service.placement import CAPACITY_NOT_OBSERVED, CandidateSet, HomePlan, PlacementPlan


@dataclass(frozen=True)
class HomeObserved:
    """What a cluster's member workflow reports: whether it accepted the spec, the endpoint,
    the admitted (`allocated`) and ready engine replicas."""

    cluster: str
    admitted: bool = False
    endpoint: str | None = None
    allocated: int = 0
    ready: int = 0


@dataclass(frozen=True)
class PlacementReport:
    status: PlacementStatus
    conditions: tuple[PlannedCondition, ...]

    def condition(self, type_: str) -> PlannedCondition:
        return next(c for c in self.conditions if c.type == type_)


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _failed(plan: PlacementPlan) -> bool:
    return plan.selection.problem is not None or (plan.hold is not None and not plan.hold.awaits_capacity)


def _phase(plan: PlacementPlan, admitted: set[str]) -> PlacementPhase:
    if _failed(plan):
        return "Failed"
    if not plan.homes:
        return "Pending"
    if any(home.cluster not in admitted for home in plan.homes):
        return "Racing" if plan.mode == "Single" else "Admitting"
    return "Placed"


def _input_valid(selection: CandidateSet) -> PlannedCondition:
    if selection.problem is not None:
        return PlannedCondition("PlacementInputValid", "False", "InvalidSelector", selection.problem)
    return PlannedCondition("PlacementInputValid", "True", "Valid",
                            f"spec.placement selects from {_plural(selection.registered, 'registered WorkloadCluster')}")


def _no_candidates(selection: CandidateSet) -> str:
    parts = [f"{selection.registered} registered", f"{len(selection.excluded)} excluded by the selectors"]
    if selection.not_ready:
        parts.append(f"{len(selection.not_ready)} matching but not Ready ({', '.join(selection.not_ready)})")
    return f"no Ready WorkloadCluster matches spec.placement: {', '.join(parts)}"


def describe_home(home: HomePlan) -> str:
    """`worker-a`, or `worker-a (2 replicas)` for a home with an override."""
    return home.cluster if home.replicas is None else f"{home.cluster} ({_plural(home.replicas, 'replica')})"


def _satisfied(plan: PlacementPlan) -> PlannedCondition:
    kind = "PlacementSatisfied"
    selection = plan.selection
    if selection.problem is not None:
        return PlannedCondition(kind, "False", "InvalidInput", "spec.placement is invalid; see PlacementInputValid")
    if plan.hold is not None:
        if plan.hold.awaits_capacity:
            return PlannedCondition(kind, "Unknown", plan.hold.reason, plan.hold.message)
        return PlannedCondition(kind, "False", plan.hold.reason, plan.hold.message)
    if not plan.homes:
        return PlannedCondition(kind, "False", "NoCandidates", _no_candidates(selection))
    homes = ", ".join(describe_home(home) for home in plan.homes)
    return PlannedCondition(kind, "True", "Satisfied",
                            f"mode {plan.mode}: {_plural(len(plan.homes), 'home')} of "
                            f"{_plural(len(selection.candidates), 'Ready candidate')}: {homes}")


def _converged(plan: PlacementPlan, observed: Sequence[HomeObserved], admitted: set[str]) -> PlannedCondition:
    kind = "PlacementConverged"
    if plan.hold is not None:
        return PlannedCondition(kind, "False", "PlanHeld", f"the homes stay as they are: {plan.hold.message}")
    if not plan.homes:
        return PlannedCondition(kind, "False", "NotPlaced", "no home is chosen")
    waiting = [home for home in plan.home_names if home not in admitted]
    if waiting:
        return PlannedCondition(kind, "False", "AwaitingAdmission",
                                f"{len(waiting)} of {_plural(len(plan.homes), 'home')} have not admitted the member "
                                f"copy yet: {', '.join(waiting)}")
    former = sorted(o.cluster for o in observed if o.cluster not in plan.home_names)
    if former:
        return PlannedCondition(kind, "False", "RemovingFormerHomes",
                                f"member copies remain on {_plural(len(former), 'former home')} "
                                f"({', '.join(former)}) and are being removed")
    return PlannedCondition(kind, "True", "Converged",
                            f"every home admitted its member copy: {', '.join(plan.home_names)}")


def _capacity_fresh(plan: PlacementPlan) -> PlannedCondition:
    kind = "PlacementCapacityFresh"
    if plan.mode != "SplitByCapacity":
        return PlannedCondition(kind, "True", "NotRequired", f"mode {plan.mode} does not use capacity reports")
    if plan.hold is not None and plan.hold.awaits_capacity:
        return PlannedCondition(kind, "Unknown", CAPACITY_NOT_OBSERVED, plan.hold.message)
    reported = plan.selection.candidates
    if not reported:
        return PlannedCondition(kind, "Unknown", CAPACITY_NOT_OBSERVED, "no Ready candidate to report capacity")
    listing = ", ".join(f"{c.name}={c.capacity}" for c in reported)
    return PlannedCondition(kind, "True", "CapacityObserved",
                            f"capacity reported by all {_plural(len(reported), 'candidate')}: {listing}")


def _backend_ready(plan: PlacementPlan, by_cluster: dict[str, HomeObserved]) -> PlannedCondition:
    kind = "PlacementBackendReady"
    serving = [by_cluster[name] for name in plan.home_names if name in by_cluster and by_cluster[name].admitted]
    if not serving:
        return PlannedCondition(kind, "False", "NotPlaced", "no home has admitted the member copy yet")
    silent = [home.cluster for home in serving if not home.endpoint]
    if silent:
        return PlannedCondition(kind, "False", "EndpointMissing",
                                f"no endpoint reported by {len(silent)} of {_plural(len(serving), 'admitted home')}: "
                                f"{', '.join(silent)}")
    return PlannedCondition(kind, "True", "EndpointsReported",
                            f"{_plural(len(serving), 'home')} report an endpoint: "
                            + ", ".join(f"{home.cluster} ({home.endpoint})" for home in serving))


def _floors_ready(plan: PlacementPlan, by_cluster: dict[str, HomeObserved]) -> PlannedCondition:
    kind = "PlacementReplicaFloorsReady"
    if not plan.homes:
        return PlannedCondition(kind, "False", "NotPlaced", "no home is chosen")
    rows = []
    for home in plan.homes:
        floor = home.floor(plan.engine_min_replicas)
        seen = by_cluster.get(home.cluster)
        ready = seen.ready if seen is not None and seen.admitted else 0
        rows.append((home.cluster, ready, floor))
    short = [f"{name} has {ready} of {_plural(floor, 'ready replica')}" for name, ready, floor in rows if ready < floor]
    if short:
        return PlannedCondition(kind, "False", "FloorsNotReady", "; ".join(short))
    return PlannedCondition(kind, "True", "FloorsReady",
                            "every home has its floor ready: " + ", ".join(f"{n} {r}/{f}" for n, r, f in rows))


def placement_status(plan: PlacementPlan, observed: Sequence[HomeObserved]) -> PlacementReport:
    """`status.placement` and the six source conditions for `plan`, given what homes report."""
    by_cluster = {o.cluster: o for o in observed}
    admitted = {o.cluster for o in observed if o.admitted}
    holders = sorted(set(plan.home_names) | set(by_cluster))
    homes = [
        PlacementHome(cluster=home.cluster, replicas=home.replicas, endpoint=by_cluster[home.cluster].endpoint)
        for home in plan.homes
        if home.cluster in admitted
    ]
    single = homes[0] if plan.mode == "Single" and homes else None
    status = PlacementStatus(
        phase=_phase(plan, admitted),
        cluster=single.cluster if single is not None else None,
        endpoint=single.endpoint if single is not None else None,
        candidates=[PlacementCandidate(cluster=c, phase="Admitted" if c in admitted else "Admitting") for c in holders],
        homes=homes,
    )
    conditions = (
        _input_valid(plan.selection),
        _satisfied(plan),
        _converged(plan, observed, admitted),
        _capacity_fresh(plan),
        _backend_ready(plan, by_cluster),
        _floors_ready(plan, by_cluster),
    )
    return PlacementReport(status, conditions)
