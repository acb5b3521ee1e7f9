"""Spec 003's troubleshooting tables, row by row, against kubesim's scheduler.

Pods come from the product's own rendering: an InferenceService manifest, the effective
component (`models.resolution`), the Instance's spec (`planning.replica.template`, which
adds the spread) and its pods (`planning.instance.pods`). Each test places them with
`kubesim.scheduler.schedule_pod`, one after another, as kubesim's scheduling loop does.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubesim.scheduler import ScheduleResult, schedule_pod
from kubesim.topology import NodeSpec, Topology, build_nodes
from models.inferenceservice import InferenceService
from models.instance import InstanceSpec
from models.resolution import component_revision, effective_component
from planning.instance.pods import render_pods
from planning.replica.budget import update_policy
from planning.replica.template import ClusterLifecycle, InstanceIdentity, instance_spec

pytestmark = pytest.mark.kubesim

JSON = dict[str, Any]
ZONE = "topology.kubernetes.io/zone"
CLIQUE = "nvidia.com/gpu.clique"
MODEL_READY = "models.ome.io/qwen3-0-6b"


def runner(gpus: int) -> JSON:
    amount = str(gpus)
    return {
        "name": "engine",
        "image": "sglang:1",
        "resources": {"requests": {"nvidia.com/gpu": amount}, "limits": {"nvidia.com/gpu": amount}},
    }


def engine_spec(gpus: int = 8, **fields: Any) -> JSON:
    return {"minReplicas": 2, "maxReplicas": 2, "runner": runner(gpus), **fields}


def service(engine: JSON) -> InferenceService:
    return InferenceService.model_validate(
        {
            "metadata": {"name": "qwen3-0-6b", "namespace": "spread-demo"},
            "spec": {
                "deploymentMode": "OMENative",
                "model": {"name": "qwen3-0-6b"},
                "runtime": {"name": "srt-qwen3-0-6b"},
                "engine": engine,
            },
        }
    )


def spec_for(engine: JSON, index: int) -> InstanceSpec:
    isvc = service(engine)
    effective = effective_component(isvc, None, "engine")
    assert effective is not None
    digest = component_revision(isvc, None, "engine")
    identity = InstanceIdentity("spread-demo", "qwen3-0-6b", "engine", index, digest, f"rev-{digest}")
    cluster = ClusterLifecycle()
    return instance_spec(identity, effective, cluster, update_policy(effective.lifecycle, cluster.update_policy))


def pods_of(engine: JSON, index: int, ordinal: int = 0) -> list[JSON]:
    return render_pods(spec_for(engine, index), incarnation=1, ordinal=ordinal)


def node(name: str, zone: str | None, gpus: int = 8, unschedulable: bool = False, **labels: str) -> NodeSpec:
    all_labels = dict(labels)
    if zone is not None:
        all_labels[ZONE] = zone
    return NodeSpec(
        name=name,
        labels=tuple(sorted(all_labels.items())),
        capacity=(("cpu", "96"), ("memory", "1024Gi"), ("nvidia.com/gpu", str(gpus)), ("pods", "110")),
        unschedulable=unschedulable,
    )


def cluster_nodes(*specs: NodeSpec) -> list[JSON]:
    return build_nodes(Topology(nodes=tuple(specs)))


def filler(node_name: str, gpus: int = 8) -> JSON:
    """Somebody else's pod that takes GPUs on a node."""
    return {
        "metadata": {"name": f"filler-{node_name}", "namespace": "other", "labels": {"app": "filler"}},
        "spec": {
            "nodeName": node_name,
            "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}],
        },
        "status": {"phase": "Running"},
    }


def place(pods: list[JSON], nodes: list[JSON], cluster: list[JSON]) -> list[ScheduleResult]:
    """Schedule each pod in turn; a placed pod is bound and counts for the next ones."""
    results = []
    for pod in pods:
        result = schedule_pod(pod, nodes, cluster)
        results.append(result)
        if result.node_name is not None:
            bound = copy.deepcopy(pod)
            bound["spec"]["nodeName"] = result.node_name
            bound["status"] = {"phase": "Running"}
            cluster.append(bound)
    return results


def zone_of(nodes: list[JSON], node_name: str | None) -> str | None:
    for item in nodes:
        if item["metadata"]["name"] == node_name:
            return item["metadata"]["labels"].get(ZONE)
    return None


REQUIRED = engine_spec(topologySpread="Required", topologySpreadKey=ZONE)
PREFERRED = engine_spec(topologySpread="Preferred", topologySpreadKey=ZONE)


def test_walkthrough_two_instances_land_in_different_zones() -> None:
    nodes = build_nodes(Topology(zones=2, nodes_per_zone=1))
    cluster: list[JSON] = []
    results = place(pods_of(REQUIRED, 0) + pods_of(REQUIRED, 1), nodes, cluster)
    assert [r.node_name for r in results] == ["gpu-node-1", "gpu-node-2"]
    assert {zone_of(nodes, r.node_name) for r in results} == {"zone-a", "zone-b"}
    constraint = cluster[0]["spec"]["topologySpreadConstraints"][0]
    assert (constraint["topologyKey"], constraint["whenUnsatisfiable"]) == (ZONE, "DoNotSchedule")


# --- "An Instance stays Pending" ---------------------------------------------------------


def test_pending_count_ends_in_missing_required_label() -> None:
    """Row 1: nodes without the key's label are skipped by Required."""
    nodes = cluster_nodes(node("n-a", "zone-a"), node("n-b", "zone-b"), node("n-unlabelled", None))
    cluster = [filler("n-a"), filler("n-b")]
    [result] = place(pods_of(REQUIRED, 0), nodes, cluster)
    assert result.node_name is None
    assert "1 node(s) didn't match pod topology spread constraints (missing required label)" in result.message


def test_pending_count_without_suffix_when_fewest_domains_are_full() -> None:
    """Row 2: the domain with the fewest Instances is full."""
    nodes = cluster_nodes(node("n-a", "zone-a", gpus=16), node("n-b", "zone-b"))
    cluster = [filler("n-b")]
    first, second = place(pods_of(REQUIRED, 0) + pods_of(REQUIRED, 1), nodes, cluster)
    assert first.node_name == "n-a"
    assert second.node_name is None
    assert re.search(r"1 node\(s\) didn't match pod topology spread constraints[.,]", second.message)
    assert "(missing required label)" not in second.message
    # Freeing room in zone-b lets it schedule there.
    cluster.remove(cluster[0])
    [retry] = place(pods_of(REQUIRED, 1), nodes, cluster)
    assert retry.node_name == "n-b"


def test_pending_surge_pod_while_the_old_pod_still_counts() -> None:
    """Row 3: a SurgeThenDrain (or migration) pod waits; the old pod counts until it's gone."""
    nodes = cluster_nodes(
        node("n-a", "zone-a", gpus=16), node("n-b", "zone-b", gpus=16), node("n-c", "zone-c")
    )
    cluster = [filler("n-c")]
    placed = place(pods_of(REQUIRED, 0) + pods_of(REQUIRED, 1), nodes, cluster)
    assert {zone_of(nodes, r.node_name) for r in placed} == {"zone-a", "zone-b"}
    updated = {**REQUIRED, "runner": {**runner(8), "image": "sglang:2"}}
    assert spec_for(updated, 0).revision != spec_for(REQUIRED, 0).revision
    surge_pod = pods_of(updated, 0, ordinal=1)
    assert surge_pod[0]["metadata"]["name"] == "qwen3-0-6b-engine-0-default-1"
    [waiting] = place(surge_pod, nodes, cluster)
    assert waiting.node_name is None
    assert "didn't match pod topology spread constraints" in waiting.message
    # Once the old pod of Instance 0 is gone, the new one schedules where it was.
    old_name = "qwen3-0-6b-engine-0-default-0"
    old_zone = zone_of(nodes, next(p["spec"]["nodeName"] for p in cluster if p["metadata"]["name"] == old_name))
    cluster[:] = [p for p in cluster if p["metadata"]["name"] != old_name]
    [landed] = place(surge_pod, nodes, cluster)
    assert zone_of(nodes, landed.node_name) == old_zone


@pytest.mark.parametrize("blocker", ["cordoned", "tainted"])
def test_pending_when_a_cordoned_or_tainted_domain_still_counts(blocker: str) -> None:
    """Row 4: a domain whose nodes refuse pods still counts, and holds new Instances back."""
    from kubesim.topology import Taint

    blocked = node("n-c", "zone-c", unschedulable=blocker == "cordoned")
    if blocker == "tainted":
        blocked = NodeSpec(
            name=blocked.name,
            labels=blocked.labels,
            capacity=blocked.capacity,
            taints=(Taint(key="maintenance", effect="NoSchedule"),),
        )
    nodes = cluster_nodes(node("n-a", "zone-a", gpus=16), node("n-b", "zone-b", gpus=16), blocked)
    cluster: list[JSON] = []
    placed = place(pods_of(REQUIRED, 0) + pods_of(REQUIRED, 1) + pods_of(REQUIRED, 2), nodes, cluster)
    assert placed[0].node_name is not None and placed[1].node_name is not None
    assert placed[2].node_name is None
    assert "2 node(s) didn't match pod topology spread constraints" in placed[2].message
    # Once the domain accepts pods again, the Instance goes there.
    nodes = cluster_nodes(node("n-a", "zone-a", gpus=16), node("n-b", "zone-b", gpus=16), node("n-c", "zone-c"))
    [landed] = place(pods_of(REQUIRED, 2), nodes, cluster)
    assert landed.node_name == "n-c"


# --- "The Instances landed in one domain" ------------------------------------------------


def _lopsided_nodes() -> list[JSON]:
    """Two empty nodes in zone-a and a busier one in zone-b: without a spread, both go to zone-a."""
    return cluster_nodes(node("n-a1", "zone-a"), node("n-a2", "zone-a"), node("n-b", "zone-b", gpus=16))


def _two_instances(engine: JSON, nodes: list[JSON]) -> list[str | None]:
    cluster = [filler("n-b", gpus=6)]
    results = place(pods_of(engine, 0) + pods_of(engine, 1), nodes, cluster)
    return [zone_of(nodes, r.node_name) for r in results]


def test_landed_together_without_topology_spread() -> None:
    """Row 1: SPREAD is <none>: nothing sets topologySpread."""
    engine = engine_spec(topologySpreadKey=ZONE)
    assert "topologySpreadConstraints" not in pods_of(engine, 0)[0]["spec"]
    nodes = _lopsided_nodes()
    assert _two_instances(engine, nodes) == ["zone-a", "zone-a"]
    assert _two_instances(REQUIRED, nodes) == ["zone-a", "zone-b"]


def test_landed_together_without_any_key() -> None:
    """Row 2: SPREAD-KEY and TOPOLOGY-KEY are both <none>."""
    engine = engine_spec(topologySpread="Required")
    assert "topologySpreadConstraints" not in pods_of(engine, 0)[0]["spec"]
    assert _two_instances(engine, _lopsided_nodes()) == ["zone-a", "zone-a"]


def test_pods_older_than_the_change_keep_no_spread() -> None:
    """Row 3: adding a spread changes no revision, so running pods keep their old spec."""
    before = engine_spec()
    old_pod = pods_of(before, 0)[0]
    assert spec_for(before, 0).revision == spec_for(REQUIRED, 0).revision
    assert "topologySpreadConstraints" not in old_pod["spec"]
    new_pod = pods_of(REQUIRED, 1)[0]
    assert new_pod["spec"]["topologySpreadConstraints"][0]["topologyKey"] == ZONE


def test_preferred_uses_another_domain_when_the_fewest_are_full() -> None:
    """Row 4: WHEN is ScheduleAnyway: Preferred breaks the spread rather than wait."""
    nodes = cluster_nodes(node("n-a", "zone-a", gpus=16), node("n-b", "zone-b"))
    cluster = [filler("n-b")]
    results = place(pods_of(PREFERRED, 0) + pods_of(PREFERRED, 1), nodes, cluster)
    assert [r.node_name for r in results] == ["n-a", "n-a"]
    assert pods_of(PREFERRED, 0)[0]["spec"]["topologySpreadConstraints"][0]["whenUnsatisfiable"] == "ScheduleAnyway"
    cluster = [filler("n-b")]
    required = place(pods_of(REQUIRED, 0) + pods_of(REQUIRED, 1), nodes, cluster)
    assert required[1].node_name is None


def test_a_constraint_already_set_on_the_key_is_kept() -> None:
    """Row 5: WHEN isn't what you set, because an existing constraint on that key is kept."""
    from planning.replica.spread import SpreadSettings, spread_constraint, with_spread

    users = {
        "maxSkew": 1,
        "topologyKey": ZONE,
        "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchLabels": {"ome.io/inferenceservice": "qwen3-0-6b"}},
    }
    ours = spread_constraint(SpreadSettings("Required", ZONE), "qwen3-0-6b", "engine")
    merged = with_spread({"containers": [runner(8)], "topologySpreadConstraints": [users]}, ours)
    assert merged["topologySpreadConstraints"] == [users]
    nodes = cluster_nodes(node("n-a", "zone-a", gpus=16), node("n-b", "zone-b"))
    cluster = [filler("n-b")]
    pods = []
    for index in (0, 1):
        pod = pods_of(REQUIRED, index)[0]
        pod["spec"]["topologySpreadConstraints"] = merged["topologySpreadConstraints"]
        pods.append(pod)
    results = place(pods, nodes, cluster)
    assert [r.node_name for r in results] == ["n-a", "n-a"]


def test_only_one_domain_has_a_node_the_pods_select() -> None:
    """Row 6: all values right, but the model is Ready in one zone only."""
    nodes = cluster_nodes(
        node("n-a1", "zone-a", **{MODEL_READY: "Ready"}),
        node("n-a2", "zone-a", **{MODEL_READY: "Ready"}),
        node("n-b", "zone-b"),
    )
    pods = pods_of(REQUIRED, 0) + pods_of(REQUIRED, 1)
    for pod in pods:
        pod["spec"]["nodeSelector"] = {MODEL_READY: "Ready"}
    results = place(pods, nodes, [])
    assert [zone_of(nodes, r.node_name) for r in results] == ["zone-a", "zone-a"]


# --- multi-pod Instances ------------------------------------------------------------------


def test_workers_stay_in_their_leaders_clique_and_instances_spread_over_zones() -> None:
    engine = engine_spec(
        leader={},
        worker={"size": 1},
        topologyKey=CLIQUE,
        topologySpread="Required",
        topologySpreadKey=ZONE,
    )
    nodes = cluster_nodes(
        node("n-a1", "zone-a", **{CLIQUE: "clique-a"}),
        node("n-a2", "zone-a", **{CLIQUE: "clique-a"}),
        node("n-a3", "zone-a", **{CLIQUE: "clique-a2"}),
        node("n-b1", "zone-b", **{CLIQUE: "clique-b"}),
        node("n-b2", "zone-b", **{CLIQUE: "clique-b"}),
    )
    cluster: list[JSON] = []
    zero = pods_of(engine, 0)
    one = pods_of(engine, 1)
    assert "topologySpreadConstraints" not in zero[1]["spec"], "workers carry no spread"
    results = place(zero + one, nodes, cluster)
    placed = {pod["metadata"]["name"]: pod["spec"]["nodeName"] for pod in cluster}
    assert all(r.node_name is not None for r in results)
    cliques = {item["metadata"]["name"]: item["metadata"]["labels"].get(CLIQUE) for item in nodes}
    for index in (0, 1):
        leader = placed[f"qwen3-0-6b-engine-{index}-leader-0"]
        worker = placed[f"qwen3-0-6b-engine-{index}-worker-0"]
        assert cliques[leader] == cliques[worker]
    zones = {zone_of(nodes, placed[f"qwen3-0-6b-engine-{i}-leader-0"]) for i in (0, 1)}
    assert zones == {"zone-a", "zone-b"}


def test_engine_and_decoder_spread_separately() -> None:
    """The engine's Instances don't count for the decoder's spread, and the other way round."""
    from planning.replica.spread import SpreadSettings, spread_constraint

    decoder_constraint = spread_constraint(SpreadSettings("Required", ZONE), "qwen3-0-6b", "decoder")
    nodes = cluster_nodes(node("n-a", "zone-a", gpus=24), node("n-b", "zone-b"))
    cluster: list[JSON] = [filler("n-b")]
    [engine_result] = place(pods_of(REQUIRED, 0), nodes, cluster)
    assert engine_result.node_name == "n-a"
    decoder_pod = copy.deepcopy(pods_of(REQUIRED, 0)[0])
    decoder_pod["metadata"]["name"] = "qwen3-0-6b-decoder-0-default-0"
    decoder_pod["metadata"]["labels"]["ome.io/component"] = "decoder"
    decoder_pod["spec"]["topologySpreadConstraints"] = [decoder_constraint]
    [decoder_result] = place([decoder_pod], nodes, cluster)
    assert decoder_result.node_name == "n-a"
    # A second engine Instance, by contrast, is held back by the first one in zone-a.
    [second_engine] = place(pods_of(REQUIRED, 1), nodes, cluster)
    assert second_engine.node_name is None
    assert "1 node(s) didn't match pod topology spread constraints" in second_engine.message


# --- property: Required keeps the per-zone counts within one --------------------------------


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 4), st.integers(1, 3), st.integers(1, 9))
def test_required_spread_keeps_zone_counts_within_one(zones: int, nodes_per_zone: int, instances: int) -> None:
    nodes = build_nodes(Topology(zones=zones, nodes_per_zone=nodes_per_zone))
    capacity = zones * nodes_per_zone * 8
    engine = engine_spec(gpus=1, topologySpread="Required", topologySpreadKey=ZONE)
    cluster: list[JSON] = []
    pods = [pod for index in range(min(instances, capacity)) for pod in pods_of(engine, index)]
    results = place(pods, nodes, cluster)
    assert all(result.node_name is not None for result in results)
    per_zone = {f"zone-{chr(ord('a') + z)}": 0 for z in range(zones)}
    for result in results:
        zone = zone_of(nodes, result.node_name)
        assert zone is not None
        per_zone[zone] += 1
    assert max(per_zone.values()) - min(per_zone.values()) <= 1
