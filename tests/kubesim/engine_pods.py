"""Pods that look like the product's to kubesim's simulated engines, put into rotation the way
the Instance workflow does it (the `ome.io/serving` condition patched True), and the metrics
text read over HTTP."""

from __future__ import annotations

import re
import urllib.request
from typing import Any

import kubernetes

from kubesim.handle import KubeSim
from tests.kubesim.helpers import condition, is_ready, wait_for


def engine_pod(name: str, revision: str, image: str, isvc: str = "chat", component: str = "engine") -> dict[str, Any]:
    labels = {"ome.io/inferenceservice": isvc, "ome.io/component": component, "ome.io/revision": revision,
              "ome.io/role": "default"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "engine", "image": image}],
                 "readinessGates": [{"conditionType": "ome.io/serving"}]},
    }


def set_serving(core: kubernetes.client.CoreV1Api, namespace: str, name: str, serving: bool) -> None:
    """Put a pod into rotation (or take it out) once its containers are ready, and wait for it."""

    def containers_ready() -> bool:
        found = condition(core.read_namespaced_pod(name, namespace), "ContainersReady")
        return found is not None and found.status == "True"

    wait_for(containers_ready, what=f"pod {name}'s containers to be ready")
    status = "True" if serving else "False"
    core.patch_namespaced_pod_status(name, namespace, {"status": {"conditions": [
        {"type": "ome.io/serving", "status": status}]}})
    wait_for(lambda: is_ready(core.read_namespaced_pod(name, namespace)) == serving,
             what=f"pod {name} Ready={serving}")


def start_serving(core: kubernetes.client.CoreV1Api, namespace: str, pods: list[dict[str, Any]]) -> None:
    for body in pods:
        core.create_namespaced_pod(namespace, body)
    for body in pods:
        set_serving(core, namespace, body["metadata"]["name"], True)


def scrape(sim: KubeSim) -> tuple[str, str]:
    """GET /metrics: (Content-Type, body)."""
    with urllib.request.urlopen(sim.metrics_url, timeout=10) as response:
        return response.headers["Content-Type"], response.read().decode()


def sample(text: str, metric: str, **labels: str) -> float | None:
    """The value of the one sample of `metric` carrying these labels (and maybe others)."""
    found = []
    for line in text.splitlines():
        match = re.fullmatch(r"(\w+)\{(.*)\} (\S+)", line)
        if not match or match.group(1) != metric:
            continue
        pairs = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', match.group(2)))
        if all(pairs.get(key) == value for key, value in labels.items()):
            found.append(float(match.group(3)))
    assert len(found) <= 1, f"{metric}{labels} matches {len(found)} samples"
    return found[0] if found else None
