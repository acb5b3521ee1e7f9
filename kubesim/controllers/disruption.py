"""PodDisruptionBudget status, computed from the pods a budget selects: expected and healthy
counts, `disruptionsAllowed`, and the DisruptionAllowed condition. Evictions consult it."""

from __future__ import annotations

import math
from typing import Any

from kubesim.api import Api
from kubesim.controllers.base import Controller
from kubesim.follow import Follower
from kubesim.selectors import selector_matches
from kubesim.store import Object, ObjectKey, object_key
from kubesim.subresources import pod_is_ready
from kubesim.timing import timestamp

PODS = ("", "pods")
PDBS = ("policy", "poddisruptionbudgets")


def _count(value: object, total: int, round_up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        exact = total * int(value[:-1]) / 100
        return math.ceil(exact) if round_up else math.floor(exact)
    return int(str(value))


class DisruptionController(Controller):
    """Each budget's pods are counted as pods change (a `Follower` folds each change into the
    counts of the budgets whose selector it matches), so a pod's change costs a look at the
    budgets of its namespace, not a walk over every pod a budget selects. A budget whose
    selector is new or changed is counted from the store once."""

    name = "disruption-controller"
    watches = (PODS, PDBS)

    def __init__(self, api: Api) -> None:
        super().__init__(api)
        # Per namespace, each budget's selector as last counted; per budget, the pods it counts
        # (pod name -> healthy).
        self._selectors: dict[str, dict[str, Any]] = {}
        self._counted: dict[ObjectKey, dict[str, bool]] = {}
        self._pods = Follower(self.store, PODS, self._fold, self._reset)

    def reconcile(self) -> None:
        pdbs = self.store.list(PDBS)
        live = {object_key(pdb) for pdb in pdbs}
        for key in [k for k in self._counted if k not in live]:
            self._forget(key)
        unreadable: list[Exception] = []
        for pdb in pdbs:
            try:
                self.sync(pdb)
            except _UNREADABLE as exc:  # one budget's selector must not stop the others'
                unreadable.append(exc)
        if unreadable:
            raise unreadable[0]

    def sync(self, pdb: Object) -> None:
        """Write the budget's status from the pods it selects now (evictions call this too)."""
        counted = self._current_count(pdb)
        spec = pdb.get("spec") or {}
        expected = len(counted)
        healthy = sum(counted.values())
        if "maxUnavailable" in spec:
            # Percentages round up for maxUnavailable in the real controller too.
            desired = max(0, expected - _count(spec["maxUnavailable"], expected, round_up=True))
        elif "minAvailable" in spec:
            desired = _count(spec["minAvailable"], expected, round_up=True)
        else:
            desired = expected
        allowed = max(0, healthy - desired)
        previous = next((c for c in (pdb.get("status") or {}).get("conditions") or []
                         if c.get("type") == "DisruptionAllowed"), None)
        value = "True" if allowed > 0 else "False"
        condition = {
            "type": "DisruptionAllowed", "status": value,
            "reason": "SufficientPods" if allowed > 0 else "InsufficientPods",
            "message": "",
            "observedGeneration": pdb["metadata"].get("generation", 1),
            "lastTransitionTime": previous["lastTransitionTime"] if previous and previous.get("status") == value
            else timestamp(),
        }
        status = {
            "observedGeneration": pdb["metadata"].get("generation", 1),
            "disruptionsAllowed": allowed,
            "currentHealthy": healthy,
            "desiredHealthy": desired,
            "expectedPods": expected,
            "conditions": [condition],
        }
        self.api.write_status(self.api.type_of(*PDBS), pdb, status, "disruption-controller")

    def _current_count(self, pdb: Object) -> dict[str, bool]:
        self._pods.sync()  # a rebuild folds every pod again against the selectors as last counted
        key = object_key(pdb)
        selector = (pdb.get("spec") or {}).get("selector")
        if key not in self._counted or self._selectors.get(key[0], {}).get(key[1]) != selector:
            self._forget(key)
            # A selector that cannot be read raises here: that budget stays uncounted.
            self._counted[key] = {p["metadata"]["name"]: healthy for p in self.store.list(PODS, key[0])
                                  if (healthy := _counts_as(selector, p)) is not None}
            self._selectors.setdefault(key[0], {})[key[1]] = selector
        return self._counted[key]

    def _forget(self, key: ObjectKey) -> None:
        self._counted.pop(key, None)
        in_namespace = self._selectors.get(key[0], {})
        in_namespace.pop(key[1], None)
        if not in_namespace:
            self._selectors.pop(key[0], None)

    def _reset(self) -> None:
        for counted in self._counted.values():
            counted.clear()

    def _fold(self, old: Object | None, new: Object | None) -> None:
        meta = (new or old or {})["metadata"]
        namespace, name = meta.get("namespace") or "", meta["name"]
        for pdb_name, selector in list(self._selectors.get(namespace, {}).items()):
            counted = self._counted[(namespace, pdb_name)]
            try:
                healthy = None if new is None else _counts_as(selector, new)
            except _UNREADABLE:
                self._forget((namespace, pdb_name))  # counted again, and refused, at its next sync
                continue
            if healthy is None:
                counted.pop(name, None)
            else:
                counted[name] = healthy


# What reading a malformed selector raises (a matchExpressions entry without its key ...).
_UNREADABLE = (KeyError, TypeError, ValueError)


def _counts_as(selector: Any, pod: Object) -> bool | None:
    """None: the budget does not count the pod; else whether it counts as healthy."""
    if selector is None or not selector_matches(selector, pod["metadata"].get("labels")):
        return None
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return None
    return pod_is_ready(pod) and not pod["metadata"].get("deletionTimestamp")
