"""A simulated Gateway API controller: kubesim's gateway controller accepts every Gateway
(addresses 127.0.0.1, listeners Programmed, their attached routes counted) and attaches
HTTPRoutes to them, as a real implementation reports it in `status.parents[]`:

- a parentRef naming an existing Gateway (and, with `sectionName`, one of its listeners) whose
  listener hostnames meet the route's: `Accepted` True (`Accepted`); no such Gateway or listener:
  `Accepted` False `NoMatchingParent`; hostnames disjoint: `NoMatchingListenerHostname`;
- `ResolvedRefs` True (`ResolvedRefs`) when every backendRef names an existing Service (or
  InferencePool), else False `BackendNotFound` (`InvalidKind` for another kind).

Entries written by other controllers are left as they are. Nothing runs unless the Gateway API
CRDs are served (`deploy/crds/gateway/`).
"""

from __future__ import annotations

from typing import Any

from kubesim.controllers.base import Controller
from kubesim.store import Object
from kubesim.timing import timestamp

CONTROLLER_NAME = "kubesim.ome.io/gateway-controller"
GATEWAY_GROUP = "gateway.networking.k8s.io"
GATEWAYS = (GATEWAY_GROUP, "gateways")
ROUTES = (GATEWAY_GROUP, "httproutes")
CLASSES = (GATEWAY_GROUP, "gatewayclasses")
SERVICES = ("", "services")
POOL_GROUP = "inference.networking.k8s.io"
POOLS = (POOL_GROUP, "inferencepools")
LOCAL_ADDRESS = "127.0.0.1"
# What a backendRef may name, by (group, kind), and where such objects are stored.
BACKEND_KINDS = {("", "Service"): SERVICES, (POOL_GROUP, "InferencePool"): POOLS}


def condition(previous: list[dict[str, Any]], kind: str, ok: bool, reason: str, message: str,
              generation: int) -> dict[str, Any]:
    """A condition keeping its lastTransitionTime while its status stays the same."""
    status = "True" if ok else "False"
    before = next((c for c in previous if c.get("type") == kind), None)
    return {
        "type": kind, "status": status, "reason": reason, "message": message, "observedGeneration": generation,
        "lastTransitionTime": before["lastTransitionTime"] if before and before.get("status") == status
        else timestamp(),
    }


def hostnames_meet(listener: str | None, route: list[str]) -> bool:
    """Whether a listener's hostname (None: any) admits one of the route's (none: any)."""
    if not listener or not route:
        return True
    return any(_host_match(listener, host) or _host_match(host, listener) for host in route)


def _host_match(pattern: str, host: str) -> bool:
    if pattern.startswith("*."):
        return host.endswith(pattern[1:]) and host.count(".") >= pattern.count(".")
    return pattern == host


class GatewayController(Controller):
    name = "gateway-controller"
    watches = (GATEWAYS, ROUTES, CLASSES, SERVICES, POOLS)

    def reconcile(self) -> None:
        registry = self.api.registry
        if registry.get(*GATEWAYS) is None or registry.get(*ROUTES) is None:
            return
        for gateway_class in self.store.list(CLASSES) if registry.get(*CLASSES) else []:
            self._gateway_class(gateway_class)
        attached: dict[tuple[str, str, str], int] = {}
        for route in self.store.list(ROUTES):
            self._route(route, attached)
        for gateway in self.store.list(GATEWAYS):
            self._gateway(gateway, attached)

    # ---- routes ----------------------------------------------------------------------------

    def _route(self, route: Object, attached: dict[tuple[str, str, str], int]) -> None:
        meta = route["metadata"]
        namespace, generation = meta["namespace"], meta.get("generation", 1)
        spec = route.get("spec") or {}
        status = route.get("status") or {}
        others = [p for p in status.get("parents") or [] if p.get("controllerName") != CONTROLLER_NAME]
        ours = {self._ref_key(p.get("parentRef") or {}, namespace): p for p in status.get("parents") or []
                if p.get("controllerName") == CONTROLLER_NAME}
        resolved, why = self._backends(spec, namespace)
        parents = []
        for ref in spec.get("parentRefs") or []:
            if (ref.get("group") or GATEWAY_GROUP) != GATEWAY_GROUP or (ref.get("kind") or "Gateway") != "Gateway":
                continue
            previous = (ours.get(self._ref_key(ref, namespace)) or {}).get("conditions") or []
            accepted, reason, message, listeners = self._attach(ref, namespace, spec.get("hostnames") or [])
            gw_ns = ref.get("namespace") or namespace
            for listener in listeners if accepted else []:
                attached[(gw_ns, ref["name"], listener)] = attached.get((gw_ns, ref["name"], listener), 0) + 1
            parents.append({
                "parentRef": ref,
                "controllerName": CONTROLLER_NAME,
                "conditions": [
                    condition(previous, "Accepted", accepted, reason, message, generation),
                    condition(previous, "ResolvedRefs", resolved, "ResolvedRefs" if resolved else why[0],
                              "all references resolved" if resolved else why[1], generation),
                ],
            })
        new = {**status, "parents": others + parents}
        if new != status:
            self.api.write_status(self.api.type_of(*ROUTES), route, new, self.name)

    @staticmethod
    def _ref_key(ref: dict[str, Any], namespace: str) -> tuple[str, str, str, str]:
        return (ref.get("namespace") or namespace, ref.get("name") or "", ref.get("sectionName") or "",
                str(ref.get("port") or ""))

    def _attach(self, ref: dict[str, Any], namespace: str,
                hostnames: list[str]) -> tuple[bool, str, str, list[str]]:
        gw_ns, name = ref.get("namespace") or namespace, ref.get("name") or ""
        gateway = self.store.get(GATEWAYS, gw_ns, name)
        if gateway is None:
            return False, "NoMatchingParent", f"Gateway {gw_ns}/{name} does not exist", []
        listeners = [item for item in (gateway.get("spec") or {}).get("listeners") or []
                     if (not ref.get("sectionName") or item.get("name") == ref["sectionName"])
                     and (not ref.get("port") or item.get("port") == ref["port"])]
        if not listeners:
            return (False, "NoMatchingParent",
                    f"Gateway {gw_ns}/{name} has no listener matching sectionName {ref.get('sectionName')!r} "
                    f"port {ref.get('port')!r}", [])
        matching = [item for item in listeners if hostnames_meet(item.get("hostname"), hostnames)]
        if not matching:
            return (False, "NoMatchingListenerHostname",
                    f"no listener of Gateway {gw_ns}/{name} admits the hostnames {hostnames}", [])
        return True, "Accepted", "Route is accepted", [item.get("name") or "" for item in matching]

    def _backends(self, spec: dict[str, Any], namespace: str) -> tuple[bool, tuple[str, str]]:
        for rule in spec.get("rules") or []:
            for ref in rule.get("backendRefs") or []:
                kind = (ref.get("group") or "", ref.get("kind") or "Service")
                ref_ns, name = ref.get("namespace") or namespace, ref.get("name") or ""
                if kind not in BACKEND_KINDS:
                    return False, ("InvalidKind", f"backendRef {name!r} has unsupported kind {kind[1]!r} "
                                   f"(group {kind[0]!r})")
                if self.store.get(BACKEND_KINDS[kind], ref_ns, name) is None:
                    return False, ("BackendNotFound", f"{kind[1]} {ref_ns}/{name} not found")
        return True, ("", "")

    def _gateway_class(self, gateway_class: Object) -> None:
        if (gateway_class.get("spec") or {}).get("controllerName") != CONTROLLER_NAME:
            return
        status = gateway_class.get("status") or {}
        generation = gateway_class["metadata"].get("generation", 1)
        new = {**status, "conditions": [condition(status.get("conditions") or [], "Accepted", True, "Accepted",
                                                  "kubesim's gateway controller runs this class", generation)]}
        if new != status:
            self.api.write_status(self.api.type_of(*CLASSES), gateway_class, new, self.name)

    # ---- gateways --------------------------------------------------------------------------

    def _gateway(self, gateway: Object, attached: dict[tuple[str, str, str], int]) -> None:
        meta = gateway["metadata"]
        generation = meta.get("generation", 1)
        status = gateway.get("status") or {}
        previous = status.get("conditions") or []
        before = {item.get("name"): item.get("conditions") or [] for item in status.get("listeners") or []}
        listeners = []
        for item in (gateway.get("spec") or {}).get("listeners") or []:
            name = item.get("name") or ""
            was = before.get(name) or []
            listeners.append({
                "name": name,
                "supportedKinds": [{"group": GATEWAY_GROUP, "kind": "HTTPRoute"}],
                "attachedRoutes": attached.get((meta["namespace"], meta["name"], name), 0),
                "conditions": [condition(was, kind, True, kind, f"listener {kind.lower()}", generation)
                               for kind in ("Accepted", "Programmed", "ResolvedRefs")],
            })
        new = {
            **status,
            "addresses": status.get("addresses") or [{"type": "IPAddress", "value": LOCAL_ADDRESS}],
            "conditions": [condition(previous, kind, True, kind, f"Gateway is {kind.lower()} by kubesim", generation)
                           for kind in ("Accepted", "Programmed")],
            "listeners": listeners,
        }
        if new != status:
            self.api.write_status(self.api.type_of(*GATEWAYS), gateway, new, self.name)
