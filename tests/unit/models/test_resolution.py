"""Effective component specs, deployment modes and revisions (models.resolution)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from models.inferenceservice import ComponentName, InferenceService
from models.resolution import (
    component_revision,
    declares_omenative_explicitly,
    deployment_mode,
    effective_component,
    inference_replica_spec,
    revision_name,
)
from models.runtime import ServingRuntime, ServingRuntimeSpec
from tests.unit.models.spec_examples import MISTRAL_PD, QWEN_SPREAD

pytestmark = pytest.mark.unit

# A catalog-like runtime for the spread example: it sets pods and a spread default of its own.
SRT_QWEN: dict[str, Any] = {
    "apiVersion": "ome.io/v1beta1",
    "kind": "ServingRuntime",
    "metadata": {"name": "srt-qwen3-0-6b"},
    "spec": {
        "supportedModelFormats": [{"name": "safetensors", "autoSelect": True}],
        "protocolVersions": ["openAI"],
        "engineConfig": {
            "runner": {
                "image": "docker.io/lmsysorg/sglang:v0.4.6",
                "args": ["--port", "8080"],
                "env": [{"name": "A", "value": "runtime"}, {"name": "B", "value": "runtime"}],
                "resources": {"limits": {"nvidia.com/gpu": "1"}},
            },
            "topologySpread": "Preferred",
            "lifecycle": {"instanceReadyTimeout": "45m", "updateStrategy": {"type": "RecreatePod"}},
        },
    },
}


def isvc(manifest: dict[str, Any]) -> InferenceService:
    return InferenceService.model_validate(manifest)


def runtime(spec: dict[str, Any]) -> ServingRuntimeSpec:
    return ServingRuntimeSpec.model_validate(spec)


def test_spread_example_effective_spec_matches_step_2() -> None:
    """003 Step 2: SPREAD Required, SPREAD-KEY topology.kubernetes.io/zone, TOPOLOGY-KEY <none>."""
    service = isvc(QWEN_SPREAD)
    rt = ServingRuntime.model_validate(SRT_QWEN).spec
    effective = effective_component(service, rt, "engine")
    assert effective is not None
    assert effective.topology_spread == "Required"  # the InferenceService overrides "Preferred"
    assert effective.topology_spread_key == "topology.kubernetes.io/zone"
    assert effective.topology_key is None
    replica = inference_replica_spec(service, rt, "engine")
    wire = replica.to_manifest()
    assert (wire["topologySpread"], wire["topologySpreadKey"], wire.get("topologyKey")) == (
        "Required", "topology.kubernetes.io/zone", None)
    assert replica.replicas == 2 and replica.component == "engine"
    assert replica.revision.startswith("qwen3-0-6b-engine-rev-")
    assert replica.runner is not None and replica.runner.image == "docker.io/lmsysorg/sglang:v0.4.6"


def test_merge_is_field_by_field() -> None:
    manifest = copy.deepcopy(QWEN_SPREAD)
    manifest["spec"]["engine"]["runner"] = {"env": [{"name": "B", "value": "isvc"}, {"name": "C", "value": "isvc"}]}
    manifest["spec"]["engine"]["lifecycle"] = {"updateStrategy": {"rollingUpdate": {"maxSurge": 1}}}
    effective = effective_component(isvc(manifest), runtime(SRT_QWEN["spec"]), "engine")
    assert effective is not None and effective.runner is not None and effective.lifecycle is not None
    # Runner fields the InferenceService leaves out come from the runtime.
    assert effective.runner.image == "docker.io/lmsysorg/sglang:v0.4.6"
    assert effective.runner.args == ["--port", "8080"]
    assert [(e.name, e.value) for e in effective.runner.env or []] == [("A", "runtime"), ("B", "isvc"), ("C", "isvc")]
    # Nested blocks merge too: the runtime's strategy type stays beside the ISVC's budget.
    strategy = effective.lifecycle.update_strategy
    assert strategy is not None and strategy.type == "RecreatePod"
    assert strategy.rolling_update is not None and strategy.rolling_update.max_surge == 1
    assert effective.lifecycle.instance_ready_timeout == "45m"
    assert effective.min_replicas == 2


def test_component_declared_by_neither_is_none() -> None:
    assert effective_component(isvc(QWEN_SPREAD), runtime(SRT_QWEN["spec"]), "decoder") is None
    with pytest.raises(ValueError, match="spec.decoder"):
        component_revision(isvc(QWEN_SPREAD), None, "decoder")


def test_runtime_only_component_is_effective() -> None:
    rt = runtime({"routerConfig": {"runner": {"image": "router:1"}}, "schedulerName": "gang"})
    effective = effective_component(isvc(QWEN_SPREAD), rt, "router")
    assert effective is not None and effective.runner is not None and effective.runner.image == "router:1"
    assert effective.scheduler_name == "gang"


def test_default_lifecycle_values() -> None:
    service = isvc(QWEN_SPREAD)
    effective = effective_component(service, None, "engine")
    assert effective is not None and effective.lifecycle is None
    from models.inferenceservice import LifecycleSpec, UpdateStrategy

    assert LifecycleSpec().effective_instance_ready_timeout == "30m"
    assert UpdateStrategy().effective_type == "SurgeThenDrain"


def _manifest(mode: str | None = None, annotation: str | None = None, multi_pod: bool = False) -> dict[str, Any]:
    manifest = copy.deepcopy(QWEN_SPREAD)
    manifest["spec"].pop("deploymentMode")
    if mode is not None:
        manifest["spec"]["deploymentMode"] = mode
    if annotation is not None:
        manifest["spec"]["engine"]["annotations"] = {"ome.io/deploymentMode": annotation}
    if multi_pod:
        manifest["spec"]["engine"]["worker"] = {"size": 2}
    return manifest


MODE_ROWS: list[tuple[str, dict[str, Any], dict[str, Any] | None, str, bool]] = [
    # (case, manifest, runtime spec, resolved mode, explicit OMENative for rollout groups)
    ("nothing set runs a Deployment", _manifest(), None, "RawDeployment", False),
    ("spec.deploymentMode", _manifest(mode="OMENative"), None, "OMENative", True),
    ("component annotation", _manifest(annotation="OMENative"), None, "OMENative", True),
    ("annotation wins over spec", _manifest(mode="OMENative", annotation="RawDeployment"), None, "RawDeployment", False),
    ("annotation MultiNode", _manifest(mode="OMENative", annotation="MultiNode"), None, "MultiNode", False),
    ("worker makes OMENative", _manifest(multi_pod=True), None, "OMENative", False),
    ("spec wins over worker", _manifest(mode="RawDeployment", multi_pod=True), None, "RawDeployment", False),
    ("runtime worker makes OMENative", _manifest(), {"engineConfig": {"worker": {"size": 1}}}, "OMENative", False),
    ("runtime annotation wins over spec", _manifest(mode="OMENative"),
     {"engineConfig": {"annotations": {"ome.io/deploymentMode": "RawDeployment"}}}, "RawDeployment", True),
    ("isvc annotation wins over runtime annotation", _manifest(annotation="OMENative"),
     {"engineConfig": {"annotations": {"ome.io/deploymentMode": "MultiNode"}}}, "OMENative", True),
    ("runtime annotation alone", _manifest(),
     {"engineConfig": {"annotations": {"ome.io/deploymentMode": "OMENative"}}}, "OMENative", False),
]


@pytest.mark.parametrize(("case", "manifest", "rt", "mode", "explicit"), MODE_ROWS, ids=[r[0] for r in MODE_ROWS])
def test_deployment_mode(case: str, manifest: dict[str, Any], rt: dict[str, Any] | None, mode: str, explicit: bool) -> None:
    service = isvc(manifest)
    assert deployment_mode(service, runtime(rt) if rt is not None else None, "engine") == mode
    assert declares_omenative_explicitly(service, "engine") is explicit


def test_router_with_worker_in_runtime_is_not_multi_pod_omenative() -> None:
    # Only an engine or a decoder becomes OMENative through a leader or worker.
    manifest = _manifest()
    manifest["spec"]["router"] = {"worker": {"size": 1}}
    assert deployment_mode(isvc(manifest), None, "router") == "RawDeployment"


def _edit(path: list[str], value: Any, base: dict[str, Any] | None = None) -> dict[str, Any]:
    manifest = copy.deepcopy(base if base is not None else MISTRAL_PD)
    node = manifest
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value
    return manifest


MULTI_POD = _edit(["spec", "engine", "worker"], {"size": 1})
REVISION_ROWS: list[tuple[str, dict[str, Any], dict[str, Any], ComponentName, bool]] = [
    # (case, before, after, component, revision changes)
    ("runner image", MISTRAL_PD, _edit(["spec", "engine", "runner"], {"image": "x:2"}), "engine", True),
    ("runner args", MISTRAL_PD, _edit(["spec", "engine", "runner"], {"args": ["--tp", "2"]}), "engine", True),
    ("worker size", MULTI_POD, _edit(["spec", "engine", "worker"], {"size": 2}), "engine", True),
    ("runtime name", MISTRAL_PD, _edit(["spec", "runtime"], {"name": "srt-other"}), "engine", True),
    ("pairing protocol on engine", MISTRAL_PD, _edit(["spec", "rollout", "pairingProtocol"], "kv-v1"), "engine", True),
    ("pairing protocol on decoder", MISTRAL_PD, _edit(["spec", "rollout", "pairingProtocol"], "kv-v1"), "decoder", True),
    ("pairing protocol not on router", MISTRAL_PD, _edit(["spec", "rollout", "pairingProtocol"], "kv-v1"), "router", False),
    ("topologyKey with workers", MULTI_POD, _edit(["spec", "engine", "topologyKey"], "rack", MULTI_POD), "engine", True),
    ("topologyKey without workers", MISTRAL_PD, _edit(["spec", "engine", "topologyKey"], "rack"), "engine", False),
    ("topologySpread", MISTRAL_PD, _edit(["spec", "engine", "topologySpread"], "Required"), "engine", False),
    ("topologySpreadKey", MISTRAL_PD, _edit(["spec", "engine", "topologySpreadKey"], "zone"), "engine", False),
    ("replica counts", MISTRAL_PD, _edit(["spec", "engine", "maxReplicas"], 8), "engine", False),
    ("lifecycle", MISTRAL_PD, _edit(["spec", "engine", "lifecycle"], {"minReadySeconds": 30}), "engine", False),
    ("other component's runner", MISTRAL_PD, _edit(["spec", "decoder", "runner"], {"image": "d:2"}), "engine", False),
]


@pytest.mark.parametrize(("case", "before", "after", "component", "changes"), REVISION_ROWS,
                         ids=[r[0] for r in REVISION_ROWS])
def test_revision(case: str, before: dict[str, Any], after: dict[str, Any], component: ComponentName, changes: bool) -> None:
    old_revision = component_revision(isvc(before), None, component)
    new_revision = component_revision(isvc(after), None, component)
    assert (old_revision != new_revision) is changes
    assert len(new_revision) == 8 and int(new_revision, 16) >= 0


def test_revision_changes_with_runtime_pods_and_is_stable() -> None:
    service = isvc(QWEN_SPREAD)
    first = component_revision(service, runtime(SRT_QWEN["spec"]), "engine")
    assert first == component_revision(isvc(copy.deepcopy(QWEN_SPREAD)), runtime(SRT_QWEN["spec"]), "engine")
    changed = copy.deepcopy(SRT_QWEN["spec"])
    changed["engineConfig"]["runner"]["image"] = "docker.io/lmsysorg/sglang:v0.4.7"
    assert component_revision(service, runtime(changed), "engine") != first
    unchanged_pods = copy.deepcopy(SRT_QWEN["spec"])
    unchanged_pods["engineConfig"]["lifecycle"]["instanceReadyTimeout"] = "1h"
    assert component_revision(service, runtime(unchanged_pods), "engine") == first
    assert revision_name("chat", "engine", first) == f"chat-engine-rev-{first}"


EXAMPLE_MODES = [
    ("000 chat engine", "000-chat-capacity-factors", "engine", "RawDeployment"),
    ("001 tree router", "001-chat-omenative-tree", "router", "OMENative"),
    ("001 tree engine", "001-chat-omenative-tree", "engine", "OMENative"),
    ("001 annotated router", "001-chat-component-annotation", "router", "OMENative"),
    ("003 qwen engine", "003-qwen-spread", "engine", "OMENative"),
    ("004 mistral decoder", "004-mistral-pd", "decoder", "OMENative"),
]


@pytest.mark.parametrize(("case", "example", "component", "mode"), EXAMPLE_MODES, ids=[r[0] for r in EXAMPLE_MODES])
def test_spec_example_modes(case: str, example: str, component: ComponentName, mode: str) -> None:
    from tests.unit.models.spec_examples import EXAMPLES

    manifest = next(m for name, m, _ in EXAMPLES if name == example)
    assert deployment_mode(isvc(manifest), None, component) == mode


def test_tree_example_engine_instances_are_a_leader_and_a_worker() -> None:
    from tests.unit.models.spec_examples import CHAT_OMENATIVE_TREE

    replica = inference_replica_spec(isvc(CHAT_OMENATIVE_TREE), None, "engine")
    assert (replica.replicas, replica.pods_per_instance) == (2, 2)
    assert inference_replica_spec(isvc(CHAT_OMENATIVE_TREE), None, "router").pods_per_instance == 1
