"""The scheduler's decision for one pending pod: kube-scheduler's filter and score plugins.

`schedule_pod(pod, nodes, pods)` is pure and deterministic. It runs kube-scheduler's
default filter plugins in their order (NodeUnschedulable, NodeName, TaintToleration,
NodeAffinity, NodePorts, NodeResourcesFit, PodTopologySpread, InterPodAffinity); a node
is charged to the first plugin that rejects it. Feasible nodes are scored with the
default plugin weights (TaintToleration 3, NodeAffinity 2, PodTopologySpread 2,
InterPodAffinity 2, NodeResourcesFit least-allocated 1, BalancedAllocation 1) and the
highest wins; ties go to the first node in natural name order (gpu-node-2 before
gpu-node-10) where the real scheduler would pick at random.

When no node fits, `message` is the FailedScheduling text kube-scheduler writes:
reasons counted per node, rendered "<count> <reason>" and sorted as strings, then the
preemption summary. Preemption itself is not simulated: a node rejected for a reason
preemption cannot fix reads "Preemption is not helpful for scheduling", any other
"No preemption victims found for incoming pod".

Pods in `pods` count against the node in their `spec.nodeName` until they are deleted,
terminating ones included (their resources are held until they are gone); pods in phase
Succeeded or Failed count for nothing, as the scheduler's cache drops them. A node whose
Ready condition is not True carries the taint the node lifecycle controller would give
it (`node.kubernetes.io/not-ready`, or `unreachable` when the status is Unknown).
Volumes, image locality and system default spread constraints are not modelled.

Public API (re-exported by `kubesim.scheduler`): `schedule_pod` (the decision), `explain`
(per-node rejections, for diagnostics and tests), `failed_scheduling_message`,
`live_pods_by_node`, `ScheduleResult`, `Rejection`.
Quantities are parsed strictly: a pod with a malformed quantity raises `QuantityError`
(the API server's validation is expected to reject it first).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubesim.scheduler.affinity import (
    AffinityFilter,
    NamespaceLabels,
    affinity_scores,
    default_namespace_labels,
)
from kubesim.scheduler.match import (
    JSON,
    UNSCHEDULABLE_TAINT_KEY,
    QuantityError,
    effective_taints,
    labels_of,
    mapping,
    name_of,
    natural_key,
    node_selector_term_matches,
    pod_matches_node_selector_and_affinity,
    pod_requests,
    pod_tolerations,
    resource_list,
    sequence,
    tolerates,
    toleration_tolerates,
)
from kubesim.scheduler.node_pods import PodsByNode, cached_requests
from kubesim.scheduler.spread import MAX_NODE_SCORE, NodeView, SpreadFilter, spread_scores

REASON_UNSCHEDULABLE = "node(s) were unschedulable"
REASON_NODE_NAME = "node(s) didn't match the requested node name"
REASON_NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
REASON_NODE_PORTS = "node(s) didn't have free ports for the requested pod ports"
REASON_TOO_MANY_PODS = "Too many pods"
PREEMPTION_NOT_HELPFUL = "Preemption is not helpful for scheduling"
PREEMPTION_NO_VICTIMS = "No preemption victims found for incoming pod"
SCHEDULING_GATED_MESSAGE = "Scheduling is blocked due to non-empty scheduling gates"

# kube-scheduler's default score plugin weights.
WEIGHT_TAINT_TOLERATION = 3
WEIGHT_NODE_AFFINITY = 2
WEIGHT_POD_TOPOLOGY_SPREAD = 2
WEIGHT_INTER_POD_AFFINITY = 2
WEIGHT_RESOURCES_FIT = 1
WEIGHT_BALANCED_ALLOCATION = 1


@dataclass(frozen=True)
class ScheduleResult:
    """Where the pod goes, or why it cannot go anywhere.

    `reason` is the PodScheduled condition reason when unscheduled: "Unschedulable", or
    "SchedulingGated" for a pod with scheduling gates (no FailedScheduling event then).
    """

    node_name: str | None
    message: str = ""
    reason: str = ""
    scores: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Rejection:
    """Why one node was filtered out: the reasons and whether preemption could help."""

    reasons: tuple[str, ...]
    resolvable: bool


def live_pods_by_node(pods: Sequence[JSON]) -> PodsByNode:
    """Non-terminal pods per node name: what `schedule_pod` sees on each node."""
    return PodsByNode.of(pods, {})


def _views(nodes: Sequence[JSON], by_node: PodsByNode) -> list[NodeView]:
    views = [
        NodeView(node=node, name=name_of(node), labels=labels_of(node), on_node=by_node.get(name_of(node)))
        for node in nodes
    ]
    return sorted(views, key=lambda view: natural_key(view.name))


def _host_ports(pod: Mapping[str, Any]) -> list[tuple[str, str, int]]:
    spec = mapping(pod.get("spec"))
    ports: list[tuple[str, str, int]] = []
    for container in sequence(spec.get("containers")) + sequence(spec.get("initContainers")):
        for port in sequence(mapping(container).get("ports")):
            port = mapping(port)
            host_port = int(port.get("hostPort") or 0)
            if host_port > 0:
                ports.append((str(port.get("hostIP") or "0.0.0.0"), str(port.get("protocol") or "TCP"), host_port))
    return ports


def _ports_conflict(wanted: Sequence[tuple[str, str, int]], view: NodeView) -> bool:
    used = [port for other in view.pods for port in _host_ports(other)]
    for ip, protocol, number in wanted:
        for used_ip, used_protocol, used_number in used:
            same_address = ip == used_ip or "0.0.0.0" in (ip, used_ip)
            if number == used_number and protocol == used_protocol and same_address:
                return True
    return False


# resource_list of a node's allocatable, by the identity of that dict (stored objects are never
# mutated in place): parsed once per node version, not once per node per pod scheduled. Each
# entry holds its dict, so an id is never reused while cached.
_ALLOCATABLE_CACHE: dict[int, tuple[object, dict[str, int]]] = {}
_ALLOCATABLE_CACHE_MAX = 10_000


def _allocatable(view: NodeView) -> dict[str, int]:
    raw = mapping(view.node.get("status")).get("allocatable")
    hit = _ALLOCATABLE_CACHE.get(id(raw))
    if hit is not None and hit[0] is raw:
        return hit[1]
    if len(_ALLOCATABLE_CACHE) >= _ALLOCATABLE_CACHE_MAX:
        _ALLOCATABLE_CACHE.clear()
    parsed = resource_list(raw)
    _ALLOCATABLE_CACHE[id(raw)] = (raw, parsed)
    return parsed


def _resources_fit(request: Mapping[str, int], view: NodeView) -> list[str]:
    """NodeResourcesFit: every resource the pod requests against what is left on the node."""
    allocatable = _allocatable(view)
    reasons: list[str] = []
    if len(view.on_node) + 1 > allocatable.get("pods", 0):
        reasons.append(REASON_TOO_MANY_PODS)
    requested = view.on_node.requested()
    ordered = ["cpu", "memory", "ephemeral-storage"] + sorted(
        r for r in request if r not in ("cpu", "memory", "ephemeral-storage", "pods")
    )
    for resource in ordered:
        amount = request.get(resource, 0)
        if amount > 0 and amount > allocatable.get(resource, 0) - requested.get(resource, 0):
            reasons.append(f"Insufficient {resource}")
    return reasons


class _Filters:
    """The filter plugins in kube-scheduler's order, with their per-cycle state."""

    def __init__(self, pod: Mapping[str, Any], views: Sequence[NodeView], namespace_labels: NamespaceLabels) -> None:
        self.pod = pod
        self.tolerations = pod_tolerations(pod)
        self.node_name = str(mapping(pod.get("spec")).get("nodeName") or "")
        self.request = pod_requests(pod)
        self.host_ports = _host_ports(pod)
        self.spread = SpreadFilter(pod, views)
        self.affinity = AffinityFilter(pod, views, namespace_labels)

    def check(self, view: NodeView) -> Rejection | None:
        node_spec = mapping(view.node.get("spec"))
        if node_spec.get("unschedulable") and not tolerates(
            self.tolerations, {"key": UNSCHEDULABLE_TAINT_KEY, "effect": "NoSchedule"}
        ):
            return Rejection((REASON_UNSCHEDULABLE,), resolvable=False)
        if self.node_name and self.node_name != view.name:
            return Rejection((REASON_NODE_NAME,), resolvable=False)
        for taint in effective_taints(view.node):
            if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(self.tolerations, taint):
                text = f"node(s) had untolerated taint {{{taint.get('key', '')}: {taint.get('value') or ''}}}"
                return Rejection((text,), resolvable=False)
        if not pod_matches_node_selector_and_affinity(self.pod, view.node):
            return Rejection((REASON_NODE_AFFINITY,), resolvable=False)
        if self.host_ports and _ports_conflict(self.host_ports, view):
            return Rejection((REASON_NODE_PORTS,), resolvable=True)
        shortages = _resources_fit(self.request, view)
        if shortages:
            return Rejection(tuple(shortages), resolvable=True)
        for plugin in (self.spread, self.affinity):
            failure = plugin.check(view)
            if failure is not None:
                return Rejection((failure[0],), resolvable=failure[1])
        return None


def explain(
    pod: Mapping[str, Any],
    nodes: Sequence[JSON],
    pods: Sequence[JSON],
    namespace_labels: NamespaceLabels = default_namespace_labels,
) -> dict[str, Rejection | None]:
    """Per node (natural name order): why the filters reject it, or None if it is feasible."""
    views = _views(nodes, PodsByNode.of(pods, pod))
    filters = _Filters(pod, views, namespace_labels)
    return {view.name: filters.check(view) for view in views}


def _histogram(counts: Counter[str]) -> str:
    # kube-scheduler sorts the rendered "<count> <reason>" strings, count included.
    return ", ".join(sorted(f"{count} {reason}" for reason, count in counts.items()))


def failed_scheduling_message(pod: Mapping[str, Any], rejections: Sequence[Rejection]) -> str:
    """The FailedScheduling event message for a pod no node accepted."""
    total = len(rejections)
    if total == 0:
        return "no nodes available to schedule pods"
    reasons: Counter[str] = Counter()
    for rejection in rejections:
        reasons.update(rejection.reasons)
    message = f"0/{total} nodes are available: {_histogram(reasons)}."
    if mapping(pod.get("spec")).get("preemptionPolicy") == "Never":
        return message + " preemption: not eligible due to preemptionPolicy=Never."
    preemption: Counter[str] = Counter(
        PREEMPTION_NO_VICTIMS if rejection.resolvable else PREEMPTION_NOT_HELPFUL for rejection in rejections
    )
    return message + f" preemption: 0/{total} nodes are available: {_histogram(preemption)}."


def _default_normalize(raw: Mapping[str, int], reverse: bool) -> dict[str, int]:
    highest = max(raw.values(), default=0)
    if highest == 0:
        return {name: MAX_NODE_SCORE if reverse else 0 for name in raw}
    scores = {name: MAX_NODE_SCORE * value // highest for name, value in raw.items()}
    return {name: MAX_NODE_SCORE - score for name, score in scores.items()} if reverse else scores


def _taint_scores(pod: Mapping[str, Any], feasible: Sequence[NodeView]) -> dict[str, int]:
    """Fewer untolerated PreferNoSchedule taints score higher."""
    tolerations = [t for t in pod_tolerations(pod) if mapping(t).get("effect") in (None, "", "PreferNoSchedule")]
    raw = {
        view.name: sum(
            1
            for taint in effective_taints(view.node)
            if taint.get("effect") == "PreferNoSchedule"
            and not any(toleration_tolerates(t, taint) for t in tolerations)
        )
        for view in feasible
    }
    return _default_normalize(raw, reverse=True)


def _node_affinity_scores(pod: Mapping[str, Any], feasible: Sequence[NodeView]) -> dict[str, int]:
    affinity = mapping(mapping(mapping(pod.get("spec")).get("affinity")).get("nodeAffinity"))
    preferred = [mapping(t) for t in sequence(affinity.get("preferredDuringSchedulingIgnoredDuringExecution"))]
    raw = {
        view.name: sum(
            int(term.get("weight", 0)) for term in preferred if node_selector_term_matches(term.get("preference"), view.node)
        )
        for view in feasible
    }
    return _default_normalize(raw, reverse=False)


def _fractions(pod: Mapping[str, Any], view: NodeView, non_zero: bool) -> list[tuple[int, int]]:
    """(requested including this pod, allocatable) for cpu and memory.

    Least-allocated counts request-less containers at the scheduler's defaults;
    balanced allocation uses the requests as written, as kube-scheduler does."""
    allocatable = _allocatable(view)
    requested = view.on_node.requested(non_zero)
    incoming = cached_requests(pod, non_zero)
    return [
        (requested.get(resource, 0) + incoming.get(resource, 0), allocatable.get(resource, 0))
        for resource in ("cpu", "memory")
    ]


def _least_allocated(pod: Mapping[str, Any], view: NodeView) -> int:
    total = 0
    for requested, capacity in _fractions(pod, view, non_zero=True):
        if capacity > 0 and requested <= capacity:
            total += (capacity - requested) * MAX_NODE_SCORE // capacity
    return total // 2


def _balanced(pod: Mapping[str, Any], view: NodeView) -> int:
    fractions = [
        min(requested / capacity, 1.0)
        for requested, capacity in _fractions(pod, view, non_zero=False)
        if capacity > 0
    ]
    deviation = abs(fractions[0] - fractions[1]) / 2 if len(fractions) == 2 else 0.0
    return int((1 - deviation) * MAX_NODE_SCORE)


def score_nodes(
    pod: Mapping[str, Any],
    feasible: Sequence[NodeView],
    views: Sequence[NodeView],
    namespace_labels: NamespaceLabels = default_namespace_labels,
) -> dict[str, int]:
    """Weighted sum of the score plugins for each feasible node."""
    parts: list[tuple[int, Mapping[str, int]]] = [
        (WEIGHT_TAINT_TOLERATION, _taint_scores(pod, feasible)),
        (WEIGHT_NODE_AFFINITY, _node_affinity_scores(pod, feasible)),
        (WEIGHT_POD_TOPOLOGY_SPREAD, spread_scores(pod, feasible, views)),
        (WEIGHT_INTER_POD_AFFINITY, affinity_scores(pod, feasible, views, namespace_labels)),
        (WEIGHT_RESOURCES_FIT, {view.name: _least_allocated(pod, view) for view in feasible}),
        (WEIGHT_BALANCED_ALLOCATION, {view.name: _balanced(pod, view) for view in feasible}),
    ]
    return {view.name: sum(weight * scores.get(view.name, 0) for weight, scores in parts) for view in feasible}


def schedule_pod(
    pod: Mapping[str, Any],
    nodes: Sequence[JSON],
    pods: Sequence[JSON],
    namespace_labels: Callable[[str], Mapping[str, str]] = default_namespace_labels,
    by_node: PodsByNode | None = None,
) -> ScheduleResult:
    """Pick a node for `pod` among `nodes`, given every pod in the cluster (any namespace).

    `by_node`, when given, stands in for `pods`: the pods per node (`live_pods_by_node`),
    kept up to date by a caller placing many unbound pods in a row, so each placement does
    not walk every pod again; it must not hold `pod` itself (an unbound pod never is).
    """
    if sequence(mapping(pod.get("spec")).get("schedulingGates")):
        return ScheduleResult(node_name=None, message=SCHEDULING_GATED_MESSAGE, reason="SchedulingGated")
    views = _views(nodes, PodsByNode.of(pods, pod) if by_node is None else by_node)
    try:
        filters = _Filters(pod, views, namespace_labels)
        rejections = {view.name: filters.check(view) for view in views}
        feasible = [view for view in views if rejections[view.name] is None]
        scores = score_nodes(pod, feasible, views, namespace_labels) if feasible else {}
    except QuantityError as error:
        # A real API server rejects such a pod; here it must not stop the scheduling loop.
        return ScheduleResult(node_name=None, message=f"spec.containers[*].resources: {error}", reason="Unschedulable")
    if not feasible:
        failures = [rejection for rejection in rejections.values() if rejection is not None]
        return ScheduleResult(node_name=None, message=failed_scheduling_message(pod, failures), reason="Unschedulable")
    # max() keeps the first of equal scores, and feasible is in natural name order.
    best = max(feasible, key=lambda view: scores[view.name])
    return ScheduleResult(node_name=best.name, message="", scores=scores)
