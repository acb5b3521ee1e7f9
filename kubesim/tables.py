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


def to_table(rt: ResourceType, items: list[Object], list_meta: Object, include_object: str) -> Object:
    columns: list[Column] = [("Name", "string", _name), *_columns(rt)]
    rows = []
    for obj in items:
        row: Object = {"cells": [_cell(kind, cell(obj)) for _, kind, cell in columns]}
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
             "description": name, "priority": 0}
            for name, kind, _ in columns
        ],
        "rows": rows,
    }

