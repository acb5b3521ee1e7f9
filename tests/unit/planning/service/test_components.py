"""Components, modes and revisions of an InferenceService (spec 001 "Turn on OMENative")."""

from __future__ import annotations

from typing import Any

import pytest

from models.inferenceservice import InferenceService
from models.resolution import multinode_message
from models.runtime import ServingRuntimeSpec
from planning.service.components import plan_components, removed_components

pytestmark = pytest.mark.unit

RUNNER = {"image": "sglang:1"}


def isvc(**spec: Any) -> InferenceService:
    return InferenceService.model_validate({"metadata": {"name": "chat", "namespace": "prod"}, "spec": spec})


@pytest.mark.parametrize(
    ("name", "spec", "runtime", "modes"),
    [
        (
            "single-pod engine runs as a Deployment",
            {"engine": {"runner": RUNNER}},
            None,
            {"engine": "RawDeployment"},
        ),
        (
            "multi-node engine is OMENative",
            {"engine": {"runner": RUNNER, "worker": {"size": 1}}},
            None,
            {"engine": "OMENative"},
        ),
        (
            "spec.deploymentMode applies to every component",
            {"deploymentMode": "OMENative", "engine": {"runner": RUNNER}, "router": {"runner": RUNNER}},
            None,
            {"router": "OMENative", "engine": "OMENative"},
        ),
        (
            "component annotation wins",
            {
                "deploymentMode": "OMENative",
                "engine": {"runner": RUNNER},
                "router": {"runner": RUNNER, "annotations": {"ome.io/deploymentMode": "RawDeployment"}},
            },
            None,
            {"router": "RawDeployment", "engine": "OMENative"},
        ),
        (
            "runtime declares the decoder",
            {"engine": {"runner": RUNNER}},
            {"decoderConfig": {"runner": RUNNER, "leader": {}, "worker": {"size": 2}}},
            {"engine": "RawDeployment", "decoder": "OMENative"},
        ),
        (
            "MultiNode pin is kept",
            {
                "engine": {
                    "runner": RUNNER,
                    "worker": {},
                    "annotations": {"ome.io/deploymentMode": "MultiNode"},
                }
            },
            None,
            {"engine": "MultiNode"},
        ),
    ],
)
def test_modes(
    name: str, spec: dict[str, Any], runtime: dict[str, Any] | None, modes: dict[str, str]
) -> None:
    runtime_spec = ServingRuntimeSpec.model_validate(runtime) if runtime is not None else None
    plans = plan_components(isvc(**spec), runtime_spec)
    assert {plan.name: plan.mode for plan in plans} == modes, name


def test_creation_order_is_router_engine_decoder() -> None:
    plans = plan_components(
        isvc(engine={"runner": RUNNER}, decoder={"runner": RUNNER}, router={"runner": RUNNER}), None
    )
    assert [plan.name for plan in plans] == ["router", "engine", "decoder"]


def test_revision_name_and_replica_bounds() -> None:
    [plan] = plan_components(isvc(engine={"runner": RUNNER, "minReplicas": 2, "maxReplicas": 4}), None)
    assert plan.revision_name == f"chat-engine-rev-{plan.revision_hash}"
    assert len(plan.revision_hash) == 8
    assert (plan.min_replicas, plan.max_replicas) == (2, 4)


def test_removed_components_include_mode_changes() -> None:
    before = plan_components(isvc(engine={"runner": RUNNER}, router={"runner": RUNNER}), None)
    after = plan_components(isvc(deploymentMode="OMENative", engine={"runner": RUNNER}), None)
    removed = removed_components(before, after)
    assert {(plan.name, plan.mode) for plan in removed} == {
        ("router", "RawDeployment"),
        ("engine", "RawDeployment"),
    }


def test_multinode_message_names_the_field_and_fix() -> None:
    message = multinode_message("engine")
    assert 'spec.engine.annotations["ome.io/deploymentMode"] is MultiNode' in message
    assert "remove the annotation" in message


def test_runtime_only_component_runs_with_runtime_defaults() -> None:
    runtime = ServingRuntimeSpec.model_validate(
        {"engineConfig": {"runner": RUNNER, "minReplicas": 2, "topologySpread": "Preferred"}}
    )
    [plan] = plan_components(isvc(deploymentMode="OMENative"), runtime)
    assert (plan.name, plan.mode, plan.min_replicas) == ("engine", "OMENative", 2)
    assert plan.effective.topology_spread == "Preferred"


def test_isvc_values_override_runtime_defaults() -> None:
    runtime = ServingRuntimeSpec.model_validate({"engineConfig": {"runner": RUNNER, "minReplicas": 2}})
    [plan] = plan_components(isvc(engine={"minReplicas": 3}), runtime)
    assert plan.min_replicas == 3
