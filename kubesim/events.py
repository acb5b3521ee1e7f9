"""Recording core/v1 Events the way Kubernetes components do: one Event per (object, reason,
message, source), its `count` and `lastTimestamp` bumped when the same thing happens again.
"""

from __future__ import annotations

import time
from typing import Any

from kubesim.api import Api
from kubesim.errors import ApiError
from kubesim.store import Object
from kubesim.timing import timestamp

EVENTS = ("", "events")


def record_event(api: Api, obj: Object, event_type: str, reason: str, message: str, component: str,
                 host: str = "") -> Object | None:
    meta = obj["metadata"]
    namespace = meta.get("namespace") or "default"
    rt = api.type_of(*EVENTS)
    key = (meta.get("uid"), reason, message, event_type, component)
    known = api.event_index.get(key)
    existing = api.store.get(EVENTS, *known) if known else None
    if existing is not None:
        updated = {**existing, "count": int(existing.get("count") or 1) + 1, "lastTimestamp": timestamp()}
        return api.write(rt, updated, component)
    now = timestamp()
    source: dict[str, Any] = {"component": component}
    if host:
        source["host"] = host
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{meta['name']}.{time.time_ns():x}", "namespace": namespace},
        "involvedObject": {
            "kind": obj.get("kind"), "apiVersion": obj.get("apiVersion"), "name": meta["name"],
            "namespace": meta.get("namespace", ""), "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
        },
        "reason": reason,
        "message": message,
        "type": event_type,
        "count": 1,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "source": source,
        "reportingComponent": component,
        "reportingInstance": host or component,
    }
    try:
        created = api.create(rt, namespace, event, component)
        api.event_index[key] = (namespace, created["metadata"]["name"])
        return created
    except ApiError:
        return None  # the namespace is going away; events are best effort, as in Kubernetes
