"""Server-side printing: `meta.k8s.io/v1 Table` answers for clients that ask for them
(`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`, which is what `kubectl get` sends),
with the columns a real cluster prints for the common kinds and a CRD's
`additionalPrinterColumns` for custom resources.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from kubesim.resources import ResourceType
from kubesim.timing import now, parse_timestamp

Object = dict[str, Any]
Column = tuple[str, str, Callable[[Object], Any]]  # name, type, cell


def wants_table(accept: str) -> bool:
    return "as=Table" in (accept or "")


def human_age(stamp: str | None) -> str:
    """Durations as kubectl prints them: 45s, 12m, 5h, 3d."""
    if not stamp:
        return "<unknown>"
    seconds = int((now() - parse_timestamp(stamp)).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size * 2 or (unit == "m" and seconds >= size):
            return f"{seconds // size}{unit}"
    return f"{max(seconds, 0)}s"


_FILTER = re.compile(r"^\[\?\(@\.([\w.]+)\s*==\s*['\"]([^'\"]*)['\"]\)\]")


def json_path(obj: Any, path: str) -> Any:
    """The subset of kubectl JSONPath printer columns use: `.a.b`, `.a[0]`, `.a[?(@.k=='v')].b`."""
    rest = path.strip().strip("{}").lstrip("$")
    node = obj
    while rest and node is not None:
        if rest.startswith("."):
            match = re.match(r"^\.([\w\-/]+)", rest)
            if not match:
                return None
            node = node.get(match.group(1)) if isinstance(node, dict) else None
            rest = rest[match.end():]
        elif (m := _FILTER.match(rest)) is not None:
            key, value = m.group(1), m.group(2)
            found = [i for i in node or [] if isinstance(i, dict) and str(json_path(i, "." + key)) == value]
            node = found[0] if found else None
            rest = rest[m.end():]
        elif (m := re.match(r"^\[(\d+)\]", rest)) is not None:
            index = int(m.group(1))
            node = node[index] if isinstance(node, list) and index < len(node) else None
            rest = rest[m.end():]
        else:
            return None
    return node


def _pod_ready(pod: Object) -> str:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    total = len((pod.get("spec") or {}).get("containers") or [])
    return f"{sum(1 for s in statuses if s.get('ready'))}/{total}"


def _pod_status(pod: Object) -> str:
    if pod["metadata"].get("deletionTimestamp"):
        return "Terminating"
    for s in (pod.get("status") or {}).get("containerStatuses") or []:
        waiting = (s.get("state") or {}).get("waiting")
        if waiting and waiting.get("reason") not in (None, "", "ContainerCreating", "PodInitializing"):
            return str(waiting["reason"])
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    if any(((s.get("state") or {}).get("waiting") or {}).get("reason") == "ContainerCreating" for s in statuses):
        return "ContainerCreating"
    return str((pod.get("status") or {}).get("phase") or "Pending")


def _node_status(node: Object) -> str:
    ready = next((c.get("status") for c in (node.get("status") or {}).get("conditions") or []
                  if c.get("type") == "Ready"), "Unknown")
    text = {"True": "Ready", "False": "NotReady"}.get(str(ready), "NotReady")
    return text + (",SchedulingDisabled" if (node.get("spec") or {}).get("unschedulable") else "")


_BUILTIN_COLUMNS: dict[str, list[Column]] = {
    "pods": [
        ("Ready", "string", _pod_ready),
        ("Status", "string", _pod_status),
        ("Restarts", "integer", lambda p: sum(int(s.get("restartCount") or 0) for s in
                                              (p.get("status") or {}).get("containerStatuses") or [])),
    ],
    "nodes": [
        ("Status", "string", _node_status),
        ("Roles", "string", lambda n: "<none>"),
    ],
    "deployments": [
        ("Ready", "string", lambda d: f"{(d.get('status') or {}).get('readyReplicas', 0)}/"
                                      f"{(d.get('spec') or {}).get('replicas', 0)}"),
        ("Up-to-date", "integer", lambda d: (d.get("status") or {}).get("updatedReplicas", 0)),
        ("Available", "integer", lambda d: (d.get("status") or {}).get("availableReplicas", 0)),
    ],
}


def _status(obj: Object) -> Object:
    return obj.get("status") or {}


def _node_address(kind: str) -> Callable[[Object], Any]:
    def cell(node: Object) -> Any:
        found = [a.get("address") for a in _status(node).get("addresses") or [] if a.get("type") == kind]
        return found[0] if found else None

    return cell


def _readiness_gates(pod: Object) -> Any:
    gates = (pod.get("spec") or {}).get("readinessGates") or []
    if not gates:
        return None
    conditions = {c.get("type"): c.get("status") for c in _status(pod).get("conditions") or []}
    ready = sum(1 for g in gates if conditions.get(g.get("conditionType")) == "True")
    return f"{ready}/{len(gates)}"


def _event_object(event: Object) -> str:
    ref = event.get("involvedObject") or event.get("regarding") or {}
    return f"{str(ref.get('kind', '')).lower()}/{ref.get('name', '')}"


def _event_last_seen(event: Object) -> Any:
    return event.get("lastTimestamp") or event.get("eventTime") or event["metadata"].get("creationTimestamp")


def _event_source(event: Object) -> str:
    source = event.get("source") or {}
    component = source.get("component") or event.get("reportingComponent") or ""
    return f"{component}, {source['host']}" if source.get("host") else component


def _spec(obj: Object) -> Object:
    return obj.get("spec") or {}


def _service_external_ip(svc: Object) -> Any:
    spec = _spec(svc)
    if spec.get("type") == "ExternalName":
        return spec.get("externalName")
    ips = list(spec.get("externalIPs") or [])
    if spec.get("type") == "LoadBalancer":
        ingress = (_status(svc).get("loadBalancer") or {}).get("ingress") or []
        ips += [i.get("ip") or i.get("hostname") for i in ingress]
        return ",".join(ips) if ips else "<pending>"
    return ",".join(ips) if ips else None


def _service_ports(svc: Object) -> Any:
    ports = []
    for port in _spec(svc).get("ports") or []:
        node = f":{port['nodePort']}" if port.get("nodePort") else ""
        ports.append(f"{port.get('port')}{node}/{port.get('protocol', 'TCP')}")
    return ",".join(ports) if ports else None


def _selector(selector: Any) -> Any:
    if not isinstance(selector, dict) or not selector:
        return None
    labels = selector.get("matchLabels", selector if "matchExpressions" not in selector else {})
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or None


def _endpoints(ep: Object) -> Any:
    """As kubectl's printer shows an Endpoints: each ready address with each port (`ip:port`),
    by subset then port; a subset without ports (a headless Service's) by its addresses alone."""
    subsets = ep.get("subsets") or []
    if not subsets:
        return None
    found: list[str] = []
    for subset in subsets:
        addresses = [str(a.get("ip")) for a in subset.get("addresses") or []]
        ports = subset.get("ports") or []
        if not ports:
            found += addresses
        for port in ports:
            found += [f"[{ip}]:{port.get('port')}" if ":" in ip else f"{ip}:{port.get('port')}" for ip in addresses]
    return ",".join(found[:3]) + (f" + {len(found) - 3} more..." if len(found) > 3 else "")


def _template_field(key: str) -> Callable[[Object], Any]:
    def cell(obj: Object) -> Any:
        containers = ((_spec(obj).get("template") or {}).get("spec") or {}).get("containers") or []
        return ",".join(str(c.get(key, "")) for c in containers) or None

    return cell


def _budget(key: str) -> Callable[[Object], Any]:
    return lambda pdb: _spec(pdb).get(key, "N/A")


_WORKLOAD_WIDE: list[Column] = [
    ("Containers", "string", _template_field("name")),
    ("Images", "string", _template_field("image")),
    ("Selector", "string", lambda o: _selector(_spec(o).get("selector"))),
]
_BUILTIN_COLUMNS.update({
    "namespaces": [("Status", "string", lambda n: _status(n).get("phase"))],
    "services": [
        ("Type", "string", lambda s: _spec(s).get("type", "ClusterIP")),
        ("Cluster-IP", "string", lambda s: _spec(s).get("clusterIP")),
        ("External-IP", "string", _service_external_ip),
        ("Port(s)", "string", _service_ports),
    ],
    "configmaps": [("Data", "integer", lambda c: len(c.get("data") or {}) + len(c.get("binaryData") or {}))],
    "secrets": [("Type", "string", lambda s: s.get("type", "Opaque")),
                ("Data", "integer", lambda s: len(s.get("data") or {}))],
    "serviceaccounts": [("Secrets", "integer", lambda s: len(s.get("secrets") or []))],
    "endpoints": [("Endpoints", "string", _endpoints)],
    "replicasets": [
        ("Desired", "integer", lambda r: _spec(r).get("replicas", 1)),
        ("Current", "integer", lambda r: _status(r).get("replicas", 0)),
        ("Ready", "integer", lambda r: _status(r).get("readyReplicas", 0)),
    ],
    "poddisruptionbudgets": [
        ("Min Available", "string", _budget("minAvailable")),
        ("Max Unavailable", "string", _budget("maxUnavailable")),
        ("Allowed Disruptions", "integer", lambda p: _status(p).get("disruptionsAllowed", 0)),
    ],
    "leases": [("Holder", "string", lambda lease: _spec(lease).get("holderIdentity"))],
    "validatingwebhookconfigurations": [("Webhooks", "integer", lambda c: len(c.get("webhooks") or []))],
})

# Priority-1 columns (shown by -o wide) the API server appends after Age, and kinds whose whole
# column list differs from Name + kind columns + Age.
_WIDE_COLUMNS: dict[str, list[Column]] = {
    "pods": [
        ("IP", "string", lambda p: _status(p).get("podIP")),
        ("Node", "string", lambda p: (p.get("spec") or {}).get("nodeName")),
        ("Nominated Node", "string", lambda p: _status(p).get("nominatedNodeName")),
        ("Readiness Gates", "string", _readiness_gates),
    ],
    "nodes": [
        ("Internal-IP", "string", _node_address("InternalIP")),
        ("External-IP", "string", _node_address("ExternalIP")),
        ("OS-Image", "string", lambda n: (_status(n).get("nodeInfo") or {}).get("osImage")),
        ("Kernel-Version", "string", lambda n: (_status(n).get("nodeInfo") or {}).get("kernelVersion")),
        ("Container-Runtime", "string", lambda n: (_status(n).get("nodeInfo") or {}).get("containerRuntimeVersion")),
    ],
    "services": [("Selector", "string", lambda s: _selector(_spec(s).get("selector")))],
    "deployments": _WORKLOAD_WIDE,
    "replicasets": _WORKLOAD_WIDE,
}
def _quota_usage(limits: bool) -> Callable[[Object], Any]:
    """A ResourceQuota's `used/hard` per resource, sorted by name: `limits.*` in the Limit
    column, everything else in Request (kubectl's `Request` shows e.g. `pods: 1/2`). kubesim
    counts what pods use (`kubesim.quota`): another kind's object count shows as `?`."""

    def cell(quota: Object) -> str:
        status = _status(quota)
        used, hard = status.get("used") or {}, status.get("hard") or {}
        names = sorted(name for name in _spec(quota).get("hard") or {} if name.startswith("limits.") == limits)
        return ", ".join(f"{name}: {used.get(name, '?')}/{hard.get(name, '?')}" for name in names)

    return cell


_AFTER_AGE: dict[str, list[Column]] = {
    "nodes": [("Version", "string", lambda n: (_status(n).get("nodeInfo") or {}).get("kubeletVersion"))],
    "resourcequotas": [("Request", "string", _quota_usage(False)), ("Limit", "string", _quota_usage(True))],
}
# name, type, cell, priority: kubectl get events prints Last Seen, Type, Reason, Object, Message.
_EVENT_COLUMNS: list[tuple[str, str, Callable[[Object], Any], int]] = [
    ("Last Seen", "date", _event_last_seen, 0),
    ("Type", "string", lambda e: e.get("type"), 0),
    ("Reason", "string", lambda e: e.get("reason"), 0),
    ("Object", "string", _event_object, 0),
    ("Subobject", "string", lambda e: (e.get("involvedObject") or {}).get("fieldPath"), 1),
    ("Source", "string", _event_source, 1),
    ("Message", "string", lambda e: e.get("message") or e.get("note"), 0),
    ("First Seen", "date", lambda e: e.get("firstTimestamp") or e.get("eventTime"), 1),
    ("Count", "integer", lambda e: e.get("count") or 1, 1),
    ("Name", "string", lambda e: e["metadata"]["name"], 1),
]


def _path_cell(path: str) -> Callable[[Object], Any]:
    def cell(obj: Object) -> Any:
        return json_path(obj, path)

    return cell


def _name(obj: Object) -> Any:
    return obj["metadata"]["name"]


def _columns(rt: ResourceType) -> list[Column]:
    if rt.printer_columns:
        columns: list[Column] = []
        for raw in rt.printer_columns:
            spec = dict(raw)
            path, kind = str(spec.get("jsonPath", "")), str(spec.get("type", "string"))
            columns.append((str(spec.get("name", "")), kind, _path_cell(path)))
        return columns
    return _BUILTIN_COLUMNS.get(rt.plural, []) + [("Age", "date", lambda o: o["metadata"].get("creationTimestamp"))]


def _cell(kind: str, value: Any) -> Any:
    if value is None:
        return "<none>" if kind != "date" else "<unknown>"
    if kind == "date":
        return human_age(value if isinstance(value, str) else value.isoformat())
    return value


def _all_columns(rt: ResourceType) -> list[tuple[str, str, Callable[[Object], Any], int]]:
    if rt.builtin and rt.plural == "events":
        return _EVENT_COLUMNS
    base = [("Name", "string", _name), *_columns(rt)]
    if rt.printer_columns:
        # A CRD column's priority (0 default, 1 for -o wide) comes from additionalPrinterColumns.
        priorities = [0] + [int(dict(raw).get("priority") or 0) for raw in rt.printer_columns]
        return [(name, kind, cell, prio) for (name, kind, cell), prio in zip(base, priorities, strict=True)]
    if not rt.builtin:
        return [(name, kind, cell, 0) for name, kind, cell in base]
    base += _AFTER_AGE.get(rt.plural, [])
    return [(name, kind, cell, 0) for name, kind, cell in base] + [
        (name, kind, cell, 1) for name, kind, cell in _WIDE_COLUMNS.get(rt.plural, [])]


def to_table(rt: ResourceType, items: list[Object], list_meta: Object, include_object: str) -> Object:
    columns = _all_columns(rt)
    rows = []
    for obj in items:
        row: Object = {"cells": [_cell(kind, cell(obj)) for _, kind, cell, _ in columns]}
        if include_object == "Object":
            row["object"] = obj
        elif include_object != "None":
            row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                             "metadata": obj["metadata"]}
        rows.append(row)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {k: v for k, v in list_meta.items() if k in ("resourceVersion", "continue")},
        "columnDefinitions": [
            {"name": name, "type": "string" if kind == "date" else kind, "format": "name" if name == "Name" else "",
             "description": name, "priority": priority}
            for name, kind, _, priority in columns
        ],
        "rows": rows,
    }

