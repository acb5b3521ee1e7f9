"""The InterPodAffinity plugin of the kubesim scheduler.

Required pod affinity and anti-affinity filter nodes, preferred terms score them, with
kube-scheduler's semantics:

- a term matches a pod when the pod's namespace is in `namespaces` or its labels match
  `namespaceSelector`, and its labels match `labelSelector`; with neither namespace
  field set, the term's own pod's namespace is used. Namespace labels come from the
  caller; without them every namespace carries only `kubernetes.io/metadata.name`,
  the label the API server always sets, so the common selector on it works;
- required affinity needs, on the node's domain of every term, a pod matching all
  terms; the first pod of a group whose terms select itself may go anywhere that has
  the keys (no pod in the cluster matches yet), which is how a leader with affinity to
  its own Instance starts;
- required anti-affinity of the incoming pod and of existing pods both hold;
- scoring adds preferred-term weights (and 1 per required affinity term of existing
  pods that select the incoming pod) to every node in the matching domain.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubesim.scheduler.match import (
    JSON,
    labels_of,
    mapping,
    namespace_of,
    selector_matches,
    sequence,
    with_label_keys,
)
from kubesim.scheduler.spread import MAX_NODE_SCORE, NodeView

REASON_AFFINITY = "node(s) didn't match pod affinity rules"
REASON_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
REASON_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
# kube-scheduler's default hardPodAffinityWeight.
HARD_POD_AFFINITY_WEIGHT = 1

NamespaceLabels = Callable[[str], Mapping[str, str]]


def default_namespace_labels(namespace: str) -> dict[str, str]:
    return {NAMESPACE_NAME_LABEL: namespace}


def _with_name_label(namespace: str, labels: Mapping[str, str]) -> dict[str, str]:
    # The API server sets this label on every namespace and keeps it; a caller's store
    # may not have it, so it is added here.
    return {**labels, NAMESPACE_NAME_LABEL: namespace}


@dataclass(frozen=True)
class AffinityTerm:
    selector: object
    namespaces: frozenset[str]
    namespace_selector: object
    topology_key: str
    weight: int = 0

    def matches(self, pod: Mapping[str, Any], namespace_labels: NamespaceLabels) -> bool:
        namespace = namespace_of(pod)
        in_namespace = namespace in self.namespaces or (
            self.namespace_selector is not None
            and selector_matches(self.namespace_selector, _with_name_label(namespace, namespace_labels(namespace)))
        )
        return in_namespace and selector_matches(self.selector, labels_of(pod))


def _term(raw: object, owner: Mapping[str, Any], weight: int = 0) -> AffinityTerm:
    raw = mapping(raw)
    namespaces = frozenset(str(n) for n in sequence(raw.get("namespaces")))
    namespace_selector = raw.get("namespaceSelector")
    if not namespaces and namespace_selector is None:
        namespaces = frozenset({namespace_of(owner)})
    selector = with_label_keys(
        raw.get("labelSelector"),
        labels_of(owner),
        [str(k) for k in sequence(raw.get("matchLabelKeys"))],
        [str(k) for k in sequence(raw.get("mismatchLabelKeys"))],
    )
    return AffinityTerm(
        selector=selector,
        namespaces=namespaces,
        namespace_selector=namespace_selector if isinstance(namespace_selector, dict) else None,
        topology_key=str(raw.get("topologyKey", "")),
        weight=weight,
    )


def _terms(pod: Mapping[str, Any], kind: str, required: bool) -> list[AffinityTerm]:
    block = mapping(mapping(mapping(pod.get("spec")).get("affinity")).get(kind))
    if required:
        return [_term(raw, pod) for raw in sequence(block.get("requiredDuringSchedulingIgnoredDuringExecution"))]
    terms: list[AffinityTerm] = []
    for raw in sequence(block.get("preferredDuringSchedulingIgnoredDuringExecution")):
        raw = mapping(raw)
        terms.append(_term(raw.get("podAffinityTerm"), pod, int(raw.get("weight", 0))))
    return terms


Pair = tuple[str, str]


def _bump(counts: dict[Pair, int], labels: Mapping[str, str], key: str, amount: int) -> None:
    if key in labels:
        pair = (key, labels[key])
        counts[pair] = counts.get(pair, 0) + amount


class AffinityFilter:
    """PreFilter counts per (topology key, value) and the Filter check."""

    def __init__(self, pod: Mapping[str, Any], views: Sequence[NodeView], namespace_labels: NamespaceLabels) -> None:
        self.affinity_terms = _terms(pod, "podAffinity", required=True)
        self.anti_terms = _terms(pod, "podAntiAffinity", required=True)
        self.affinity_counts: dict[Pair, int] = {}
        self.anti_counts: dict[Pair, int] = {}
        self.existing_anti_counts: dict[Pair, int] = {}
        # Without terms of its own, only existing pods with an affinity can count.
        every_pod = bool(self.affinity_terms or self.anti_terms)
        for view in views:
            for existing in view.pods if every_pod else view.on_node.with_affinity:
                # Parse an existing pod's own terms only when it has an affinity at all.
                own = _terms(existing, "podAntiAffinity", required=True) if mapping(
                    mapping(existing.get("spec")).get("affinity")) else []
                for term in own:
                    if term.matches(pod, namespace_labels):
                        _bump(self.existing_anti_counts, view.labels, term.topology_key, 1)
                if self.affinity_terms and all(t.matches(existing, namespace_labels) for t in self.affinity_terms):
                    for term in self.affinity_terms:
                        _bump(self.affinity_counts, view.labels, term.topology_key, 1)
                for term in self.anti_terms:
                    if term.matches(existing, namespace_labels):
                        _bump(self.anti_counts, view.labels, term.topology_key, 1)
        self.self_match = all(t.matches(pod, namespace_labels) for t in self.affinity_terms)

    def _satisfies_affinity(self, labels: Mapping[str, str]) -> bool:
        pods_exist = True
        for term in self.affinity_terms:
            if term.topology_key not in labels:
                return False
            if self.affinity_counts.get((term.topology_key, labels[term.topology_key]), 0) <= 0:
                pods_exist = False
        if pods_exist:
            return True
        # The first pod of a group with affinity to itself: nothing matches anywhere yet.
        return not self.affinity_counts and self.self_match

    def check(self, view: NodeView) -> tuple[str, bool] | None:
        """None when the node passes; else (reason, resolvable by preemption)."""
        if self.affinity_terms and not self._satisfies_affinity(view.labels):
            return REASON_AFFINITY, False
        for term in self.anti_terms:
            value = view.labels.get(term.topology_key)
            if value is not None and self.anti_counts.get((term.topology_key, value), 0) > 0:
                return REASON_ANTI_AFFINITY, True
        for pair in view.labels.items():
            if self.existing_anti_counts.get(pair, 0) > 0:
                return REASON_EXISTING_ANTI_AFFINITY, True
        return None


def affinity_scores(
    pod: Mapping[str, Any], feasible: Sequence[NodeView], views: Sequence[NodeView], namespace_labels: NamespaceLabels
) -> dict[str, int]:
    """Normalized 0..100 scores from preferred (anti-)affinity on both sides."""
    preferred = _terms(pod, "podAffinity", required=False)
    preferred_anti = _terms(pod, "podAntiAffinity", required=False)
    topology_score: dict[Pair, int] = {}

    def process(terms: Sequence[AffinityTerm], target: JSON | Mapping[str, Any], labels: Mapping[str, str],
                multiplier: int, weight: int | None = None) -> None:
        for term in terms:
            if term.matches(target, namespace_labels):
                _bump(topology_score, labels, term.topology_key, (term.weight if weight is None else weight) * multiplier)

    # Without preferred terms of its own, only existing pods with an affinity can score.
    every_pod = bool(preferred or preferred_anti)
    for view in views:
        if not view.labels:
            continue
        for existing in view.pods if every_pod else view.on_node.with_affinity:
            process(preferred, existing, view.labels, 1)
            process(preferred_anti, existing, view.labels, -1)
            # Most pods have no affinity of their own: skip parsing three empty term lists
            # for each of them on every pod scheduled (quadratic over a fleet bring-up).
            if not mapping(mapping(existing.get("spec")).get("affinity")):
                continue
            process(_terms(existing, "podAffinity", required=True), pod, view.labels, 1, HARD_POD_AFFINITY_WEIGHT)
            process(_terms(existing, "podAffinity", required=False), pod, view.labels, 1)
            process(_terms(existing, "podAntiAffinity", required=False), pod, view.labels, -1)
    raw = {
        view.name: sum(score for (key, value), score in topology_score.items() if view.labels.get(key) == value)
        for view in feasible
    }
    if not raw:
        return {}
    lowest, highest = min(raw.values()), max(raw.values())
    spread = highest - lowest
    return {name: int(MAX_NODE_SCORE * (score - lowest) / spread) if spread > 0 else 0 for name, score in raw.items()}
