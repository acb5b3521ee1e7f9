"""Topology parsing and the Node objects built from it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kubernetes import client

from kubesim.topology import (
    CLIQUE_LABEL,
    GPU_PRESENT_LABEL,
    GPU_RESOURCE,
    HOSTNAME_LABEL,
    RACK_LABEL,
    REGION_LABEL,
    ZONE_LABEL,
    Taint,
    Topology,
    TopologyError,
    build_nodes,
    default,
)

pytestmark = pytest.mark.kubesim


def _by_name(nodes: list[dict[str, object]]) -> dict[str, dict[str, object]]:
    return {node["metadata"]["name"]: node for node in nodes}  # type: ignore[index]


def test_default_is_three_zones_of_two_eight_gpu_nodes() -> None:
    nodes = build_nodes(default())
    assert [node["metadata"]["name"] for node in nodes] == [f"gpu-node-{n}" for n in range(1, 7)]
    zones = [node["metadata"]["labels"][ZONE_LABEL] for node in nodes]
    assert zones == ["zone-a", "zone-b", "zone-c", "zone-a", "zone-b", "zone-c"]
    assert all(node["status"]["allocatable"][GPU_RESOURCE] == "8" for node in nodes)


def test_spec_003_walkthrough_nodes_one_and_two_are_in_zone_a_and_b() -> None:
    nodes = _by_name(build_nodes(Topology.parse("zones=2,nodes-per-zone=2,gpus=8")))
    assert nodes["gpu-node-1"]["metadata"]["labels"][ZONE_LABEL] == "zone-a"  # type: ignore[index]
    assert nodes["gpu-node-2"]["metadata"]["labels"][ZONE_LABEL] == "zone-b"  # type: ignore[index]


def test_node_carries_every_label_the_product_selects_on() -> None:
    node = build_nodes(default())[0]
    labels = node["metadata"]["labels"]
    assert labels[HOSTNAME_LABEL] == "gpu-node-1"
    assert labels[REGION_LABEL] == "region-1"
    assert labels[RACK_LABEL] == "zone-a-rack-1"
    assert labels[CLIQUE_LABEL] == "zone-a-rack-1"
    assert labels[GPU_PRESENT_LABEL] == "true"
    assert node["apiVersion"] == "v1" and node["kind"] == "Node"
    status = node["status"]
    for resource in ("cpu", "memory", "pods", GPU_RESOURCE):
        assert resource in status["capacity"] and resource in status["allocatable"]
    ready = [c for c in status["conditions"] if c["type"] == "Ready"]
    assert ready and ready[0]["status"] == "True"
    assert {address["type"] for address in status["addresses"]} == {"InternalIP", "Hostname"}


def test_nodes_deserialize_with_the_kubernetes_client() -> None:
    api = client.ApiClient()
    for node in build_nodes(Topology.parse("zones=2,nodes-per-zone=2,cpu-nodes=1")):
        typed = api.deserialize(json.dumps(node), "V1Node", "application/json")
        assert typed.metadata.name == node["metadata"]["name"]
        assert typed.status.node_info.kubelet_version


def test_internal_addresses_and_pod_cidrs_are_unique() -> None:
    nodes = build_nodes(Topology.parse("zones=3,nodes-per-zone=4,cpu-nodes=2"))
    addresses = [node["status"]["addresses"][0]["address"] for node in nodes]
    cidrs = [node["spec"]["podCIDR"] for node in nodes]
    assert len(set(addresses)) == len(nodes) and len(set(cidrs)) == len(nodes)


@pytest.mark.parametrize(
    ("text", "zones", "per_zone", "gpus", "racks", "cpu_nodes"),
    [
        ("zones=3,nodes-per-zone=4,gpus=8", 3, 4, 8, 1, 0),
        ("zones=1, nodes-per-zone=2, gpus=4", 1, 2, 4, 1, 0),
        ("zones=2,nodes-per-zone=4,racks-per-zone=2", 2, 4, 8, 2, 0),
        ("zones=2,nodes-per-zone=1,cpu-nodes=1", 2, 1, 8, 1, 1),
        ("gpus-per-node=2", 3, 2, 2, 1, 0),
        ("", 3, 2, 8, 1, 0),
        ("default", 3, 2, 8, 1, 0),
    ],
)
def test_parse_inline(text: str, zones: int, per_zone: int, gpus: int, racks: int, cpu_nodes: int) -> None:
    topology = Topology.parse(text)
    assert (topology.zones, topology.nodes_per_zone, topology.gpus_per_node) == (zones, per_zone, gpus)
    assert (topology.racks_per_zone, topology.cpu_nodes) == (racks, cpu_nodes)
    assert len(build_nodes(topology)) == zones * per_zone + cpu_nodes


def test_racks_split_a_zone_into_contiguous_cliques() -> None:
    nodes = build_nodes(Topology.parse("zones=1,nodes-per-zone=4,racks-per-zone=2"))
    racks = [node["metadata"]["labels"][CLIQUE_LABEL] for node in nodes]
    assert racks == ["zone-a-rack-1", "zone-a-rack-1", "zone-a-rack-2", "zone-a-rack-2"]


def test_cpu_nodes_have_no_gpu_labels_or_capacity() -> None:
    nodes = _by_name(build_nodes(Topology.parse("zones=2,nodes-per-zone=1,cpu-nodes=2")))
    cpu_node = nodes["cpu-node-2"]
    assert GPU_RESOURCE not in cpu_node["status"]["capacity"]  # type: ignore[index]
    assert GPU_PRESENT_LABEL not in cpu_node["metadata"]["labels"]  # type: ignore[index]
    assert cpu_node["metadata"]["labels"][ZONE_LABEL] == "zone-b"  # type: ignore[index]


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        ("zones=x", ['"zones"', '"x"', "integer"]),
        ("zones=0", ['"zones"', '"0"', ">= 1"]),
        ("nodes-per-zone=-1", ['"nodes-per-zone"', '"-1"']),
        ("color=blue", ['"color"', '"blue"', "use one of"]),
        ("zones", ['"zones"', "key=value"]),
        ("zones=27", ['"zones"', "at most 26", "YAML"]),
        ("nodes-per-zone=1,racks-per-zone=2", ['"racks-per-zone"', '"2"', "nodes-per-zone"]),
        ("missing-file.yaml", ['"missing-file.yaml"', "does not exist"]),
    ],
)
def test_parse_errors_name_key_value_and_fix(text: str, fragments: list[str]) -> None:
    with pytest.raises(TopologyError) as raised:
        Topology.parse(text)
    for fragment in fragments:
        assert fragment in str(raised.value)


def test_yaml_explicit_nodes(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(
        """
region: eu-1
nodes:
  - name: big-1
    labels: {topology.kubernetes.io/zone: zone-x, models.ome.io/qwen3-0-6b: Ready}
    capacity: {nvidia.com/gpu: "4", cpu: "32"}
    taints: [{key: dedicated, value: llm, effect: NoSchedule}]
  - name: unlabelled
    unschedulable: true
  - name: lost
    ready: false
"""
    )
    topology = Topology.parse(str(path))
    assert topology.nodes[0].taints == (Taint(key="dedicated", value="llm", effect="NoSchedule"),)
    nodes = _by_name(build_nodes(topology))
    big = nodes["big-1"]
    assert big["metadata"]["labels"]["models.ome.io/qwen3-0-6b"] == "Ready"  # type: ignore[index]
    assert big["metadata"]["labels"][REGION_LABEL] == "eu-1"  # type: ignore[index]
    assert big["status"]["allocatable"][GPU_RESOURCE] == "4"  # type: ignore[index]
    assert big["status"]["allocatable"]["cpu"] == "32"  # type: ignore[index]
    assert big["spec"]["taints"] == [{"key": "dedicated", "value": "llm", "effect": "NoSchedule"}]  # type: ignore[index]
    assert ZONE_LABEL not in nodes["unlabelled"]["metadata"]["labels"]  # type: ignore[index]
    assert nodes["unlabelled"]["spec"]["unschedulable"] is True  # type: ignore[index]
    lost = nodes["lost"]
    ready = [c for c in lost["status"]["conditions"] if c["type"] == "Ready"]  # type: ignore[index]
    assert ready[0]["status"] == "Unknown"
    assert {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"}.items() <= lost["spec"]["taints"][0].items()  # type: ignore[index]


def test_yaml_layout_keys(tmp_path: Path) -> None:
    path = tmp_path / "layout.yml"
    path.write_text("zones: 2\nnodes-per-zone: 3\ngpus: 4\n")
    topology = Topology.parse(str(path))
    assert (topology.zones, topology.nodes_per_zone, topology.gpus_per_node) == (2, 3, 4)


@pytest.mark.parametrize(
    ("content", "fragments"),
    [
        ("- a\n- b\n", ["must hold a mapping"]),
        ("nodes: []\n", ['"nodes"', "non-empty"]),
        ("nodes:\n  - labels: {}\n", ["nodes[0]", '"name"']),
        ("nodes:\n  - name: a\n  - name: a\n", ["['a']", "unique"]),
        ("nodes:\n  - name: a\n    taints: [{key: k, effect: Sometimes}]\n", ["taints[0]", '"Sometimes"', "NoSchedule"]),
        ("nodes:\n  - name: a\n    colour: red\n", ['"colour"', "use one of"]),
        ("nodes:\n  - name: a\n    ready: maybe\n", ['"ready"', '"maybe"', "true or false"]),
        ("zones: [1]\n", ['"zones"', "integer"]),
        ("nodes: [\n", ["not valid YAML"]),
    ],
)
def test_yaml_errors(tmp_path: Path, content: str, fragments: list[str]) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    with pytest.raises(TopologyError) as raised:
        Topology.parse(str(path))
    for fragment in fragments:
        assert fragment in str(raised.value)


def test_build_nodes_is_deterministic_and_uses_the_given_clock() -> None:
    first = build_nodes(default(), now="2030-05-05T00:00:00Z")
    assert first == build_nodes(default(), now="2030-05-05T00:00:00Z")
    assert first[0]["status"]["conditions"][0]["lastHeartbeatTime"] == "2030-05-05T00:00:00Z"
