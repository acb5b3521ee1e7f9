"""Kubernetes activities of a node drain: the pods on a node, and evicting one of them.

Cordoning is a merge patch of the Node's `spec.unschedulable` through `kube.patch_object`;
what is here is what that generic activity cannot do:

- `kube.list_node_pods` reads the node and lists the pods bound to it (field selector
  `spec.nodeName`, every namespace), each reduced to a `NodePod` (a node's pods as raw
  objects would put hundreds of kilobytes into the drain's history at every look).
- `kube.evict_pod` posts a policy/v1 Eviction, as `kubectl drain` does. A 429 from a
  PodDisruptionBudget is an answer, not a failure: it comes back as `blocked` with the
  budget's name and the server's message, so the drain waits it out on a timer and says why
  in its status. A 429 without a budget cause (API priority and fairness) stays a retryable
  `TooManyRequests`.
"""

from __future__ import annotations

import re
from typing import Any

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException
from temporalio import activity

from activities.kube_errors import api_errors, cap, is_conflict, status_of
from activities.kube_rest import KubeRest, collection_path
from models.kube_ops import (
    KUBE_EVICT_POD,
    KUBE_LIST_NODE_PODS,
    EvictPodInput,
    EvictPodResult,
    ListNodePodsInput,
    NodePod,
    NodePods,
)

PRODUCT_LABEL_PREFIX = "ome.io/"
_BUDGET_NAME = re.compile(r"disruption budget (\S+)")
MULTIPLE_BUDGETS = "more than one PodDisruptionBudget"
"""The API server refuses to evict a pod that two budgets select (HTTP 500): it stays
blocked, with the server's message, until someone fixes the budgets."""


def node_pod(pod: dict[str, Any]) -> NodePod:
    """`pod` as a drain sees it."""
    metadata = pod.get("metadata") or {}
    labels = {k: str(v) for k, v in (metadata.get("labels") or {}).items() if k.startswith(PRODUCT_LABEL_PREFIX)}
    owner = next((o for o in metadata.get("ownerReferences") or [] if o.get("controller")), None)
    return NodePod(
        namespace=str(metadata.get("namespace") or ""),
        name=str(metadata.get("name") or ""),
        uid=str(metadata.get("uid") or ""),
        labels=labels,
        phase=str((pod.get("status") or {}).get("phase") or ""),
        terminating=bool(metadata.get("deletionTimestamp")),
        owner_kind=str((owner or {}).get("kind") or ""),
    )


def blocked_message(error: ApiException) -> str | None:
    """`blocked by PDB <name>: <message>` when a disruption budget refused the eviction."""
    status = status_of(error)
    message = str(status.get("message") or error.reason or "")
    if error.status == 500 and MULTIPLE_BUDGETS in message:
        return cap(f"blocked: {message}", 500)
    if error.status != 429:
        return None
    causes = (status.get("details") or {}).get("causes") or []
    budget = next((c for c in causes if c.get("reason") == "DisruptionBudget"), None)
    if budget is None:
        return None
    cause = str(budget.get("message") or message)
    found = _BUDGET_NAME.search(cause)
    name = found.group(1) if found else "(unnamed)"
    return cap(f"blocked by PDB {name}: {cause}", 500)


class NodeActivities:
    """The drain's node activities, bound to one cluster's API client."""

    def __init__(self, api_client: ApiClient) -> None:
        self.rest = KubeRest(api_client)

    def activities(self) -> list[Any]:
        return [self.list_node_pods, self.evict_pod]

    @activity.defn(name=KUBE_LIST_NODE_PODS)
    def list_node_pods(self, request: ListNodePodsInput) -> NodePods:
        with api_errors(f"read node {request.node} and its pods"):
            node = self.rest.get_or_none(f"/api/v1/nodes/{request.node}")
            if node is None:
                return NodePods(found=False)
            listed = self.rest.get(
                collection_path("v1", "pods", None), [("fieldSelector", f"spec.nodeName={request.node}")]
            )
        pods = sorted((node_pod(p) for p in listed.get("items") or []), key=lambda p: (p.namespace, p.name))
        conditions = (node.get("status") or {}).get("conditions") or []
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
        unschedulable = bool((node.get("spec") or {}).get("unschedulable"))
        return NodePods(found=True, unschedulable=unschedulable, ready=ready, pods=pods)

    @activity.defn(name=KUBE_EVICT_POD)
    def evict_pod(self, request: EvictPodInput) -> EvictPodResult:
        body: dict[str, Any] = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": request.name, "namespace": request.namespace},
        }
        if request.uid:
            body["deleteOptions"] = {"preconditions": {"uid": request.uid}}
        path = f"{collection_path('v1', 'pods', request.namespace)}/{request.name}/eviction"
        with api_errors(f"evict pod {request.namespace}/{request.name}"):
            try:
                self.rest.request("POST", path, body=body)
            except ApiException as error:
                # Gone, or the name now belongs to another pod (uid precondition): nothing to evict.
                if error.status == 404 or (is_conflict(error) and request.uid):
                    return EvictPodResult(outcome="gone")
                blocked = blocked_message(error)
                if blocked is None:
                    raise
                return EvictPodResult(outcome="blocked", message=blocked)
        return EvictPodResult(outcome="evicted")
