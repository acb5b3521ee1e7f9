"""Every built-in object kubesim serves validates against the pinned Kubernetes OpenAPI schema
(kubernetes-validate, strict: no unknown fields), and carries every field the official
client's models require (deserialising it with client-side validation on)."""

from __future__ import annotations

import kubernetes
import kubernetes_validate
import pytest

from kubesim.handle import KubeSim
from tests.kubesim.helpers import is_ready, pod_body, wait_for

KUBERNETES_VERSION = "1.37.0"
GROUPS = {
    "deployments": "apps",
    "replicasets": "apps",
    "endpointslices": "discovery.k8s.io",
    "poddisruptionbudgets": "policy",
    "leases": "coordination.k8s.io",
    "customresourcedefinitions": "apiextensions.k8s.io",
}
# (list call on the client, model name) per built-in kind kubesim serves.
MODELS = {
    "namespaces": "V1Namespace",
    "nodes": "V1Node",
    "pods": "V1Pod",
    "services": "V1Service",
    "endpoints": "V1Endpoints",
    "configmaps": "V1ConfigMap",
    "secrets": "V1Secret",
    "events": "CoreV1Event",
    "deployments": "V1Deployment",
    "replicasets": "V1ReplicaSet",
    "endpointslices": "V1EndpointSlice",
    "poddisruptionbudgets": "V1PodDisruptionBudget",
    "leases": "V1Lease",
    "customresourcedefinitions": "V1CustomResourceDefinition", "serviceaccounts": "V1ServiceAccount",
}


def _populate(sim: KubeSim) -> None:
    api = sim.api_client()
    core, apps = kubernetes.client.CoreV1Api(api), kubernetes.client.AppsV1Api(api)
    sim.set_image_behavior("crash:1", crash=True)
    sim.set_image_behavior("nopull:1", fail_pull=True)
    core.create_namespaced_service(
        "default",
        {
            "metadata": {"name": "svc"},
            "spec": {"selector": {"app": "w"}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]},
        },
    )
    apps.create_namespaced_deployment(
        "default",
        {
            "metadata": {"name": "w"},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "w"}},
                "template": {
                    "metadata": {"labels": {"app": "w"}},
                    "spec": {
                        "containers": [
                            {
                                "name": "c",
                                "image": "w:1",
                                "ports": [{"containerPort": 8080}],
                                "resources": {"limits": {"nvidia.com/gpu": "1", "cpu": "1", "memory": "1Gi"}},
                            }
                        ],
                        "readinessGates": [{"conditionType": "ome.io/serving"}],
                    },
                },
            },
        },
    )
    core.create_namespaced_pod("default", pod_body("crashing", image="crash:1"))
    core.create_namespaced_pod("default", pod_body("nopull", image="nopull:1"))
    core.create_namespaced_pod(
        "default", pod_body("init", initContainers=[{"name": "setup", "image": "i:1"}])
    )
    core.create_namespaced_pod("default", pod_body("unschedulable", gpus=100))
    core.create_namespaced_secret("default", {"metadata": {"name": "s"}, "stringData": {"k": "v"}})
    core.create_namespaced_config_map("default", {"metadata": {"name": "c"}, "data": {"k": "v"}})
    kubernetes.client.PolicyV1Api(api).create_namespaced_pod_disruption_budget(
        "default",
        {
            "metadata": {"name": "p"},
            "spec": {"minAvailable": "50%", "selector": {"matchLabels": {"app": "w"}}},
        },
    )
    kubernetes.client.CoordinationV1Api(api).create_namespaced_lease(
        "default", {"metadata": {"name": "l"}, "spec": {"holderIdentity": "me", "leaseDurationSeconds": 15}}
    )
    wait_for(lambda: is_ready(core.read_namespaced_pod("init", "default")), what="init pod ready")
    wait_for(
        lambda: (
            (s := core.read_namespaced_pod("crashing", "default").status.container_statuses)
            and s[0].restart_count >= 1
        ),
        what="crash loop",
    )
    sim.fail_node("gpu-node-4")
    wait_for(lambda: core.read_node("gpu-node-4").spec.taints, what="tainted node")


@pytest.fixture(scope="module")
def served() -> dict[str, list[dict]]:
    sim = KubeSim(topology="zones=2,nodes-per-zone=2,gpus=8", crds="product").start()
    try:
        _populate(sim)
        out: dict[str, list[dict]] = {}
        for plural in MODELS:
            group = GROUPS.get(plural, "")
            out[plural] = sim.objects(group, plural)
        return out
    finally:
        sim.stop()


@pytest.mark.parametrize("plural", sorted(MODELS))
def test_served_objects_validate_strictly(served: dict[str, list[dict]], plural: str) -> None:
    objects = served[plural]
    assert objects, f"the scenario produced no {plural}"
    for obj in objects:
        try:
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(
                f"{plural}/{obj['metadata']['name']} does not validate: {exc.message} at "
                f"{'.'.join(str(p) for p in exc.path)}"
            )


@pytest.mark.parametrize("plural", sorted(MODELS))
def test_served_objects_satisfy_client_models(served: dict[str, list[dict]], plural: str) -> None:
    client = kubernetes.client.ApiClient()
    for obj in served[plural]:
        model = client._ApiClient__deserialize(obj, MODELS[plural])  # the client's own deserialiser
        assert model.metadata.name == obj["metadata"]["name"]
