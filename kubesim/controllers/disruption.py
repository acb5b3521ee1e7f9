"""PodDisruptionBudget status, computed from the pods a budget selects: expected and healthy
counts, `disruptionsAllowed`, and the DisruptionAllowed condition. Evictions consult it."""

from __future__ import annotations

import math

from kubesim.controllers.base import Controller
from kubesim.selectors import selector_matches
from kubesim.store import Object
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
    name = "disruption-controller"
    watches = (PODS, PDBS)

    def reconcile(self) -> None:
        for pdb in self.store.list(PDBS):
            self.sync(pdb)

    def sync(self, pdb: Object) -> None:
        spec = pdb.get("spec") or {}
        selector = spec.get("selector")
        pods = [p for p in self.store.list(PODS, pdb["metadata"]["namespace"])
                if selector is not None and selector_matches(selector, p["metadata"].get("labels"))
                and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
        expected = len(pods)
        healthy = sum(1 for p in pods if pod_is_ready(p) and not p["metadata"].get("deletionTimestamp"))
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
