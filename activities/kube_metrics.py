"""Kubernetes API request metrics: every request `activities.kube_rest.KubeRest` sends is
counted by verb, resource and answer code, and timed, on the worker's `/metrics` beside the
Temporal SDK's (through the activity's metric meter, so the series also carry the
`activity_type` that made the call).

`verb_and_resource` names a request the way the API server's own `apiserver_request_total`
does (`list` and `watch` are GETs of a collection, `pods/status` a subresource); it is a pure
function of method, path and query. Outside an activity (the watcher's process, a test's
direct call) nothing is recorded: those processes serve no metrics.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from temporalio import activity

REQUESTS = "ome_kube_requests_total"
REQUEST_DURATION = "ome_kube_request_duration_seconds"
ERROR_CODE = "<error>"
"""The `code` of a request that got no HTTP answer (refused, reset, timed out), as client-go says."""

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
"""A healthy API server answers in milliseconds; the client's read timeout is 30 s."""
HISTOGRAM_BUCKETS: Mapping[str, tuple[float, ...]] = {REQUEST_DURATION: LATENCY_BUCKETS}

_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


def verb_and_resource(method: str, path: str, query: Sequence[tuple[str, Any]] = ()) -> tuple[str, str]:
    """(`get`|`list`|`watch`|`create`|`update`|`patch`|`delete`|`deletecollection`, resource).

    `/api/v1/namespaces/ns/pods/p/status` -> `pods/status`; `/api/v1/namespaces/ns` ->
    `namespaces`; a path outside the resource API (`/version`) is its own resource name."""
    parts = [p for p in path.split("?", 1)[0].split("/") if p]
    if parts[:1] == ["api"]:
        rest = parts[2:]
    elif parts[:1] == ["apis"]:
        rest = parts[3:]
    else:
        return method.lower(), "/" + "/".join(parts)
    if len(rest) >= 3 and rest[0] == "namespaces":
        rest = rest[2:]  # namespaced: drop "namespaces/<ns>"
    resource = rest[0] if rest else ""
    named = len(rest) >= 2
    if len(rest) >= 3:
        resource = f"{resource}/{rest[2]}"
    upper = method.upper()
    if upper == "GET":
        watching = any(key == "watch" and str(value).lower() in ("true", "1") for key, value in query)
        return ("watch" if watching else "get" if named else "list"), resource
    if upper == "DELETE" and not named:
        return "deletecollection", resource
    return _VERBS.get(upper, upper.lower()), resource


def record(method: str, path: str, query: Sequence[tuple[str, Any]], code: int | None, seconds: float) -> None:
    """Count and time one request; `code` None: no HTTP answer came."""
    if not activity.in_activity():
        return
    try:
        activity_meter = activity.metric_meter()
    except RuntimeError:  # a non-threaded sync activity has no meter; the request itself counts more
        return
    verb, resource = verb_and_resource(method, path, query)
    meter = activity_meter.with_additional_attributes({"verb": verb, "resource": resource})
    meter.create_counter(REQUESTS, "Kubernetes API requests by verb, resource and code").add(
        1, {"code": str(code) if code is not None else ERROR_CODE}
    )
    meter.create_histogram_float(REQUEST_DURATION, "Kubernetes API request latency", "s").record(seconds)
