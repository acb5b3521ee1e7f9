"""What the Kubernetes-activity tests share: the objects they apply and a polling wait.

The activity tests (`test_kube_activities.py`), the watcher tests (`test_watcher.py`) and the
RBAC usage measurement (`tests/unit/deploy_usage.py`) drive the product's activities against
kubesim with the same kind of Instance pod and headless Service, and wait for the simulated
cluster the same way; one definition keeps their pods labelled alike, so a label the watcher
or the activities come to need is added once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from tests.kubesim import helpers

T = TypeVar("T")

WAIT_SECONDS = 30.0
"""Generous: the machine is shared, and a wait returns as soon as its check passes."""


def wait_for(check: Callable[[], T | None], what: str, within: float = WAIT_SECONDS) -> T:
    """Poll `check` until it returns something truthy; fail naming `what` after `within` seconds."""
    return helpers.wait_for(check, timeout=within, what=what)


def namespace_manifest(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def instance_pod(
    namespace: str,
    *,
    index: int = 0,
    role: str = "default",
    ordinal: int = 0,
    revision: str = "7c9e",
    incarnation: int = 1,
    isvc: str = "chat",
) -> dict[str, Any]:
    """A pod of Instance `index` of `<isvc>`'s engine, labelled and gated as the Instance makes it."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{isvc}-engine-{index}-{role}-{ordinal}",
            "namespace": namespace,
            "labels": {
                "ome.io/inferenceservice": isvc,
                "ome.io/component": "engine",
                "ome.io/instance-index": str(index),
                "ome.io/revision": revision,
                "ome.io/role": role,
                "ome.io/incarnation": str(incarnation),
            },
        },
        "spec": {
            "containers": [{"name": "engine", "image": "ome/engine:v1"}],
            "readinessGates": [{"conditionType": "ome.io/serving"}],
        },
    }


def headless_service(namespace: str, port: int = 8080, index: int = 0) -> dict[str, Any]:
    """Instance `index`'s headless Service `chat-engine-<index>`, selecting that Instance's pods,
    labelled (and so its EndpointSlices) with the Instance's labels as the product makes it."""
    labels = {
        "ome.io/inferenceservice": "chat",
        "ome.io/component": "engine",
        "ome.io/instance-index": str(index),
    }
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": f"chat-engine-{index}", "namespace": namespace, "labels": labels},
        "spec": {
            "clusterIP": "None",
            "selector": dict(labels),
            "ports": [{"name": "http", "port": port}],
        },
    }
