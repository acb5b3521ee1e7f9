"""Endpoints and EndpointSlices for Services with a selector: Ready pods are `addresses`
(`ready: true` in a slice), the others `notReadyAddresses`. This is what turns a pod's
`ome.io/serving` readiness gate into traffic. As kube-controller-manager has it:

- a terminating pod is left out of Endpoints, and is `ready: false` (with `serving` its
  readiness and `terminating: true`) in a slice;
- a Service with `publishNotReadyAddresses` tolerates unready endpoints: every address is in
  `addresses`, terminating ones too, and every slice endpoint is `ready: true` (`serving`
  still follows the pod's readiness);
- a headless Service without ports lists its addresses with no ports; a Service with ports
  leaves out a pod that has none of them, and pods that differ in their ports get subsets
  repacked by port (addresses sorted by IP);
- a pod whose `hostname` is set and whose `subdomain` names the Service carries that
  hostname in both.

Like kube-controller-manager's endpoint and endpointslice controllers, this one works per
Service and per change, so a fleet of thousands of pods costs work in proportion to what
changed rather than services x pods per change:

- a pod change marks only the Services whose selector matches the pod's old or new labels,
  found through a reverse index of selectors (each Service is filed under one of its
  selector's label pairs, the rarest one, since a matching pod must carry every pair);
- a Service's pods come from the store's label index, and after the first pass only the
  pods that changed are re-evaluated;
- EndpointSlices hold at most `max_endpoints_per_slice` (100, `--max-endpoints-per-slice`)
  endpoints, named `<service>-<random suffix>`; a changed pod rewrites only its own slice and
  new pods fill slices with room before a new slice is created (the documented controller
  logic: no active rebalancing); a Service without endpoints keeps one empty slice;
- Endpoints hold at most 1000 addresses (ready ones first) and carry
  `endpoints.kubernetes.io/over-capacity: truncated` when some were left out; each pod's
  address is kept between syncs, and a sync in which no pod's address or readiness moved
  builds nothing, unless someone else wrote the Endpoints since (then they are put back).

Everything is recomputed for every Service on start (state may have been restored from a
file) and for one Service when it, or a slice or Endpoints it owns, changes under us.
"""

from __future__ import annotations

import ipaddress
import logging
import operator
from typing import Any

from kubesim.api import Api
from kubesim.controllers.base import Controller
from kubesim.controllers.slices import SlicePacker
from kubesim.errors import ApiError
from kubesim.selectors import Requirement, labels_match, requirements_from_selector
from kubesim.store import Change, Object, ObjectKey
from kubesim.subresources import pod_is_ready

log = logging.getLogger("kubesim.controllers")

PODS = ("", "pods")
SERVICES = ("", "services")
ENDPOINTS = ("", "endpoints")
SLICES = ("discovery.k8s.io", "endpointslices")
NODES = ("", "nodes")
MANAGED_BY = "endpoints.kubernetes.io/managed-by"
SLICE_MANAGED_BY = "endpointslice.kubernetes.io/managed-by"
SLICE_CONTROLLER = "endpointslice-controller.k8s.io"
SERVICE_NAME = "kubernetes.io/service-name"
HEADLESS = "service.kubernetes.io/headless"
OVER_CAPACITY = "endpoints.kubernetes.io/over-capacity"
ZONE = "topology.kubernetes.io/zone"
# The endpoints controller's cap on one Endpoints object (kube-controller-manager's maxCapacity).
MAX_ENDPOINTS_ADDRESSES = 1000
MAX_ENDPOINTS_PER_SLICE = 100

Pair = tuple[str, str, str]  # (namespace, label key, label value)


def _target_port(port: Object, pod: Object) -> int | None:
    target = port.get("targetPort", port.get("port"))
    if isinstance(target, int):
        return target
    for c in (pod.get("spec") or {}).get("containers") or []:
        for p in c.get("ports") or []:
            if p.get("name") == target:
                return int(p["containerPort"])
    return None


def _pod_ports(svc: Object, pod: Object) -> tuple[tuple[str, int, str], ...]:
    """The Service's ports the pod offers, as (name, port, protocol): what both its Endpoints
    subsets and its slices group it by."""
    ports = []
    for port in (svc.get("spec") or {}).get("ports") or []:
        number = _target_port(port, pod)
        if number is not None:
            ports.append((str(port.get("name") or ""), number, str(port.get("protocol", "TCP"))))
    return tuple(ports)


def _publishable(pod: Object) -> bool:
    status = pod.get("status") or {}
    return bool(status.get("podIP")) and status.get("phase") not in ("Succeeded", "Failed")


def tolerates_unready(svc: Object) -> bool:
    """`publishNotReadyAddresses`: every endpoint is ready, whatever its pod's readiness."""
    return bool((svc.get("spec") or {}).get("publishNotReadyAddresses"))


def hostname_for(pod: Object, svc: Object) -> str | None:
    """The pod's hostname where its `subdomain` names the Service (ShouldSetHostname)."""
    spec = pod.get("spec") or {}
    if (spec.get("hostname") and spec.get("subdomain") == svc["metadata"]["name"]
            and pod["metadata"]["namespace"] == svc["metadata"]["namespace"]):
        return str(spec["hostname"])
    return None


# What a pod is in its Service's Endpoints: whether its address is ready, the address's sort
# key (IP, then uid, in one byte string: it is sorted for every write of a large Service), the
# address, and the ports it offers ((name, port, protocol), ...).
Entry = tuple[bool, bytes, Object, tuple[tuple[str, int, str], ...]]
_NO_PORT = ("", -1, "")  # the sentinel a port-less subset is grouped under
_SORT_KEY = operator.itemgetter(1)


def _ip_key(ip: str) -> bytes:
    try:
        return ipaddress.ip_address(ip).packed
    except ValueError:
        return ip.encode()


def _entry(pod: Object, svc: Object) -> Entry | None:
    """A publishable pod's place in the Service's Endpoints; None where they leave it out: while
    it terminates (unless the Service tolerates unready endpoints), or when the Service has
    ports and the pod none of them."""
    meta = pod["metadata"]
    tolerant = tolerates_unready(svc)
    if meta.get("deletionTimestamp") and not tolerant:
        return None
    spec = svc.get("spec") or {}
    ports = _pod_ports(svc, pod)
    if not ports and (spec.get("ports") or spec.get("clusterIP") != "None"):
        return None  # only a headless Service lists addresses without ports
    ip = pod["status"]["podIP"]
    address: Object = {"ip": ip}
    hostname = hostname_for(pod, svc)
    if hostname:
        address["hostname"] = hostname
    address["nodeName"] = pod["spec"].get("nodeName")
    address["targetRef"] = {"kind": "Pod", "namespace": meta["namespace"], "name": meta["name"], "uid": meta["uid"]}
    return tolerant or pod_is_ready(pod), _ip_key(ip) + str(meta["uid"]).encode(), address, ports


def _subsets(entries: list[Entry]) -> list[Object]:
    """The Endpoints' subsets, as RepackSubsets leaves them: each port with the addresses that
    offer it, and ports whose addresses are the same in one subset. Pods of one template give
    one subset; a headless Service without ports gives one without ports."""
    if not entries:
        return []
    first = entries[0][3]
    by_ports: dict[tuple[Any, ...], list[Entry]] = {first: entries}
    if any(entry[3] != first for entry in entries):
        per_port: dict[tuple[Any, ...], list[Entry]] = {}
        for entry in entries:
            for port in entry[3] or (_NO_PORT,):
                per_port.setdefault(port, []).append(entry)
        grouped: dict[tuple[int, ...], tuple[list[tuple[Any, ...]], list[Entry]]] = {}
        for port, members in per_port.items():
            grouped.setdefault(tuple(map(id, members)), ([], members))[0].append(port)
        by_ports = {tuple(p for p in ports if p != _NO_PORT): members for ports, members in grouped.values()}
    subsets = []
    for ports, members in by_ports.items():
        subset: Object = {}
        ready = [address for is_ready, _, address, _ in members if is_ready]
        not_ready = [address for is_ready, _, address, _ in members if not is_ready]
        if ready:
            subset["addresses"] = ready
        if not_ready:
            subset["notReadyAddresses"] = not_ready
        if ports:
            subset["ports"] = [{"port": number, "protocol": protocol, **({"name": name} if name else {})}
                               for name, number, protocol in ports]
        subsets.append(subset)
    return subsets


def _labels(svc: Object) -> dict[str, str]:
    """The Service's labels, plus the headless marker the real controllers add."""
    labels = dict(svc["metadata"].get("labels") or {})
    if (svc.get("spec") or {}).get("clusterIP") == "None":
        labels[HEADLESS] = ""
    return labels


class EndpointsController(Controller):
    name = "endpoint-controller"
    watches = (PODS, SERVICES, ENDPOINTS, SLICES)
    max_endpoints_per_slice = MAX_ENDPOINTS_PER_SLICE
    max_endpoints_addresses = MAX_ENDPOINTS_ADDRESSES

    def __init__(self, api: Api) -> None:
        super().__init__(api)
        self._resync_all = True
        # Services to sync, each with the names of its pods that changed (None: all of them).
        self._pending: dict[ObjectKey, set[str] | None] = {}
        # The reverse selector index: Services filed under one pair of their selector.
        self._reqs: dict[ObjectKey, list[Requirement]] = {}
        self._pairs: dict[ObjectKey, list[Pair]] = {}
        self._filed_under: dict[ObjectKey, Pair] = {}
        self._filed: dict[Pair, set[ObjectKey]] = {}
        self._pair_use: dict[Pair, int] = {}
        # Each synced Service's publishable matching pods by name (what its slices list), each
        # pod's Endpoints entry where it has one (kept, so a sync re-reads only the pods that
        # changed), and the resourceVersion of the Endpoints as its last sync left them.
        self._members: dict[ObjectKey, dict[str, Object]] = {}
        self._addresses: dict[ObjectKey, dict[str, Entry]] = {}
        self._published: dict[ObjectKey, str] = {}
        self.slices = SlicePacker(self)

    # ---- change tracking -------------------------------------------------------------------

    def on_change(self, change: Change) -> None:
        if change.type_key == PODS:
            self._pod_changed(change)
        elif change.type_key == SERVICES:
            key = (change.obj["metadata"]["namespace"], change.obj["metadata"]["name"])
            self._file(key, None if change.type == "DELETED" else change.obj)
            self._mark(key, None)
        elif change.type_key in (ENDPOINTS, SLICES) and change.type == "DELETED" and not self._reconciling:
            # Someone else removed what we publish: put it back (our own deletions are expected).
            meta = change.obj["metadata"]
            labels = meta.get("labels") or {}
            if change.type_key == ENDPOINTS and labels.get(MANAGED_BY) == "endpoint-controller":
                self._mark((meta["namespace"], meta["name"]), None)
            elif change.type_key == SLICES and labels.get(SLICE_MANAGED_BY) == SLICE_CONTROLLER:
                if labels.get(SERVICE_NAME):
                    self._mark((meta["namespace"], labels[SERVICE_NAME]), None)

    def _pod_changed(self, change: Change) -> None:
        meta = change.obj["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        new_labels = meta.get("labels") or {}
        old_labels = ((change.old or {}).get("metadata") or {}).get("labels") or {}
        for labels in (old_labels, new_labels) if old_labels != new_labels else (new_labels,):
            for pair in labels.items():
                for key in self._filed.get((namespace, *pair), ()):
                    if labels_match(self._reqs[key], labels):
                        self._mark(key, name)

    def _mark(self, key: ObjectKey, pod: str | None) -> None:
        if pod is None:
            self._pending[key] = None
        else:
            names = self._pending.setdefault(key, set())
            if names is not None:
                names.add(pod)
        self.poke()

    def _file(self, key: ObjectKey, svc: Object | None) -> None:
        """(Re)file a Service in the reverse selector index under its rarest selector pair."""
        old = self._filed_under.pop(key, None)
        if old is not None:
            self._filed[old].discard(key)
            if not self._filed[old]:
                del self._filed[old]
        self._reqs.pop(key, None)
        for used in self._pairs.pop(key, []):
            self._pair_use[used] -= 1
            if not self._pair_use[used]:
                del self._pair_use[used]
        selector = ((svc or {}).get("spec") or {}).get("selector") or {}
        if not selector:
            return
        pairs = [(key[0], k, str(v)) for k, v in sorted(selector.items())]
        # Rarest first by the pods carrying the label now, then by how many selectors use it:
        # a Service per Instance is filed under its index label, not the shared ones.
        best = min(pairs, key=lambda p: (self.store.label_count(PODS, p[1], p[2]), self._pair_use.get(p, 0), p))
        for pair in pairs:
            self._pair_use[pair] = self._pair_use.get(pair, 0) + 1
        self._pairs[key] = pairs
        self._reqs[key] = requirements_from_selector({"matchLabels": selector})
        self._filed_under[key] = best
        self._filed.setdefault(best, set()).add(key)

    # ---- reconcile -------------------------------------------------------------------------

    def reconcile(self) -> None:
        if self._resync_all:
            self._resync_all = False
            for svc in self.store.list(SERVICES):
                key = (svc["metadata"]["namespace"], svc["metadata"]["name"])
                self._file(key, svc)
                self._pending[key] = None
            for ep in self.store.list(ENDPOINTS):  # orphans of Services deleted while we were down
                if (ep["metadata"].get("labels") or {}).get(MANAGED_BY) == "endpoint-controller":
                    self._pending.setdefault((ep["metadata"]["namespace"], ep["metadata"]["name"]), None)
        pending, self._pending = self._pending, {}
        for key, changed in pending.items():
            try:
                self._sync(key, changed)
            except Exception:  # one bad Service must not starve the others
                log.exception("%s: syncing service %s/%s failed", self.name, *key)
                self._pending[key] = None  # retried in full after a pause, not in a hot loop
                self.wake_in(0.5)

    def _sync(self, key: ObjectKey, changed: set[str] | None) -> None:
        namespace, name = key
        svc = self.store.get(SERVICES, namespace, name)
        reqs = self._reqs.get(key)
        if svc is None or reqs is None:
            # Gone or selector-less: no Endpoints of ours (slices go with their owner, or stay
            # for a selector-less Service, as the real controller leaves them).
            self._members.pop(key, None)
            self._addresses.pop(key, None)
            self._published.pop(key, None)
            self._drop_endpoints(namespace, name)
            return
        members = self._members.get(key)
        addresses = self._addresses.get(key)
        if members is None or addresses is None or changed is None:
            members = {p["metadata"]["name"]: p for p in self.store.select(PODS, namespace, reqs) if _publishable(p)}
            self._members[key] = members
            self._addresses[key] = {pod_name: entry for pod_name, pod in members.items()
                                    if (entry := _entry(pod, svc)) is not None}
            changed = None
            moved = True
        else:
            moved = False
            for pod_name in changed:
                pod = self.store.get(PODS, namespace, pod_name)
                if pod is not None and _publishable(pod) and labels_match(reqs, pod["metadata"].get("labels")):
                    members[pod_name] = pod
                    entry = _entry(pod, svc)
                else:
                    members.pop(pod_name, None)
                    entry = None
                if entry is None:
                    moved = addresses.pop(pod_name, None) is not None or moved
                else:
                    moved = moved or addresses.get(pod_name) != entry
                    addresses[pod_name] = entry
        self._endpoints(svc, moved)
        self.slices.sync(svc, members, changed)

    # ---- Endpoints (the legacy object) -----------------------------------------------------

    def _endpoints(self, svc: Object, moved: bool) -> None:
        """Write the Service's Endpoints; `moved` says whether any pod's address or readiness
        changed since the last sync, which otherwise has nothing to write unless someone else
        wrote the Endpoints since."""
        rt = self.api.type_of(*ENDPOINTS)
        ns, name = svc["metadata"]["namespace"], svc["metadata"]["name"]
        key = (ns, name)
        current = self.store.get(rt.key, ns, name)
        if not moved and current is not None and current["metadata"]["resourceVersion"] == self._published.get(key):
            return
        entries = sorted(self._addresses[key].values(), key=_SORT_KEY)
        ready = [entry for entry in entries if entry[0]]
        not_ready = [entry for entry in entries if not entry[0]]
        # Over capacity, ready addresses are kept first, as the real controller prioritises them.
        cap = self.max_endpoints_addresses
        truncated = len(entries) > cap
        if truncated:
            ready = ready[:cap]
            not_ready = not_ready[:cap - len(ready)]
        subsets = _subsets(ready + not_ready) or None
        labels = {**_labels(svc), MANAGED_BY: "endpoint-controller"}
        annotations = dict(((current or {}).get("metadata") or {}).get("annotations") or {})
        annotations.pop(OVER_CAPACITY, None)
        if truncated:
            annotations[OVER_CAPACITY] = "truncated"
        try:
            if current is None:
                body: Object = {"apiVersion": "v1", "kind": "Endpoints",
                                "metadata": {"name": name, "namespace": ns, "labels": labels}}
                if annotations:
                    body["metadata"]["annotations"] = annotations
                if subsets:
                    body["subsets"] = subsets
                self.api.create(rt, ns, body, "endpoint-controller")
            else:
                meta = current["metadata"]
                # Nothing to say: no write, not even a no-op one.
                if (current.get("subsets") != subsets or meta.get("labels") != labels
                        or (meta.get("annotations") or {}) != annotations):
                    new_meta = {**meta, "labels": labels, "annotations": annotations}
                    if not annotations:
                        new_meta.pop("annotations")
                    merged = {k: v for k, v in current.items() if k != "subsets"}
                    merged["metadata"] = new_meta
                    if subsets:
                        merged["subsets"] = subsets
                    # Handed over: its containers are new, or the stored object's, or the
                    # addresses kept per pod (`_addresses`), which are replaced, never changed.
                    self.api.write(rt, merged, "endpoint-controller", handed_over=True)
        except ApiError:
            self._published.pop(key, None)  # not as we would leave them: the next sync builds again
            return  # the namespace is terminating; nothing to publish
        stored = self.store.get(rt.key, ns, name)
        self._published[key] = stored["metadata"]["resourceVersion"] if stored is not None else ""

    def _drop_endpoints(self, namespace: str, name: str) -> None:
        ep = self.store.get(ENDPOINTS, namespace, name)
        if ep is None or (ep["metadata"].get("labels") or {}).get(MANAGED_BY) != "endpoint-controller":
            return
        try:
            self.api.delete(self.api.type_of(*ENDPOINTS), namespace, name)
        except ApiError:
            return

    def slice_labels(self, svc: Object) -> dict[str, str]:
        return {**_labels(svc), SERVICE_NAME: svc["metadata"]["name"], SLICE_MANAGED_BY: SLICE_CONTROLLER}

    def endpoint_for(self, svc: Object, pod: Object) -> tuple[tuple[Any, ...], Object]:
        """A pod's slice endpoint and the port mapping it needs (slices group by ports)."""
        ns = svc["metadata"]["namespace"]
        terminating = bool(pod["metadata"].get("deletionTimestamp"))
        serving = pod_is_ready(pod)
        node_name = pod["spec"].get("nodeName")
        # Never ready while terminating, unless the Service tolerates unready endpoints.
        ready = tolerates_unready(svc) or (serving and not terminating)
        entry: Object = {
            "addresses": [pod["status"]["podIP"]],
            "conditions": {"ready": ready, "serving": serving, "terminating": terminating},
        }
        hostname = hostname_for(pod, svc)
        if hostname:
            entry["hostname"] = hostname
        entry["nodeName"] = node_name
        entry["targetRef"] = {"kind": "Pod", "namespace": ns, "name": pod["metadata"]["name"],
                              "uid": pod["metadata"]["uid"]}
        node = self.store.get(NODES, "", node_name) if node_name else None
        zone = ((node or {}).get("metadata", {}).get("labels") or {}).get(ZONE)
        if zone:
            entry["zone"] = zone
        return _pod_ports(svc, pod), entry
