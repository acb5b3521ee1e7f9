"""Endpoints and EndpointSlices for Services with a selector: Ready pods are `addresses`
(`ready: true` in a slice), the others `notReadyAddresses`; terminating pods are never ready.
This is what turns a pod's `ome.io/serving` readiness gate into traffic.
"""

from __future__ import annotations

from typing import Any

from kubesim.controllers.base import Controller
from kubesim.errors import ApiError
from kubesim.selectors import labels_match, requirements_from_selector
from kubesim.store import Object
from kubesim.subresources import pod_is_ready
from kubesim.timing import clone

PODS = ("", "pods")
SERVICES = ("", "services")
ENDPOINTS = ("", "endpoints")
SLICES = ("discovery.k8s.io", "endpointslices")
NODES = ("", "nodes")
MANAGED_BY = "endpoints.kubernetes.io/managed-by"
SLICE_MANAGED_BY = "endpointslice.kubernetes.io/managed-by"
SERVICE_NAME = "kubernetes.io/service-name"
ZONE = "topology.kubernetes.io/zone"


def _target_port(port: Object, pod: Object) -> int | None:
    target = port.get("targetPort", port.get("port"))
    if isinstance(target, int):
        return target
    for c in (pod.get("spec") or {}).get("containers") or []:
        for p in c.get("ports") or []:
            if p.get("name") == target:
                return int(p["containerPort"])
    return None


class EndpointsController(Controller):
    name = "endpoint-controller"
    watches = (PODS, SERVICES)

    def reconcile(self) -> None:
        services = {(s["metadata"]["namespace"], s["metadata"]["name"]): s for s in self.store.list(SERVICES)}
        pods_by_ns: dict[str, list[Object]] = {}
        for pod in self.store.list(PODS):
            pods_by_ns.setdefault(pod["metadata"]["namespace"], []).append(pod)
        zones = {n["metadata"]["name"]: (n["metadata"].get("labels") or {}).get(ZONE) for n in self.store.list(NODES)}
        for (ns, _name), svc in services.items():
            selector = (svc.get("spec") or {}).get("selector")
            if not selector:
                continue
            reqs = requirements_from_selector({"matchLabels": selector})
            pods = [p for p in pods_by_ns.get(ns, []) if labels_match(reqs, p["metadata"].get("labels"))
                    and (p.get("status") or {}).get("podIP")
                    and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
            self._endpoints(svc, pods)
            self._slice(svc, pods, zones)
        self._remove_orphans(services)

    def _endpoints(self, svc: Object, pods: list[Object]) -> None:
        rt = self.api.type_of(*ENDPOINTS)
        ns, name = svc["metadata"]["namespace"], svc["metadata"]["name"]
        ready, not_ready = [], []
        for pod in pods:
            address = {"ip": pod["status"]["podIP"], "nodeName": pod["spec"].get("nodeName"),
                       "targetRef": {"kind": "Pod", "namespace": ns, "name": pod["metadata"]["name"],
                                     "uid": pod["metadata"]["uid"]}}
            if pod_is_ready(pod) and not pod["metadata"].get("deletionTimestamp"):
                ready.append(address)
            else:
                not_ready.append(address)
        ports = []
        for port in (svc.get("spec") or {}).get("ports") or []:
            number = _target_port(port, pods[0]) if pods else None
            if number is not None:
                entry = {"port": number, "protocol": port.get("protocol", "TCP")}
                if port.get("name"):
                    entry["name"] = port["name"]
                ports.append(entry)
        subset: Object = {}
        if ready:
            subset["addresses"] = ready
        if not_ready:
            subset["notReadyAddresses"] = not_ready
        if subset and ports:
            subset["ports"] = ports
        labels = {**(svc["metadata"].get("labels") or {}), MANAGED_BY: "endpoint-controller"}
        body: Object = {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": name, "namespace": ns,
                                                                             "labels": labels}}
        if subset and ports:
            body["subsets"] = [subset]
        self._put(rt, ns, name, body)

    def _slice(self, svc: Object, pods: list[Object], zones: dict[str, Any]) -> None:
        rt = self.api.type_of(*SLICES)
        ns, name = svc["metadata"]["namespace"], svc["metadata"]["name"]
        endpoints = []
        for pod in pods:
            terminating = bool(pod["metadata"].get("deletionTimestamp"))
            ready = pod_is_ready(pod)
            entry: Object = {
                "addresses": [pod["status"]["podIP"]],
                "conditions": {"ready": ready and not terminating, "serving": ready, "terminating": terminating},
                "nodeName": pod["spec"].get("nodeName"),
                "targetRef": {"kind": "Pod", "namespace": ns, "name": pod["metadata"]["name"],
                              "uid": pod["metadata"]["uid"]},
            }
            zone = zones.get(pod["spec"].get("nodeName"))
            if zone:
                entry["zone"] = zone
            endpoints.append(entry)
        ports = []
        for port in (svc.get("spec") or {}).get("ports") or []:
            number = _target_port(port, pods[0]) if pods else None
            if number is not None:
                ports.append({"name": port.get("name", ""), "port": number, "protocol": port.get("protocol", "TCP")})
        body: Object = {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": f"{name}-slice",
                "namespace": ns,
                "labels": {**(svc["metadata"].get("labels") or {}), SERVICE_NAME: name,
                           SLICE_MANAGED_BY: "endpointslice-controller.k8s.io"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": name,
                                     "uid": svc["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}],
            },
            "addressType": "IPv4",
            "endpoints": endpoints,
            "ports": ports,
        }
        self._put(rt, ns, f"{name}-slice", body)

    def _put(self, rt: Any, ns: str, name: str, body: Object) -> None:
        current = self.store.get(rt.key, ns, name)
        try:
            if current is None:
                self.api.create(rt, ns, body, "endpoint-controller")
            else:
                merged = clone(current)
                merged["metadata"]["labels"] = body["metadata"]["labels"]
                for key in ("subsets", "endpoints", "ports", "addressType"):
                    if key in body:
                        merged[key] = body[key]
                    else:
                        merged.pop(key, None)
                self.api.write(rt, merged, "endpoint-controller")
        except ApiError:
            return  # the namespace is terminating; nothing to publish

    def _remove_orphans(self, services: dict[tuple[str, str], Object]) -> None:
        rt = self.api.type_of(*ENDPOINTS)
        for ep in self.store.list(ENDPOINTS):
            key = (ep["metadata"]["namespace"], ep["metadata"]["name"])
            managed = (ep["metadata"].get("labels") or {}).get(MANAGED_BY) == "endpoint-controller"
            if managed and (key not in services or not (services[key].get("spec") or {}).get("selector")):
                try:
                    self.api.delete(rt, key[0], key[1])
                except ApiError:
                    continue
