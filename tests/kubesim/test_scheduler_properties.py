"""Property tests: whatever the cluster, a chosen node passes every filter, and Required
spread never lets the skew among eligible domains exceed maxSkew.

The checks here are written independently of the scheduler's code: GPU arithmetic,
cordons, taints, labels and per-domain counts are recomputed from the raw objects.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubesim.scheduler import explain, schedule_pod
from kubesim.topology import NodeSpec, Taint, Topology, build_nodes
from tests.kubesim.scheduler_pods import MODEL_LABEL, ZONE, bind, filler_pod, gpu_node, instance_pod

pytestmark = pytest.mark.kubesim

JSON = dict[str, Any]


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[JSON], list[JSON]]:
    zones = draw(st.integers(1, 3))
    per_zone = draw(st.integers(1, 3))
    specs: list[NodeSpec] = []
    for number in range(1, zones * per_zone + 1):
        zone = f"zone-{'abc'[(number - 1) % zones]}"
        kind = draw(st.sampled_from(["plain", "plain", "plain", "cordoned", "tainted", "unlabelled", "model", "lost"]))
        specs.append(
            gpu_node(
                f"gpu-node-{number}",
                None if kind == "unlabelled" else zone,
                gpus=draw(st.sampled_from([4, 8])),
                extra_labels={MODEL_LABEL: "Ready"} if kind == "model" or draw(st.booleans()) else {},
                taints=[Taint("maintenance", "NoSchedule", "true")] if kind == "tainted" else [],
                unschedulable=kind == "cordoned",
                ready=kind != "lost",
            )
        )
    nodes = build_nodes(Topology(nodes=tuple(specs)))
    fillers = [
        filler_pod(spec.name, gpus=draw(st.integers(1, 4)), name=f"filler-{spec.name}")
        for spec in specs
        if draw(st.booleans())
    ]
    return nodes, fillers


def _gpus(pod: JSON) -> int:
    return sum(int(c["resources"]["requests"].get("nvidia.com/gpu", 0)) for c in pod["spec"]["containers"])


def _independent_violations(pod: JSON, node: JSON, cluster: list[JSON]) -> list[str]:
    """Filter rules recomputed from the raw objects, without the scheduler's helpers."""
    problems: list[str] = []
    name = node["metadata"]["name"]
    labels = node["metadata"]["labels"]
    if node["spec"].get("unschedulable"):
        problems.append("cordoned")
    if any(t["effect"] in ("NoSchedule", "NoExecute") for t in node["spec"].get("taints", [])):
        problems.append("tainted")
    used = sum(_gpus(p) for p in cluster if p["spec"].get("nodeName") == name)
    if used + _gpus(pod) > int(node["status"]["allocatable"]["nvidia.com/gpu"]):
        problems.append("gpus")
    if pod["spec"].get("topologySpreadConstraints") and pod["spec"]["topologySpreadConstraints"][0][
        "whenUnsatisfiable"
    ] == "DoNotSchedule" and ZONE not in labels:
        problems.append("missing zone")
    if "affinity" in pod["spec"] and labels.get(MODEL_LABEL) != "Ready":
        problems.append("model not ready")
    return problems


def _zone_counts(nodes: list[JSON], cluster: list[JSON], model_only: bool) -> dict[str, int]:
    """Instances per eligible zone: zones of nodes the pods select, cordoned or not."""
    counts: dict[str, int] = {}
    zone_by_node: dict[str, str] = {}
    for node in nodes:
        labels = node["metadata"]["labels"]
        if ZONE in labels and (not model_only or labels.get(MODEL_LABEL) == "Ready"):
            counts.setdefault(labels[ZONE], 0)
            zone_by_node[node["metadata"]["name"]] = labels[ZONE]
    for pod in cluster:
        zone = zone_by_node.get(pod["spec"].get("nodeName", ""))
        if zone is not None and pod["metadata"]["labels"].get("ome.io/inferenceservice") == "qwen3-0-6b":
            counts[zone] += 1
    return counts


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cluster=clusters(),
    requests=st.lists(st.tuples(st.sampled_from([1, 2, 4, 8]), st.sampled_from(["Required", "Preferred"])),
                      min_size=1, max_size=8),
    model_only=st.booleans(),
)
def test_chosen_nodes_pass_every_filter_and_required_spread_holds(
    cluster: tuple[list[JSON], list[JSON]], requests: list[tuple[int, str]], model_only: bool
) -> None:
    nodes, existing = cluster
    placed = list(existing)
    required_only = all(spread == "Required" for _, spread in requests)
    for index, (gpus, spread) in enumerate(requests):
        pod = instance_pod(index=index, gpus=gpus, spread=spread, model_ready_affinity=model_only)
        result = schedule_pod(pod, nodes, placed)
        if result.node_name is None:
            prefix = f"0/{len(nodes)} nodes are available: "
            assert result.message.startswith(prefix)
            # GPU-only requests give each rejected node exactly one reason.
            reasons = result.message[len(prefix):].split(". preemption")[0]
            assert sum(int(n) for n in re.findall(r"(?:^|, )(\d+) ", reasons)) == len(nodes)
            continue
        node = next(n for n in nodes if n["metadata"]["name"] == result.node_name)
        assert _independent_violations(pod, node, placed) == []
        assert explain(pod, nodes, placed)[result.node_name] is None
        placed.append(bind(pod, result.node_name))
        if required_only:
            counts = _zone_counts(nodes, placed, model_only)
            assert max(counts.values()) - min(counts.values()) <= 1, counts
