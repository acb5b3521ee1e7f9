"""Per-component Services, PodDisruptionBudgets, Deployments and InferenceReplicas."""

from __future__ import annotations

from typing import Any

import pytest

from models.inferenceservice import InferenceService
from models.resolution import inference_replica_spec
from planning.replica.budget import UpdatePolicy
from planning.replica.manifest import render_inference_replica
from planning.service.components import plan_components
from planning.service.objects import render_deployment, render_pdb, render_service

pytestmark = pytest.mark.unit

RUNNER = {"name": "engine", "image": "sglang:1"}


def plans(**spec: Any):  # type: ignore[no-untyped-def]
    service = InferenceService.model_validate(
        {"metadata": {"name": "chat", "namespace": "prod"}, "spec": spec}
    )
    return service, plan_components(service, None)


OWNER = {
    "apiVersion": "ome.io/v1beta1",
    "kind": "InferenceService",
    "name": "chat",
    "uid": "uid-1",
    "controller": True,
    "blockOwnerDeletion": True,
}


def test_service_selects_single_pod_serving_role() -> None:
    _, [plan] = plans(deploymentMode="OMENative", engine={"runner": RUNNER})
    service = render_service(plan, "chat", "prod", "uid-1")
    assert service["metadata"]["name"] == "chat-engine"
    assert service["metadata"]["ownerReferences"] == [OWNER]
    assert service["spec"]["selector"] == {
        "ome.io/inferenceservice": "chat",
        "ome.io/component": "engine",
        "ome.io/role": "default",
    }
    assert service["spec"]["ports"][0]["port"] == 8080


def test_service_selects_leaders_of_a_gang() -> None:
    _, [plan] = plans(engine={"runner": RUNNER, "leader": {}, "worker": {"size": 2}})
    assert render_service(plan, "chat", "prod", None)["spec"]["selector"]["ome.io/role"] == "leader"


@pytest.mark.parametrize(
    ("policy", "expected"),
    [(UpdatePolicy(), 1), (UpdatePolicy(max_unavailable=2), 2), (UpdatePolicy(max_unavailable="25%"), "25%")],
)
def test_pdb_budget(policy: UpdatePolicy, expected: int | str) -> None:
    _, [plan] = plans(deploymentMode="OMENative", engine={"runner": RUNNER})
    pdb = render_pdb(plan, "chat", "prod", "uid-1", policy)
    assert pdb["kind"] == "PodDisruptionBudget"
    assert pdb["spec"]["maxUnavailable"] == expected
    assert pdb["spec"]["selector"] == {
        "matchLabels": {"ome.io/inferenceservice": "chat", "ome.io/component": "engine"}
    }


def test_deployment_for_a_raw_component() -> None:
    _, [plan] = plans(
        engine={
            "runner": RUNNER,
            "topologySpread": "Required",
            "topologySpreadKey": "zone",
            "labels": {"team": "a"},
        }
    )
    deployment = render_deployment(plan, "chat", "prod", "uid-1", replicas=3)
    assert deployment["kind"] == "Deployment"
    assert deployment["spec"]["replicas"] == 3
    template = deployment["spec"]["template"]
    assert template["metadata"]["labels"] == {
        "ome.io/inferenceservice": "chat",
        "ome.io/component": "engine",
        "ome.io/role": "default",
        "ome.io/revision": plan.revision_hash,
        "team": "a",
    }
    assert "topologySpreadConstraints" not in template["spec"], "other modes ignore topologySpread"
    assert template["spec"]["containers"][0]["image"] == "sglang:1"


def test_inference_replica_object() -> None:
    service, _ = plans(deploymentMode="OMENative", engine={"runner": RUNNER, "minReplicas": 2})
    spec = inference_replica_spec(service, None, "engine")
    manifest = render_inference_replica(spec, "chat", "prod", "uid-1")
    assert manifest["kind"] == "InferenceReplica"
    assert manifest["metadata"]["name"] == "chat-engine"
    assert manifest["metadata"]["ownerReferences"] == [OWNER]
    assert manifest["spec"]["component"] == "engine"
    assert manifest["spec"]["replicas"] == 2
    assert "status" not in manifest
