"""The pods each node holds, as the scheduler's cache sees them, with the sums its plugins read.

A pod counts on the node in its `spec.nodeName` until it is deleted, terminating ones
included; pods in phase Succeeded or Failed count for nothing. `PodsByNode` keeps, per node,
those pods, their summed requests (as written, and with the scheduler's non-zero defaults
for scoring) and the ones with an affinity of their own, updated one pod at a time, so a
loop placing a fleet of pods does not walk every pod for every pod placed.

A pod with a malformed quantity is held with its error; reading its node's requested
totals raises that error (the first such pod's, in key order), as summing its requests
would.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import Any

from kubesim.scheduler.match import JSON, QuantityError, mapping, name_of, namespace_of, pod_requests

_TERMINAL_PHASES = ("Succeeded", "Failed")

# pod_requests by the identity of the pod's spec: stored objects are never mutated in place
# and a status update shares the old spec dict, so a pod's quantities are parsed once, not on
# every change or every call. Each entry holds its spec, so an id is never reused while cached.
_REQUESTS_CACHE: dict[tuple[int, bool], tuple[object, dict[str, int]]] = {}
_REQUESTS_CACHE_MAX = 100_000


def cached_requests(pod: Mapping[str, Any], non_zero: bool) -> dict[str, int]:
    """`pod_requests(pod, non_zero)`, parsed once per spec object (do not mutate the result)."""
    spec = pod.get("spec")
    key = (id(spec), non_zero)
    hit = _REQUESTS_CACHE.get(key)
    if hit is not None and hit[0] is spec:
        return hit[1]
    if len(_REQUESTS_CACHE) >= _REQUESTS_CACHE_MAX:
        _REQUESTS_CACHE.clear()
    requests = pod_requests(pod, non_zero)
    _REQUESTS_CACHE[key] = (spec, requests)
    return requests


def placed_on(pod: Mapping[str, Any]) -> str:
    """The node a pod counts on, or "" when it counts nowhere (unbound or finished)."""
    node_name = mapping(pod.get("spec")).get("nodeName")
    if not node_name or mapping(pod.get("status")).get("phase") in _TERMINAL_PHASES:
        return ""
    return str(node_name)


def _requests_or_error(pod: Mapping[str, Any], non_zero: bool) -> dict[str, int] | QuantityError:
    try:
        return cached_requests(pod, non_zero)
    except QuantityError as error:
        return error


def _shift(totals: dict[str, int], amounts: Mapping[str, int], sign: int) -> None:
    for resource, amount in amounts.items():
        left = totals.get(resource, 0) + sign * amount
        if left:
            totals[resource] = left
        else:
            totals.pop(resource, None)


class NodePods:
    """The pods counting on one node, keyed by whatever the owner keys them by."""

    def __init__(self) -> None:
        self._pods: dict[Hashable, JSON] = {}
        self._affine: dict[Hashable, JSON] = {}
        # Per pod: its requests as written and with non-zero defaults, or the parse error.
        self._requests: dict[Hashable, tuple[dict[str, int] | QuantityError, dict[str, int] | QuantityError]] = {}
        self._totals: tuple[dict[str, int], dict[str, int]] = ({}, {})
        self._bad: tuple[set[Hashable], set[Hashable]] = (set(), set())
        self._listed: tuple[JSON, ...] | None = None
        self._listed_affine: tuple[JSON, ...] | None = None

    def __len__(self) -> int:
        return len(self._pods)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._pods

    @property
    def pods(self) -> tuple[JSON, ...]:
        """The pods, in the order they were added (every reader sums or tests any)."""
        if self._listed is None:
            self._listed = tuple(self._pods.values())
        return self._listed

    @property
    def with_affinity(self) -> tuple[JSON, ...]:
        """The pods whose spec has an affinity: the only ones with terms of their own."""
        if self._listed_affine is None:
            self._listed_affine = tuple(self._affine.values())
        return self._listed_affine

    def requested(self, non_zero: bool = False) -> dict[str, int]:
        """Summed requests of the pods (do not mutate the result)."""
        which = 1 if non_zero else 0
        if self._bad[which]:
            error = self._requests[min(self._bad[which])][which]  # type: ignore[type-var]
            assert isinstance(error, QuantityError)
            raise error
        return self._totals[which]

    def add(self, key: Hashable, pod: JSON) -> None:
        if key in self._pods:
            self.discard(key)
        self._pods[key] = pod
        if mapping(mapping(pod.get("spec")).get("affinity")):
            self._affine[key] = pod
            self._listed_affine = None
        requests = (_requests_or_error(pod, False), _requests_or_error(pod, True))
        self._requests[key] = requests
        for totals, bad, amounts in zip(self._totals, self._bad, requests, strict=True):
            if isinstance(amounts, QuantityError):
                bad.add(key)
            else:
                _shift(totals, amounts, 1)
        self._listed = None

    def discard(self, key: Hashable) -> None:
        if self._pods.pop(key, None) is None:
            return
        if self._affine.pop(key, None) is not None:
            self._listed_affine = None
        for totals, bad, amounts in zip(self._totals, self._bad, self._requests.pop(key), strict=True):
            if isinstance(amounts, QuantityError):
                bad.discard(key)
            else:
                _shift(totals, amounts, -1)
        self._listed = None


EMPTY = NodePods()


class PodsByNode:
    """`NodePods` per node name: where each pod counts, updated as pods come, change and go."""

    def __init__(self) -> None:
        self._nodes: dict[str, NodePods] = {}
        self._where: dict[Hashable, str] = {}

    @classmethod
    def of(cls, pods: Iterable[JSON], leave_out: Mapping[str, Any]) -> PodsByNode:
        """Built from a list (each entry counts, keyed by its position), without `leave_out`
        (the pod being scheduled: same uid, or same namespace and name)."""
        by_node = cls()
        own_uid = mapping(leave_out.get("metadata")).get("uid")
        own_key = (namespace_of(leave_out), name_of(leave_out))
        for position, pod in enumerate(pods):
            if not placed_on(pod):
                continue
            if (own_uid and mapping(pod.get("metadata")).get("uid") == own_uid) or (
                    namespace_of(pod), name_of(pod)) == own_key:
                continue
            by_node.put(position, pod)
        return by_node

    def get(self, node_name: str) -> NodePods:
        return self._nodes.get(node_name, EMPTY)

    def put(self, key: Hashable, pod: JSON) -> None:
        """Count `pod` under `key` where it is placed now, instead of where it was."""
        self.drop(key)
        node_name = placed_on(pod)
        if node_name:
            self._nodes.setdefault(node_name, NodePods()).add(key, pod)
            self._where[key] = node_name

    def drop(self, key: Hashable) -> None:
        node_name = self._where.pop(key, None)
        if node_name is None:
            return
        on_node = self._nodes[node_name]
        on_node.discard(key)
        if not len(on_node):
            del self._nodes[node_name]

    def clear(self) -> None:
        self._nodes.clear()
        self._where.clear()

    def __len__(self) -> int:
        return len(self._where)
