"""Pods and nodes for the scheduler tests, shaped like the ones the product creates.

Instance pods are named `{isvc}-{component}-{index}-{role}-{n}` and labelled the way
ARCHITECTURE.md lists; the leader (or only) pod of each Instance carries spec 003's
topology spread constraint, workers carry required pod affinity to their leader.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from typing import Any

from kubesim.scheduler import ScheduleResult, schedule_pod
from kubesim.topology import NodeSpec, Taint, Topology, build_nodes

JSON = dict[str, Any]
ZONE = "topology.kubernetes.io/zone"
CLIQUE = "nvidia.com/gpu.clique"
MODEL_LABEL = "models.ome.io/qwen3-0-6b"


def spread_constraint(
    isvc: str, component: str, when: str = "DoNotSchedule", key: str = ZONE, **extra: Any
) -> JSON:
    constraint: JSON = {
        "maxSkew": 1,
        "topologyKey": key,
        "whenUnsatisfiable": when,
        "labelSelector": {
            "matchLabels": {"ome.io/inferenceservice": isvc, "ome.io/component": component},
            "matchExpressions": [{"key": "ome.io/role", "operator": "In", "values": ["leader", "default"]}],
        },
    }
    constraint.update(extra)
    return constraint


def instance_pod(
    isvc: str = "qwen3-0-6b",
    component: str = "engine",
    index: int = 0,
    role: str = "default",
    number: int = 0,
    gpus: int = 1,
    spread: str | None = "Required",
    spread_key: str = ZONE,
    topology_key: str | None = None,
    namespace: str = "spread-demo",
    revision: str = "rev-1",
    model_ready_affinity: bool = False,
    node_name: str | None = None,
    **spec_extra: Any,
) -> JSON:
    """One pod of an Instance; `spread` is the component's topologySpread (None for none)."""
    labels = {
        "ome.io/inferenceservice": isvc,
        "ome.io/component": component,
        "ome.io/instance-index": str(index),
        "ome.io/revision": revision,
        "ome.io/role": role,
    }
    spec: JSON = {
        "containers": [
            {
                "name": "engine",
                "image": "sglang:latest",
                "resources": {"requests": {"cpu": "4", "memory": "32Gi", "nvidia.com/gpu": str(gpus)},
                              "limits": {"nvidia.com/gpu": str(gpus)}},
            }
        ],
    }
    if spread is not None and role in ("leader", "default"):
        when = "DoNotSchedule" if spread == "Required" else "ScheduleAnyway"
        spec["topologySpreadConstraints"] = [spread_constraint(isvc, component, when, spread_key)]
    affinity: JSON = {}
    if model_ready_affinity:
        affinity["nodeAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": MODEL_LABEL, "operator": "In", "values": ["Ready"]}]}]
            }
        }
    if role == "worker" and topology_key:
        affinity["podAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "topologyKey": topology_key,
                    "labelSelector": {
                        "matchLabels": {
                            "ome.io/inferenceservice": isvc,
                            "ome.io/component": component,
                            "ome.io/instance-index": str(index),
                            "ome.io/role": "leader",
                        }
                    },
                }
            ]
        }
    if affinity:
        spec["affinity"] = affinity
    if node_name:
        spec["nodeName"] = node_name
    spec.update(spec_extra)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{isvc}-{component}-{index}-{role}-{number}",
            "namespace": namespace,
            "uid": f"uid-{namespace}-{isvc}-{component}-{index}-{role}-{number}-{revision}",
            "labels": labels,
        },
        "spec": spec,
        "status": {"phase": "Running" if node_name else "Pending"},
    }


def filler_pod(node_name: str, gpus: int = 8, name: str | None = None, namespace: str = "other") -> JSON:
    """A pod of someone else's that occupies GPUs on a node."""
    return {
        "metadata": {"name": name or f"filler-{node_name}", "namespace": namespace, "labels": {"app": "filler"}},
        "spec": {
            "nodeName": node_name,
            "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}],
        },
        "status": {"phase": "Running"},
    }


def bind(pod: JSON, node_name: str) -> JSON:
    bound = copy.deepcopy(pod)
    bound["spec"]["nodeName"] = node_name
    bound["status"] = {"phase": "Running"}
    return bound


def place_all(pods: Iterable[JSON], nodes: Sequence[JSON], existing: Sequence[JSON] = ()) -> tuple[list[ScheduleResult], list[JSON]]:
    """Schedule pods one after another, binding each placed pod, like kubesim's loop does."""
    cluster = list(existing)
    results: list[ScheduleResult] = []
    for pod in pods:
        result = schedule_pod(pod, nodes, cluster)
        results.append(result)
        if result.node_name is not None:
            cluster.append(bind(pod, result.node_name))
    return results, cluster


def zone_of(nodes: Sequence[JSON], node_name: str | None) -> str | None:
    for node in nodes:
        if node["metadata"]["name"] == node_name:
            return str(node["metadata"]["labels"].get(ZONE))
    return None


def nodes_of(text: str = "default") -> list[JSON]:
    return build_nodes(Topology.parse(text))


def explicit_nodes(*specs: NodeSpec) -> list[JSON]:
    return build_nodes(Topology(nodes=tuple(specs)))


def gpu_node(
    name: str,
    zone: str | None = None,
    gpus: int = 8,
    extra_labels: dict[str, str] | None = None,
    taints: Sequence[Taint] = (),
    unschedulable: bool = False,
    ready: bool = True,
) -> NodeSpec:
    labels = dict(extra_labels or {})
    if zone is not None:
        labels[ZONE] = zone
    return NodeSpec(
        name=name,
        labels=tuple(sorted(labels.items())),
        capacity=(("cpu", "96"), ("memory", "1024Gi"), ("nvidia.com/gpu", str(gpus)), ("pods", "110")),
        taints=tuple(taints),
        unschedulable=unschedulable,
        ready=ready,
    )
