"""The text of `kubectl ome placement explain <isvc>`: why a multi-cluster InferenceService runs
where it runs (reference §16, and the capacity-factor page's troubleshooting).

It shows the routing intent (`Valid`, or `Invalid` with the error OME logs, such as
`validate routing policy: spec.routing.capacityFactors["worker-b"] must be positive, got "0"`),
the policy and mode, the candidates, the clusters that match but are not Ready, the clusters
the selectors exclude and the first requirement each one fails, the homes, a held plan, and
the placement conditions when a report is given.

Public API: `routing_intent(routing) -> (valid, detail)`, `explain(isvc, plan, report=None)`.
"""

from __future__ import annotations

from models.inferenceservice import InferenceService, RoutingSpec
from models.quantity import Quantity, QuantityError
from planning.service.placement import PlacementPlan
from planning.service.placement_status import PlacementReport, describe_home


def routing_intent(routing: RoutingSpec | None) -> tuple[bool, str]:
    """Whether the routing intent is valid, and what to say about it."""
    if routing is not None and routing.enabled is False:
        return True, "routing is off (spec.routing.enabled: false)"
    for cluster, factor in sorted(((routing.capacity_factors if routing else None) or {}).items()):
        field = f'spec.routing.capacityFactors["{cluster}"]'
        try:
            positive = Quantity.parse(factor).sign() > 0
        except QuantityError:
            return False, f'validate routing policy: {field} is not a quantity, got "{factor}"'
        if not positive:
            return False, f'validate routing policy: {field} must be positive, got "{factor}"'
    factors = (routing.capacity_factors if routing else None) or {}
    if not factors:
        return True, "every home counts its replicas with factor 1"
    return True, "capacity factors " + ", ".join(f"{k}={v}" for k, v in sorted(factors.items()))


def explain(isvc: InferenceService, plan: PlacementPlan, report: PlacementReport | None = None) -> str:
    placement = isvc.spec.placement
    policy = (placement.policy if placement is not None else None) or "Legacy"
    valid, detail = routing_intent(isvc.spec.routing)
    selection = plan.selection
    lines = [
        f"InferenceService {isvc.namespace}/{isvc.name}",
        f"Placement: policy {policy}, mode {plan.mode}"
        + (f", phase {report.status.phase}" if report is not None else ""),
        f"Routing intent: {'Valid' if valid else 'Invalid'}: {detail}",
    ]
    if selection.problem is not None:
        lines.append(f"Input: Invalid: {selection.problem}")
    names = ", ".join(selection.names) or "none"
    lines.append(f"Candidates ({len(selection.candidates)} of {selection.registered} registered): {names}")
    if selection.not_ready:
        lines.append(f"Not Ready ({len(selection.not_ready)}): {', '.join(selection.not_ready)}")
    if selection.excluded:
        lines.append(f"Excluded ({len(selection.excluded)}):")
        lines.extend(f"  {cluster}: {why}" for cluster, why in selection.excluded.items())
    homes = ", ".join(describe_home(home) for home in plan.homes)
    lines.append(f"Homes: {homes or 'none'}")
    if plan.floor is not None:
        lines.append(f"Replica floor: {plan.floor}")
    if plan.hold is not None:
        lines.append(f"Held: {plan.hold.reason}: {plan.hold.message}")
    if report is not None:
        lines.append("Conditions:")
        lines.extend(f"  {c.type} {c.status} {c.reason}: {c.message}" for c in report.conditions)
    return "\n".join(lines)
