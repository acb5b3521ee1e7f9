"""How the endpoint controller packs one Service's endpoints into EndpointSlices.

It follows the documented EndpointSlice controller algorithm (kubernetes.io, "Distribution
of EndpointSlices"), per port mapping:

1. in the existing slices, drop endpoints no longer wanted and update the changed ones;
2. fill the slices changed in step 1 with the new endpoints, up to the per-slice maximum;
3. put what is left into the unchanged slice closest to full that can take all of it, or
   else into new slices: one slice creation is preferred over several slice updates.

There is no active rebalancing, so a change to one pod rewrites only the slice that holds
it. Slices left empty are deleted, except that a Service with no endpoints keeps one empty
slice (the real controller's placeholder), which consumers read as "nothing listed".

Only the pods named as changed are looked at after a Service's first pass; which pods each
slice holds is cached by the slice's resourceVersion, so that lookup costs the number of
slices, not of endpoints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kubesim.errors import ApiError
from kubesim.store import Object, ObjectKey

if TYPE_CHECKING:
    from kubesim.controllers.endpoints import EndpointsController

Ports = tuple[Any, ...]  # ((name, port, protocol), ...) one port mapping


def _pod_name(endpoint: Object) -> str:
    return str((endpoint.get("targetRef") or {}).get("name") or "")


def _ports_of(endpoint_slice: Object) -> Ports:
    return tuple((p.get("name", ""), p.get("port"), p.get("protocol", "TCP"))
                 for p in endpoint_slice.get("ports") or [])


@dataclass
class _Slice:
    """One slice being worked on: the stored object (None until created) and its new content."""

    obj: Object | None
    ports: Ports
    endpoints: list[Object] = field(default_factory=list)
    names: frozenset[str] = frozenset()
    changed: bool = False

    @property
    def name(self) -> str:
        return str(self.obj["metadata"]["name"]) if self.obj is not None else ""


class SlicePacker:
    """Keeps one Service's EndpointSlices in line with its pods."""

    def __init__(self, controller: EndpointsController) -> None:
        self.controller = controller
        self.api = controller.api
        self.store = controller.store
        # Pod names each slice holds, valid while the slice keeps this resourceVersion.
        self._names: dict[ObjectKey, tuple[str, frozenset[str]]] = {}

    def _held(self, obj: Object) -> frozenset[str]:
        meta = obj["metadata"]
        key, rv = (meta["namespace"], meta["name"]), meta["resourceVersion"]
        cached = self._names.get(key)
        if cached is not None and cached[0] == rv:
            return cached[1]
        names = frozenset(_pod_name(e) for e in obj.get("endpoints") or [])
        self._names[key] = (rv, names)
        return names

    def sync(self, svc: Object, members: dict[str, Object], changed: set[str] | None) -> None:
        """Bring the Service's slices in line; `changed` names the pods to look at (None: all)."""
        from kubesim.controllers.endpoints import SERVICE_NAME, SLICE_CONTROLLER, SLICE_MANAGED_BY, SLICES

        ns, name = svc["metadata"]["namespace"], svc["metadata"]["name"]
        existing = self.store.select(SLICES, ns, [(SERVICE_NAME, "In", frozenset([name])),
                                                  (SLICE_MANAGED_BY, "In", frozenset([SLICE_CONTROLLER]))])
        work = [_Slice(obj, _ports_of(obj), list(obj.get("endpoints") or []), self._held(obj)) for obj in existing]
        if changed is None:
            dirty = set(members).union(*(w.names for w in work))
        else:
            dirty = changed
        desired = {n: self.controller.endpoint_for(svc, members[n]) for n in dirty if n in members}
        limit = max(1, self.controller.max_endpoints_per_slice)

        # 1. Drop what is no longer wanted and update what changed, in place.
        placed: set[str] = set()
        for w in work:
            if not (w.names & dirty):
                continue
            kept = []
            for endpoint in w.endpoints:
                pod = _pod_name(endpoint)
                if pod not in dirty:
                    kept.append(endpoint)
                    continue
                want = desired.get(pod)
                if want is not None and want[0] == w.ports and pod not in placed and len(kept) < limit:
                    kept.append(want[1])
                    placed.add(pod)
            if kept != w.endpoints:
                w.endpoints, w.changed = kept, True

        # 2 and 3. Place the new endpoints, per port mapping.
        groups: dict[Ports, list[Object]] = {}
        for pod in sorted(set(desired) - placed):
            ports, endpoint = desired[pod]
            groups.setdefault(ports, []).append(endpoint)
        for ports, entries in groups.items():
            for w in sorted(work, key=lambda s: s.name):
                if not entries:
                    break
                if (w.changed or not w.endpoints) and (w.ports == ports or not w.endpoints):
                    room = limit - len(w.endpoints)
                    if room > 0:
                        w.ports = ports
                        w.endpoints, entries = w.endpoints + entries[:room], entries[room:]
                        w.changed = True
            while entries:
                target = None
                if len(entries) < limit:
                    fits = [w for w in work if not w.changed and w.ports == ports
                            and len(w.endpoints) + len(entries) <= limit]
                    target = max(fits, key=lambda s: (len(s.endpoints), s.name), default=None)
                if target is None:
                    target = _Slice(None, ports)
                    work.append(target)
                room = limit - len(target.endpoints)
                target.endpoints, entries = target.endpoints + entries[:room], entries[room:]
                target.changed = True

        # A Service without endpoints keeps one empty slice; other empty slices go.
        placeholder = None
        if not any(w.endpoints for w in work):
            placeholder = next((w for w in work if w.obj is not None), None) or _Slice(None, ())
            if placeholder not in work:
                work.append(placeholder)
            if placeholder.ports:
                placeholder.ports, placeholder.changed = (), True
        labels = self.controller.slice_labels(svc)
        doomed = [w for w in work if not w.endpoints and w is not placeholder and w.obj is not None]
        for w in work:
            if w.obj is None:
                self._create(svc, w, labels)
            elif w in doomed:
                continue
            elif w.changed or (w.obj["metadata"].get("labels") or {}) != labels:
                self._update(w, labels)
        for w in doomed:
            self._delete(w)

    def _body(self, w: _Slice) -> Object:
        return {"addressType": "IPv4", "endpoints": w.endpoints,
                "ports": [{"name": n, "port": p, "protocol": proto} for n, p, proto in w.ports]}

    def _create(self, svc: Object, w: _Slice, labels: dict[str, str]) -> None:
        ns, name = svc["metadata"]["namespace"], svc["metadata"]["name"]
        body: Object = {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "generateName": f"{name}-",
                "namespace": ns,
                "labels": labels,
                "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": name,
                                     "uid": svc["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}],
            },
            **self._body(w),
        }
        try:
            self.api.create(self.api.type_of("discovery.k8s.io", "endpointslices"), ns, body, "endpoint-controller")
        except ApiError:
            return  # the namespace is terminating; nothing to publish

    def _update(self, w: _Slice, labels: dict[str, str]) -> None:
        assert w.obj is not None
        current = w.obj
        body = self._body(w)
        if (all(current.get(k) == v for k, v in body.items())
                and (current["metadata"].get("labels") or {}) == labels):
            return  # the same content: a no-op write never reaches the store
        merged = {**current, **body, "metadata": {**current["metadata"], "labels": labels}}
        try:
            self.api.write(self.api.type_of("discovery.k8s.io", "endpointslices"), merged, "endpoint-controller")
        except ApiError:
            return

    def _delete(self, w: _Slice) -> None:
        assert w.obj is not None
        meta = w.obj["metadata"]
        self._names.pop((meta["namespace"], meta["name"]), None)
        try:
            self.api.delete(self.api.type_of("discovery.k8s.io", "endpointslices"), meta["namespace"], meta["name"])
        except ApiError:
            return
