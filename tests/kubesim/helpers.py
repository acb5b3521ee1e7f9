"""Helpers for the kubesim contract tests: polling with deadlines, pod bodies, condition lookups."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import kubernetes

from kubesim.handle import KubeSim

T = TypeVar("T")


def wait_for(check: Callable[[], T | None], timeout: float = 10.0, what: str = "condition") -> T:
    """Poll until `check` returns something truthy; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last value: {last!r})")


@dataclass
class Clients:
    sim: KubeSim
    api: kubernetes.client.ApiClient
    core: kubernetes.client.CoreV1Api
    apps: kubernetes.client.AppsV1Api
    policy: kubernetes.client.PolicyV1Api
    custom: kubernetes.client.CustomObjectsApi
    namespace: str


def clients(sim: KubeSim) -> Iterator[Clients]:
    """Clients on `sim` and a fresh namespace, as a fixture yields them."""
    api = sim.api_client()
    core = kubernetes.client.CoreV1Api(api)
    namespace = f"t-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": namespace}})
    yield Clients(sim, api, core, kubernetes.client.AppsV1Api(api), kubernetes.client.PolicyV1Api(api),
                  kubernetes.client.CustomObjectsApi(api), namespace)
    api.close()


def pod_body(
    name: str, image: str = "server:1", labels: dict[str, str] | None = None, gpus: int = 0, **spec: Any
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": image}
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"containers": [container], **spec},
    }


def condition(pod: Any, ctype: str) -> Any:
    return next((c for c in pod.status.conditions or [] if c.type == ctype), None)


def is_ready(pod: Any) -> bool:
    cond = condition(pod, "Ready")
    return cond is not None and cond.status == "True"


def raw_request(
    sim: KubeSim,
    method: str,
    path: str,
    body: Any = None,
    content_type: str | None = "application/json",
    accept: str | None = None,
) -> tuple[int, Any]:
    """One request on the wire (for wire-level checks the typed clients cannot express)."""
    import http.client
    import json

    conn = http.client.HTTPConnection("127.0.0.1", sim.port, timeout=30)
    payload = body if isinstance(body, (bytes, str)) or body is None else json.dumps(body)
    headers = {"Content-Type": content_type} if content_type and payload is not None else {}
    if accept:
        headers["Accept"] = accept
    conn.request(method, path, body=payload, headers=headers)
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, json.loads(data) if data else None


def wait_pod(
    k8s: Clients, name: str, predicate: Callable[[Any], Any], what: str, timeout: float = 10.0
) -> Any:
    """Poll the pod until `predicate(pod)` holds; return that pod."""

    def check() -> Any:
        pod = k8s.core.read_namespaced_pod(name, k8s.namespace)
        return pod if predicate(pod) else None

    return wait_for(check, timeout=timeout, what=f"pod {name}: {what}")


def quota_counted(core: kubernetes.client.CoreV1Api, namespace: str, name: str) -> bool:
    """Whether ResourceQuota `name`'s status names its limits. Admission judges a pod on the
    quota's status, so a quota limits nothing until its controller has counted it (as in
    Kubernetes): a test that means to be held by it waits for this."""
    status = core.read_namespaced_resource_quota(name, namespace).status
    return bool(status is not None and status.hard)
