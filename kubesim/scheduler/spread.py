"""The PodTopologySpread plugin of the kubesim scheduler.

Follows kube-scheduler's plugin: `DoNotSchedule` constraints filter, `ScheduleAnyway`
constraints score. The rules that decide where spread Instances go (spec 003):

- a domain is a value of the constraint's topology key on a node that has *every*
  constraint's key and passes the node inclusion policies: `nodeAffinityPolicy: Honor`
  (the default) keeps only nodes the pod's nodeSelector / required node affinity select,
  `nodeTaintsPolicy: Ignore` (the default) keeps cordoned and tainted nodes, so such a
  domain still counts and its low count holds new pods back from the others;
- only non-terminating pods in the incoming pod's namespace that match the selector
  (plus `matchLabelKeys`) count;
- the skew on a node is `count(domain) + (1 if the pod matches its own selector) - min`,
  where `min` is the lowest count over eligible domains, or 0 when there are fewer
  eligible domains than `minDomains`;
- a node without the key fails with `(missing required label)`, which preemption
  cannot fix.

System default constraints (those kube-scheduler derives from Services and ReplicaSets)
are not applied: kubesim pods are owned by the product, which sets its own constraints.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubesim.scheduler.match import (
    JSON,
    first_untolerated_taint,
    is_terminating,
    labels_of,
    mapping,
    namespace_of,
    pod_matches_node_selector_and_affinity,
    selector_is_empty,
    selector_matches,
    sequence,
    with_label_keys,
)
from kubesim.scheduler.node_pods import NodePods

HOSTNAME_KEY = "kubernetes.io/hostname"
REASON_CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
REASON_NODE_LABEL_NOT_MATCH = REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"
MAX_NODE_SCORE = 100


@dataclass(frozen=True)
class NodeView:
    """A node with the live (non-terminal) pods bound to it, built once per scheduling."""

    node: JSON
    name: str
    labels: dict[str, str]
    on_node: NodePods

    @property
    def pods(self) -> tuple[JSON, ...]:
        return self.on_node.pods


@dataclass(frozen=True)
class SpreadConstraint:
    max_skew: int
    topology_key: str
    selector: object
    min_domains: int
    honor_node_affinity: bool
    honor_node_taints: bool


def constraints_of(pod: Mapping[str, Any], when_unsatisfiable: str) -> list[SpreadConstraint]:
    """The pod's constraints with the given action, with API defaults filled in."""
    pod_labels = labels_of(pod)
    constraints: list[SpreadConstraint] = []
    for raw in sequence(mapping(pod.get("spec")).get("topologySpreadConstraints")):
        raw = mapping(raw)
        if raw.get("whenUnsatisfiable", "DoNotSchedule") != when_unsatisfiable:
            continue
        match_keys = [str(k) for k in sequence(raw.get("matchLabelKeys"))]
        min_domains = raw.get("minDomains")
        constraints.append(
            SpreadConstraint(
                max_skew=int(raw.get("maxSkew", 1)),
                topology_key=str(raw.get("topologyKey", "")),
                selector=with_label_keys(raw.get("labelSelector"), pod_labels, match_keys),
                min_domains=int(min_domains) if isinstance(min_domains, int) else 1,
                honor_node_affinity=raw.get("nodeAffinityPolicy", "Honor") == "Honor",
                honor_node_taints=raw.get("nodeTaintsPolicy", "Ignore") == "Honor",
            )
        )
    return constraints


def _has_all_keys(labels: Mapping[str, str], constraints: Sequence[SpreadConstraint]) -> bool:
    return all(c.topology_key in labels for c in constraints)


def _included(pod: Mapping[str, Any], view: NodeView, constraint: SpreadConstraint) -> bool:
    if constraint.honor_node_affinity and not pod_matches_node_selector_and_affinity(pod, view.node):
        return False
    if constraint.honor_node_taints and first_untolerated_taint(pod, view.node, ("NoSchedule", "NoExecute")):
        return False
    return True


def count_matching(pods: Sequence[JSON], selector: object, namespace: str) -> int:
    """Pods that count for a constraint: same namespace, not terminating, matching the selector."""
    if selector_is_empty(selector):
        # An empty selector matches everything, which kube-scheduler treats as counting nothing.
        return 0
    return sum(
        1
        for pod in pods
        if not is_terminating(pod) and namespace_of(pod) == namespace and selector_matches(selector, labels_of(pod))
    )


class SpreadFilter:
    """PreFilter state (counts per domain) and the Filter check for DoNotSchedule constraints."""

    def __init__(self, pod: Mapping[str, Any], views: Sequence[NodeView]) -> None:
        self.pod = pod
        self.constraints = constraints_of(pod, "DoNotSchedule")
        self.counts: list[dict[str, int]] = [{} for _ in self.constraints]
        namespace = namespace_of(pod)
        for view in views:
            if not _has_all_keys(view.labels, self.constraints):
                continue
            for index, constraint in enumerate(self.constraints):
                if not _included(pod, view, constraint):
                    continue
                domain = view.labels[constraint.topology_key]
                self.counts[index][domain] = self.counts[index].get(domain, 0) + count_matching(
                    view.pods, constraint.selector, namespace
                )

    def global_minimum(self, index: int) -> int:
        counts = self.counts[index]
        if len(counts) < self.constraints[index].min_domains:
            # Fewer eligible domains than minDomains: the missing domains count as empty.
            return 0
        return min(counts.values()) if counts else 2**31 - 1

    def check(self, view: NodeView) -> tuple[str, bool] | None:
        """None when the node passes; else (reason, resolvable by preemption)."""
        pod_labels = labels_of(self.pod)
        for index, constraint in enumerate(self.constraints):
            domain = view.labels.get(constraint.topology_key)
            if domain is None:
                return REASON_NODE_LABEL_NOT_MATCH, False
            self_match = 1 if selector_matches(constraint.selector, pod_labels) else 0
            skew = self.counts[index].get(domain, 0) + self_match - self.global_minimum(index)
            if skew > constraint.max_skew:
                return REASON_CONSTRAINTS_NOT_MATCH, True
        return None


def spread_scores(pod: Mapping[str, Any], feasible: Sequence[NodeView], views: Sequence[NodeView]) -> dict[str, int]:
    """Normalized 0..100 scores of ScheduleAnyway constraints (empty when the pod has none):
    fewer matching pods in a node's domain scores higher."""
    constraints = constraints_of(pod, "ScheduleAnyway")
    if not constraints or not feasible:
        return {}
    namespace = namespace_of(pod)
    ignored = {view.name for view in feasible if not _has_all_keys(view.labels, constraints)}
    pair_counts: dict[tuple[str, str], int] = {}
    sizes = [0] * len(constraints)
    for view in feasible:
        if view.name in ignored:
            continue
        for index, constraint in enumerate(constraints):
            if constraint.topology_key == HOSTNAME_KEY:
                continue
            pair = (constraint.topology_key, view.labels[constraint.topology_key])
            if pair not in pair_counts:
                pair_counts[pair] = 0
                sizes[index] += 1
    # Weighting by log(domains + 2) keeps a constraint over many domains from drowning one over few.
    weights = [
        math.log((len(feasible) - len(ignored) if c.topology_key == HOSTNAME_KEY else sizes[i]) + 2)
        for i, c in enumerate(constraints)
    ]
    for view in views:
        if not _has_all_keys(view.labels, constraints):
            continue
        for constraint in constraints:
            if not _included(pod, view, constraint):
                continue
            pair = (constraint.topology_key, view.labels[constraint.topology_key])
            if pair in pair_counts:
                pair_counts[pair] += count_matching(view.pods, constraint.selector, namespace)
    raw: dict[str, int] = {}
    for view in feasible:
        if view.name in ignored:
            continue
        total = 0.0
        for index, constraint in enumerate(constraints):
            value = view.labels.get(constraint.topology_key)
            if value is None:
                continue
            if constraint.topology_key == HOSTNAME_KEY:
                count = count_matching(view.pods, constraint.selector, namespace)
            else:
                count = pair_counts[(constraint.topology_key, value)]
            total += count * weights[index] + (constraint.max_skew - 1)
        raw[view.name] = math.floor(total + 0.5)
    return _normalize(raw, [view.name for view in feasible])


def _normalize(raw: Mapping[str, int], names: Sequence[str]) -> dict[str, int]:
    """Lower raw counts score higher; nodes without every key score 0."""
    if not raw:
        return dict.fromkeys(names, 0)
    lowest, highest = min(raw.values()), max(raw.values())
    scores: dict[str, int] = {}
    for name in names:
        if name not in raw:
            scores[name] = 0
        elif highest == 0:
            scores[name] = MAX_NODE_SCORE
        else:
            scores[name] = MAX_NODE_SCORE * (highest + lowest - raw[name]) // highest
    return scores
