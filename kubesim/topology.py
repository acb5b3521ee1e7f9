"""Shape of the simulated GPU cluster and the Node objects kubesim serves for it.

A `Topology` is either a generated layout (zones x nodes per zone x GPUs per node, racks
per zone, optional CPU-only nodes) or an explicit list of nodes read from YAML for layouts
the generator cannot express (missing labels, odd capacities, pre-set taints). It is pure
data: `build_nodes` turns it into Kubernetes `v1/Node` JSON dicts that the API server
stores as-is, so the same labels the product selects on (zone, rack, NVLink clique) exist
in the simulation.

Generated nodes are numbered round-robin across zones (`gpu-node-1` in `zone-a`,
`gpu-node-2` in `zone-b`, ...), which is the layout the spread walkthrough of spec 003
shows: two spread Instances land on `gpu-node-1` and `gpu-node-2` in different zones.
"""

from __future__ import annotations

import os
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from kubesim.openapi import schema_version

ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"
HOSTNAME_LABEL = "kubernetes.io/hostname"
# No upstream label names a rack; this one follows the topology.kubernetes.io family so a
# topologySpreadKey / topologyKey on racks reads naturally.
RACK_LABEL = "topology.kubernetes.io/rack"
CLIQUE_LABEL = "nvidia.com/gpu.clique"
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
GPU_COUNT_LABEL = "nvidia.com/gpu.count"
GPU_RESOURCE = "nvidia.com/gpu"

# A fixed instant keeps build_nodes deterministic; the API server may pass its own clock.
DEFAULT_TIMESTAMP = "2026-01-01T00:00:00Z"
# Kubelets run the release the API server reports (the served OpenAPI schema's), within any skew policy.
_KUBELET_VERSION = f"v{schema_version()}-kubesim"
_VALID_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


class TopologyError(ValueError):
    """A topology description that cannot be turned into nodes; the message names the fix."""


@dataclass(frozen=True)
class Taint:
    """A node taint, as in `spec.taints` of a Node."""

    key: str
    effect: str
    value: str = ""

    def to_dict(self) -> dict[str, str]:
        taint = {"key": self.key, "effect": self.effect}
        if self.value:
            taint["value"] = self.value
        return taint


@dataclass(frozen=True)
class NodeSpec:
    """One explicitly listed node: its name, labels, taints and capacity.

    Labels and capacity are tuples of pairs so the dataclass stays hashable and immutable.
    """

    name: str
    labels: tuple[tuple[str, str], ...] = ()
    taints: tuple[Taint, ...] = ()
    capacity: tuple[tuple[str, str], ...] = ()
    unschedulable: bool = False
    ready: bool = True


@dataclass(frozen=True)
class Topology:
    """A small GPU cluster.

    With `nodes` empty the layout is generated from the counts below; with `nodes` set,
    exactly those nodes exist and the counts are ignored.
    """

    zones: int = 3
    """Number of zones, named zone-a, zone-b, ...; three is the smallest layout where a
    spread over zones has a choice after one zone is lost."""
    nodes_per_zone: int = 2
    gpus_per_node: int = 8
    """Eight GPUs is one HGX board, the usual unit of an NVLink domain."""
    racks_per_zone: int = 1
    """Racks split a zone's nodes into contiguous blocks; each rack is one NVLink clique."""
    cpu_per_node: str = "96"
    memory_per_node: str = "1024Gi"
    pods_per_node: int = 110
    """The kubelet's default maxPods."""
    cpu_nodes: int = 0
    """Extra nodes without GPUs (for gateways, routers and anything not GPU-bound)."""
    region: str = "region-1"
    gpu_product: str = "NVIDIA-H100-80GB-HBM3"
    node_prefix: str = "gpu-node-"
    cpu_node_prefix: str = "cpu-node-"
    nodes: tuple[NodeSpec, ...] = field(default=())

    @staticmethod
    def default() -> Topology:
        """Three zones of two 8-GPU nodes: small enough for fast tests, big enough to spread."""
        return Topology()

    @staticmethod
    def parse(text: str) -> Topology:
        """Read `zones=3,nodes-per-zone=4,gpus=8` or a path to a YAML file.

        The YAML file is a mapping with either the same keys as the inline form or a
        `nodes:` list of explicit nodes (name, labels, taints, capacity, unschedulable,
        ready).
        """
        stripped = text.strip()
        if not stripped or stripped == "default":
            return Topology.default()
        if os.path.exists(stripped) or stripped.endswith((".yaml", ".yml")):
            return _parse_yaml_file(stripped)
        return _from_settings(_parse_inline(stripped), source="topology")


def zone_name(index: int) -> str:
    """zone-a ... zone-z; the generator refuses more than 26 zones."""
    return f"zone-{string.ascii_lowercase[index]}"


_INLINE_KEYS: dict[str, str] = {
    "zones": "zones",
    "nodes-per-zone": "nodes_per_zone",
    "gpus": "gpus_per_node",
    "gpus-per-node": "gpus_per_node",
    "racks-per-zone": "racks_per_zone",
    "cpu": "cpu_per_node",
    "memory": "memory_per_node",
    "pods": "pods_per_node",
    "cpu-nodes": "cpu_nodes",
    "region": "region",
    "gpu-product": "gpu_product",
}
_INT_FIELDS = {"zones", "nodes_per_zone", "gpus_per_node", "racks_per_zone", "pods_per_node", "cpu_nodes"}
# Zero is meaningful for these: a cluster of CPU nodes only, or no extra CPU nodes.
_ZERO_ALLOWED = {"gpus_per_node", "cpu_nodes"}
_EXAMPLE = "zones=3,nodes-per-zone=2,gpus=8,racks-per-zone=1,cpu-nodes=0"


def _parse_inline(text: str) -> dict[str, str]:
    settings: dict[str, str] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        key, separator, value = item.partition("=")
        if not separator:
            raise TopologyError(
                f'topology item "{item}" must be key=value, e.g. {_EXAMPLE}, or a path to a YAML file '
                "(no such file exists)"
            )
        settings[key.strip()] = value.strip()
    return settings


def _from_settings(settings: Mapping[str, object], source: str) -> Topology:
    values: dict[str, Any] = {}
    for key, raw in settings.items():
        attribute = _INLINE_KEYS.get(key)
        if attribute is None:
            known = ", ".join(sorted(_INLINE_KEYS))
            raise TopologyError(f'{source} key "{key}" is unknown (value "{raw}"); use one of: {known}')
        if attribute in _INT_FIELDS:
            values[attribute] = _positive_int(key, raw, source, allow_zero=attribute in _ZERO_ALLOWED)
        else:
            text = str(raw).strip()
            if not text:
                raise TopologyError(f'{source} key "{key}" must not be empty; e.g. {_EXAMPLE}')
            values[attribute] = text
    topology = Topology(**values)
    _validate_counts(topology, source)
    return topology


def _positive_int(key: str, raw: object, source: str, allow_zero: bool) -> int:
    minimum = 0 if allow_zero else 1
    try:
        if isinstance(raw, bool):
            raise ValueError(raw)
        number = int(str(raw).strip())
    except ValueError:
        raise TopologyError(
            f'{source} key "{key}" must be an integer >= {minimum}, got "{raw}"; e.g. {_EXAMPLE}'
        ) from None
    if number < minimum:
        raise TopologyError(f'{source} key "{key}" must be an integer >= {minimum}, got "{raw}"')
    return number


def _validate_counts(topology: Topology, source: str) -> None:
    if topology.zones > len(string.ascii_lowercase):
        raise TopologyError(
            f'{source} key "zones" must be at most 26, got "{topology.zones}"; '
            "list nodes explicitly in a YAML file for larger layouts"
        )
    if topology.racks_per_zone > topology.nodes_per_zone:
        raise TopologyError(
            f'{source} key "racks-per-zone" must not exceed nodes-per-zone ({topology.nodes_per_zone}), '
            f'got "{topology.racks_per_zone}"; lower racks-per-zone or raise nodes-per-zone'
        )


def _parse_yaml_file(path: str) -> Topology:
    try:
        with open(path, encoding="utf-8") as handle:
            document = yaml.safe_load(handle)
    except FileNotFoundError:
        raise TopologyError(
            f'topology file "{path}" does not exist; pass an existing YAML file or key=value pairs such as {_EXAMPLE}'
        ) from None
    except yaml.YAMLError as error:
        raise TopologyError(f'topology file "{path}" is not valid YAML: {error}') from None
    if not isinstance(document, dict):
        raise TopologyError(
            f'topology file "{path}" must hold a mapping with a "nodes" list or layout keys, '
            f"got {type(document).__name__}"
        )
    source = f'topology file "{path}"'
    if "nodes" not in document:
        return _from_settings(document, source)
    raw_nodes = document.get("nodes")
    if not isinstance(raw_nodes, list) or not raw_nodes:
        raise TopologyError(f'{source} key "nodes" must be a non-empty list of nodes, got "{raw_nodes}"')
    region = str(document.get("region", Topology.region))
    nodes = [_node_from_yaml(item, index, source) for index, item in enumerate(raw_nodes)]
    names = [node.name for node in nodes]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise TopologyError(f'{source} lists node name(s) {duplicates} more than once; give each node a unique name')
    return Topology(region=region, nodes=tuple(nodes))


def _string_pairs(value: object, where: str, key: str) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise TopologyError(f'{where} key "{key}" must be a mapping of strings, got "{value}"')
    return tuple(sorted((str(k), str(v)) for k, v in value.items()))


def _node_from_yaml(item: object, index: int, source: str) -> NodeSpec:
    where = f"{source} nodes[{index}]"
    if not isinstance(item, dict):
        raise TopologyError(f'{where} must be a mapping with at least "name", got "{item}"')
    name = item.get("name")
    if not isinstance(name, str) or not name:
        raise TopologyError(f'{where} key "name" must be a non-empty string, got "{name}"')
    known = {"name", "labels", "taints", "capacity", "unschedulable", "ready"}
    unknown = sorted(set(item) - known)
    if unknown:
        raise TopologyError(f'{where} key "{unknown[0]}" is unknown; use one of: {", ".join(sorted(known))}')
    taints: list[Taint] = []
    for taint_index, raw in enumerate(item.get("taints") or []):
        taint_where = f"{where} taints[{taint_index}]"
        if not isinstance(raw, dict) or not raw.get("key"):
            raise TopologyError(f'{taint_where} must be a mapping with "key" and "effect", got "{raw}"')
        effect = str(raw.get("effect", ""))
        if effect not in _VALID_EFFECTS:
            raise TopologyError(
                f'{taint_where} key "effect" must be one of {", ".join(_VALID_EFFECTS)}, got "{effect}"'
            )
        taints.append(Taint(key=str(raw["key"]), effect=effect, value=str(raw.get("value") or "")))
    for flag in ("unschedulable", "ready"):
        if flag in item and not isinstance(item[flag], bool):
            raise TopologyError(f'{where} key "{flag}" must be true or false, got "{item[flag]}"')
    return NodeSpec(
        name=name,
        labels=_string_pairs(item.get("labels"), where, "labels"),
        taints=tuple(taints),
        capacity=_string_pairs(item.get("capacity"), where, "capacity"),
        unschedulable=bool(item.get("unschedulable", False)),
        ready=bool(item.get("ready", True)),
    )


def _generated_nodes(topology: Topology) -> list[NodeSpec]:
    """The counted layout: GPU nodes round-robin across zones, then CPU-only nodes."""
    nodes: list[NodeSpec] = []
    gpu_capacity = (
        ("cpu", topology.cpu_per_node),
        ("ephemeral-storage", "2000Gi"),
        ("memory", topology.memory_per_node),
        (GPU_RESOURCE, str(topology.gpus_per_node)),
        ("pods", str(topology.pods_per_node)),
    )
    total = topology.zones * topology.nodes_per_zone
    for number in range(1, total + 1):
        zone_index = (number - 1) % topology.zones
        position_in_zone = (number - 1) // topology.zones
        # Contiguous blocks of a zone's nodes share a rack (and so an NVLink clique).
        rack_number = position_in_zone * topology.racks_per_zone // topology.nodes_per_zone + 1
        zone = zone_name(zone_index)
        rack = f"{zone}-rack-{rack_number}"
        labels = {ZONE_LABEL: zone, RACK_LABEL: rack}
        if topology.gpus_per_node > 0:
            labels.update(
                {
                    CLIQUE_LABEL: rack,
                    GPU_PRESENT_LABEL: "true",
                    GPU_PRODUCT_LABEL: topology.gpu_product,
                    GPU_COUNT_LABEL: str(topology.gpus_per_node),
                }
            )
        capacity = gpu_capacity if topology.gpus_per_node > 0 else tuple(
            pair for pair in gpu_capacity if pair[0] != GPU_RESOURCE
        )
        nodes.append(
            NodeSpec(
                name=f"{topology.node_prefix}{number}",
                labels=tuple(sorted(labels.items())),
                capacity=capacity,
            )
        )
    for number in range(1, topology.cpu_nodes + 1):
        zone = zone_name((number - 1) % topology.zones)
        nodes.append(
            NodeSpec(
                name=f"{topology.cpu_node_prefix}{number}",
                labels=((ZONE_LABEL, zone),),
                capacity=tuple(pair for pair in gpu_capacity if pair[0] != GPU_RESOURCE),
            )
        )
    return nodes


def node_specs(topology: Topology) -> list[NodeSpec]:
    """The nodes of a topology: the explicit list when given, else the generated layout."""
    return list(topology.nodes) if topology.nodes else _generated_nodes(topology)


def build_node(spec: NodeSpec, index: int, region: str, now: str = DEFAULT_TIMESTAMP) -> dict[str, Any]:
    """One `v1/Node` JSON dict; `index` (0-based) makes its addresses and pod CIDR unique."""
    labels: dict[str, str] = {
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": "kubesim-gpu" if _has_gpus(spec) else "kubesim-cpu",
        REGION_LABEL: region,
        HOSTNAME_LABEL: spec.name,
    }
    labels.update(dict(spec.labels))
    capacity = {"cpu": "96", "ephemeral-storage": "2000Gi", "memory": "1024Gi", "pods": "110"}
    capacity.update(dict(spec.capacity))
    address = f"10.0.{index // 250}.{index % 250 + 2}"
    ready_status = "True" if spec.ready else "Unknown"
    node_spec: dict[str, Any] = {
        "podCIDR": f"10.244.{index}.0/24",
        "podCIDRs": [f"10.244.{index}.0/24"],
        "providerID": f"kubesim://{spec.name}",
    }
    taints = [taint.to_dict() for taint in spec.taints]
    if not spec.ready:
        # The node lifecycle controller taints a node whose kubelet stopped reporting.
        taints.append({"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule", "timeAdded": now})
    if taints:
        node_spec["taints"] = taints
    if spec.unschedulable:
        node_spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": spec.name, "labels": labels, "annotations": {}},
        "spec": node_spec,
        "status": {
            "capacity": dict(capacity),
            # The simulated kubelet reserves nothing, so what a test sets is what pods get.
            "allocatable": dict(capacity),
            "conditions": [
                _condition("MemoryPressure", "False", "KubeletHasSufficientMemory", now),
                _condition("DiskPressure", "False", "KubeletHasNoDiskPressure", now),
                _condition("PIDPressure", "False", "KubeletHasSufficientPID", now),
                _condition(
                    "Ready",
                    ready_status,
                    "KubeletReady" if spec.ready else "NodeStatusUnknown",
                    now,
                ),
            ],
            "addresses": [
                {"type": "InternalIP", "address": address},
                {"type": "Hostname", "address": spec.name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": f"boot-{spec.name}",
                "containerRuntimeVersion": "containerd://2.0.0-kubesim",
                "kernelVersion": "6.8.0-kubesim",
                "kubeProxyVersion": _KUBELET_VERSION,
                "kubeletVersion": _KUBELET_VERSION,
                "machineID": f"machine-{spec.name}",
                "operatingSystem": "linux",
                "osImage": "kubesim",
                "systemUUID": f"uuid-{spec.name}",
            },
        },
    }


def _has_gpus(spec: NodeSpec) -> bool:
    return dict(spec.capacity).get(GPU_RESOURCE, "0") not in ("", "0")


def _condition(kind: str, status: str, reason: str, now: str) -> dict[str, str]:
    messages = {
        "KubeletReady": "kubelet is posting ready status",
        "NodeStatusUnknown": "Kubelet stopped posting node status.",
    }
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": messages.get(reason, f"kubelet reports {reason}"),
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }


def build_nodes(topology: Topology, now: str = DEFAULT_TIMESTAMP) -> list[dict[str, Any]]:
    """All Node objects of the topology, in name order of creation (gpu nodes first)."""
    return [build_node(spec, index, topology.region, now) for index, spec in enumerate(node_specs(topology))]


def default() -> Topology:
    """The small default layout (3 zones x 2 nodes x 8 GPUs) for tests."""
    return Topology.default()
