"""InstanceSpec from the effective component: pod specs, spread, lifecycle settings."""

from __future__ import annotations

from typing import Any

import pytest

from models.inferenceservice import InferenceService
from models.instance import RestartPolicy, UpdateStrategyType
from models.resolution import component_revision, effective_component
from models.runtime import ServingRuntimeSpec
from planning.replica.budget import update_policy
from planning.replica.template import ClusterLifecycle, InstanceIdentity, instance_spec, pod_template

pytestmark = pytest.mark.unit

ZONE = "topology.kubernetes.io/zone"
CLIQUE = "nvidia.com/gpu.clique"


def isvc(engine: dict[str, Any], **spec: Any) -> InferenceService:
    return InferenceService.model_validate(
        {
            "metadata": {"name": "chat", "namespace": "prod"},
            "spec": {"model": {"name": "m"}, "runtime": {"name": "rt"}, "engine": engine, **spec},
        }
    )


RUNNER = {"name": "engine", "image": "sglang:1", "resources": {"limits": {"nvidia.com/gpu": "1"}}}


def build(
    engine: dict[str, Any], runtime: ServingRuntimeSpec | None = None, cluster: ClusterLifecycle | None = None
):  # type: ignore[no-untyped-def]
    service = isvc(engine)
    effective = effective_component(service, runtime, "engine")
    assert effective is not None
    digest = component_revision(service, runtime, "engine")
    identity = InstanceIdentity(
        "prod", "chat", "engine", 0, digest, f"chat-engine-rev-{digest}", isvc_uid="u1"
    )
    cluster = cluster or ClusterLifecycle()
    return instance_spec(
        identity, effective, cluster, update_policy(effective.lifecycle, cluster.update_policy)
    )


def test_single_pod_component() -> None:
    spec = build({"runner": RUNNER, "topologySpread": "Required", "topologySpreadKey": ZONE})
    assert spec.worker_count == 0 and spec.worker_pod_spec is None
    container = spec.leader_pod_spec["containers"][0]
    assert container == {
        "name": "engine",
        "image": "sglang:1",
        "resources": {"limits": {"nvidia.com/gpu": "1"}},
    }
    [constraint] = spec.leader_pod_spec["topologySpreadConstraints"]
    assert (constraint["topologyKey"], constraint["whenUnsatisfiable"]) == (ZONE, "DoNotSchedule")
    assert spec.topology_key is None
    assert spec.isvc_uid == "u1"


def test_leader_and_workers_merge_over_the_component_runner() -> None:
    spec = build(
        {
            "runner": {**RUNNER, "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "1"}]},
            "leader": {"runner": {"args": ["--leader"], "env": [{"name": "B", "value": "leader"}]}},
            "worker": {"size": 3, "runner": {"image": "sglang:worker"}},
            "topologyKey": CLIQUE,
            "topologySpread": "Preferred",
        }
    )
    assert spec.worker_count == 3
    leader = spec.leader_pod_spec["containers"][0]
    assert leader["args"] == ["--leader"]
    assert leader["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "leader"}]
    assert spec.worker_pod_spec is not None
    worker = spec.worker_pod_spec["containers"][0]
    assert worker["image"] == "sglang:worker"
    assert "topologySpreadConstraints" not in spec.worker_pod_spec
    [constraint] = spec.leader_pod_spec["topologySpreadConstraints"]
    assert (constraint["topologyKey"], constraint["whenUnsatisfiable"]) == (CLIQUE, "ScheduleAnyway")
    assert spec.topology_key == CLIQUE


def test_worker_size_defaults_to_one() -> None:
    spec = build({"runner": RUNNER, "leader": {}, "worker": {}})
    assert spec.worker_count == 1


def test_runtime_values_are_defaults() -> None:
    runtime = ServingRuntimeSpec.model_validate(
        {
            "schedulerName": "volcano",
            "engineConfig": {
                "runner": RUNNER,
                "topologySpread": "Preferred",
                "topologySpreadKey": ZONE,
                "lifecycle": {"instanceReadyTimeout": "45m", "restartPolicy": "None"},
            },
        }
    )
    spec = build({"topologySpread": "Required"}, runtime)
    [constraint] = spec.leader_pod_spec["topologySpreadConstraints"]
    assert constraint["whenUnsatisfiable"] == "DoNotSchedule"
    assert spec.leader_pod_spec["schedulerName"] == "volcano"
    assert spec.instance_ready_timeout_seconds == 2700.0
    assert spec.restart_policy == RestartPolicy.NONE


@pytest.mark.parametrize(
    ("component_timeout", "cluster_timeout", "expected"),
    [
        (None, 1800.0, 1800.0),
        ("45m", 1800.0, 2700.0),
        ("0s", 1800.0, 1800.0),
        (None, None, None),
    ],
)
def test_ready_timeout_resolution(
    component_timeout: str | None, cluster_timeout: float | None, expected: float | None
) -> None:
    lifecycle = {"instanceReadyTimeout": component_timeout} if component_timeout else {}
    spec = build(
        {"runner": RUNNER, "lifecycle": lifecycle},
        cluster=ClusterLifecycle(instance_ready_timeout_seconds=cluster_timeout),
    )
    assert spec.instance_ready_timeout_seconds == expected


def test_lifecycle_settings_reach_the_instance() -> None:
    spec = build(
        {
            "runner": RUNNER,
            "lifecycle": {"updateStrategy": {"type": "RecreatePod"}, "minReadySeconds": 20},
        },
        cluster=ClusterLifecycle(update_retry=None, drain_seconds=2.0),
    )
    assert spec.update_strategy_type == UpdateStrategyType.RECREATE_POD
    assert spec.min_ready_seconds == 20.0
    assert spec.update_retry is None
    assert spec.drain_seconds == 2.0


def test_user_labels_cannot_take_over_our_keys() -> None:
    spec = build({"runner": RUNNER, "labels": {"team": "a", "ome.io/component": "x"}})
    assert spec.labels == {"team": "a"}


def test_adding_a_spread_does_not_change_the_revision() -> None:
    plain = isvc({"runner": RUNNER})
    spread = isvc({"runner": RUNNER, "topologySpread": "Required", "topologySpreadKey": ZONE})
    assert component_revision(plain, None, "engine") == component_revision(spread, None, "engine")


def test_changing_topology_key_with_workers_rolls_a_revision() -> None:
    first = isvc({"runner": RUNNER, "leader": {}, "worker": {"size": 1}, "topologyKey": CLIQUE})
    second = isvc({"runner": RUNNER, "leader": {}, "worker": {"size": 1}, "topologyKey": ZONE})
    assert component_revision(first, None, "engine") != component_revision(second, None, "engine")


def test_pod_template_without_spread() -> None:
    service = isvc({"runner": RUNNER})
    effective = effective_component(service, None, "engine")
    assert effective is not None
    template = pod_template(effective, "chat", "engine")
    assert "topologySpreadConstraints" not in template.leader_pod_spec


def test_annotations_reach_pods_but_ours_do_not() -> None:
    spec = build(
        {
            "runner": RUNNER,
            "annotations": {"prometheus.io/scrape": "true", "ome.io/deploymentMode": "OMENative"},
        }
    )
    assert spec.annotations == {"prometheus.io/scrape": "true"}


def test_router_instances_do_not_spread() -> None:
    service = InferenceService.model_validate(
        {
            "metadata": {"name": "chat", "namespace": "prod"},
            "spec": {"router": {"runner": RUNNER, "topologySpread": "Required", "topologySpreadKey": ZONE}},
        }
    )
    effective = effective_component(service, None, "router")
    assert effective is not None
    assert "topologySpreadConstraints" not in pod_template(effective, "chat", "router").leader_pod_spec
    decoder = pod_template(effective, "chat", "decoder").leader_pod_spec
    assert decoder["topologySpreadConstraints"][0]["topologyKey"] == ZONE
