"""The drain's node activities against kubesim: a node's pods, and evictions a
PodDisruptionBudget refuses (an answer, not a failure)."""

from __future__ import annotations

import json
import time
from typing import Any

import kubernetes
import pytest
from kubernetes.client.exceptions import ApiException

from activities.kube_nodes import NodeActivities, blocked_message
from kubesim.handle import KubeSim
from models.kube_ops import EvictPodInput, ListNodePodsInput

pytestmark = pytest.mark.kubesim

DB_BUDGET = "The disruption budget db needs 3 healthy pods and has 3 currently"
TWO_BUDGETS = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
WEB = {"ome.io/inferenceservice": "web", "ome.io/component": "engine"}


def pod(name: str, node: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {**labels, "team": "a"}},
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "app:1"}]},
    }


def test_lists_a_nodes_pods_and_waits_out_a_budget(kubesim: KubeSim) -> None:
    core = kubernetes.client.CoreV1Api(kubesim.api_client())
    nodes = NodeActivities(kubesim.api_client())
    assert not nodes.list_node_pods(ListNodePodsInput(node="gpu-node-99")).found

    core.create_namespaced_pod("default", pod("web-0", "gpu-node-1", WEB))
    core.create_namespaced_pod("default", pod("other", "gpu-node-2", WEB))
    kubernetes.client.PolicyV1Api(kubesim.api_client()).create_namespaced_pod_disruption_budget(
        "default", {"metadata": {"name": "web"}, "spec": {"minAvailable": 2, "selector": {"matchLabels": WEB}}}
    )
    time.sleep(0.5)
    listed = nodes.list_node_pods(ListNodePodsInput(node="gpu-node-1"))
    assert listed.found and listed.ready and not listed.unschedulable
    [web] = listed.pods
    assert (web.namespace, web.name, web.labels) == ("default", "web-0", WEB)  # only the product's labels

    blocked = nodes.evict_pod(EvictPodInput(namespace="default", name="web-0", uid=web.uid))
    assert blocked.outcome == "blocked"
    assert blocked.message.startswith("blocked by PDB web: The disruption budget web needs 2 healthy pods")

    kubernetes.client.PolicyV1Api(kubesim.api_client()).delete_namespaced_pod_disruption_budget("web", "default")
    assert nodes.evict_pod(EvictPodInput(namespace="default", name="web-0", uid=web.uid)).outcome == "evicted"
    assert nodes.evict_pod(EvictPodInput(namespace="default", name="nope")).outcome == "gone"


def _with_body(status: int, body: dict[str, Any]) -> ApiException:
    failure = ApiException(status=status, reason="Too Many Requests")
    failure.body = json.dumps(body)
    return failure


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        pytest.param(
            429,
            {
                "message": "Cannot evict pod as it would violate the pod's disruption budget.",
                "details": {"causes": [{"reason": "DisruptionBudget", "message": DB_BUDGET}]},
            },
            f"blocked by PDB db: {DB_BUDGET}",
            id="budget",
        ),
        pytest.param(429, {"message": "too many requests, please try again later"}, None, id="throttled"),
        pytest.param(
            500,
            {"message": TWO_BUDGETS},
            f"blocked: {TWO_BUDGETS}",
            id="two-budgets",
        ),
        pytest.param(500, {"message": "etcd timeout"}, None, id="server-error"),
    ],
)
def test_blocked_message(status: int, body: dict[str, Any], expected: str | None) -> None:
    assert blocked_message(_with_body(status, body)) == expected
