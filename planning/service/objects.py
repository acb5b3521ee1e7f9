"""Per-component Kubernetes objects of an InferenceService, rendered as manifests.

- A Service `{isvc}-{component}` selecting the component's serving pods: the leader of a
  multi-pod Instance, the only pod of a single-pod one, the pods of a Deployment. Pods
  are Ready only once the `ome.io/serving` readiness gate is True, so Service endpoints
  follow serving, and a drain takes a pod out before it is deleted. (Each Instance also
  has its own headless Service for its leader's address; the Instance renders that one.)
- For an OMENative component, a PodDisruptionBudget over all its pods: the strategy's
  `maxUnavailable` when it sets one, else 1 (a voluntary eviction of one pod of a gang
  already takes the whole Instance out of service).
- For a RawDeployment component, a Deployment whose update is a plain Deployment update.

Every object is owned by the InferenceService object, so deleting it cleans up.
"""

from __future__ import annotations

from typing import Any

from models.pods import LABEL_REVISION, LABEL_ROLE
from planning.objects import component_labels, object_metadata, service_name
from planning.replica.budget import UpdatePolicy
from planning.replica.template import pod_template
from planning.service.components import ComponentPlan

SERVING_PORT = 8080
"""OME's serving containers listen on 8080; the Service exposes it under the same number."""


def _metadata(name: str, namespace: str, isvc: str, component: str, uid: str | None) -> dict[str, Any]:
    return object_metadata(name, namespace, component_labels(isvc, component), isvc, uid)


def serving_role(plan: ComponentPlan) -> str:
    """The pod role that serves requests: the leader of a gang, else the only pod.

    A Service selector can only match labels exactly, so it names one role; a component
    changing shape (gaining workers) changes its revision and the selector with it.
    """
    return "leader" if plan.omenative and plan.multi_pod else "default"


def render_service(plan: ComponentPlan, isvc: str, namespace: str, uid: str | None) -> dict[str, Any]:
    selector = component_labels(isvc, plan.name)
    selector[LABEL_ROLE] = serving_role(plan)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(service_name(isvc, plan.name), namespace, isvc, plan.name, uid),
        "spec": {
            "selector": selector,
            "ports": [{"name": "http", "port": SERVING_PORT, "targetPort": SERVING_PORT, "protocol": "TCP"}],
        },
    }


def render_pdb(
    plan: ComponentPlan, isvc: str, namespace: str, uid: str | None, policy: UpdatePolicy
) -> dict[str, Any]:
    max_unavailable: int | str = 1 if policy.max_unavailable is None else policy.max_unavailable
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _metadata(service_name(isvc, plan.name), namespace, isvc, plan.name, uid),
        "spec": {
            "maxUnavailable": max_unavailable,
            "selector": {"matchLabels": component_labels(isvc, plan.name)},
        },
    }


def render_deployment(
    plan: ComponentPlan, isvc: str, namespace: str, uid: str | None, replicas: int
) -> dict[str, Any]:
    """A RawDeployment component: one pod spec, `replicas` pods, rolling update defaults."""
    template = pod_template(plan.effective, isvc, plan.name)
    # Other modes ignore topologySpread (spec 003), so the Deployment's pods carry none.
    pod_spec = {
        key: value for key, value in template.leader_pod_spec.items() if key != "topologySpreadConstraints"
    }
    pod_labels = component_labels(isvc, plan.name)
    pod_labels[LABEL_ROLE] = "default"
    pod_labels[LABEL_REVISION] = plan.revision_hash
    pod_labels.update({k: v for k, v in (plan.effective.labels or {}).items() if not k.startswith("ome.io/")})
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(service_name(isvc, plan.name), namespace, isvc, plan.name, uid),
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": component_labels(isvc, plan.name)},
            "template": {"metadata": {"labels": pod_labels}, "spec": pod_spec},
        },
    }
