"""Topology spread in the kubesim scheduler: the behaviour tables of spec 003 and the
PodTopologySpread rules behind them, with pods shaped like the product creates them."""

from __future__ import annotations

import copy

import pytest

from kubesim.scheduler import schedule_pod
from kubesim.topology import Taint
from tests.kubesim.scheduler_pods import (
    CLIQUE,
    MODEL_LABEL,
    ZONE,
    bind,
    explicit_nodes,
    filler_pod,
    gpu_node,
    instance_pod,
    nodes_of,
    place_all,
    zone_of,
)

pytestmark = pytest.mark.kubesim

NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_HELPFUL = "Preemption is not helpful for scheduling"


# Step 2 of spec 003: Required keeps two Instances in different zones ---------------------


def test_required_puts_two_instances_on_gpu_node_1_and_2_in_zone_a_and_b() -> None:
    nodes = nodes_of("zones=2,nodes-per-zone=2,gpus=8")
    results, _ = place_all([instance_pod(index=0), instance_pod(index=1)], nodes)
    assert [r.node_name for r in results] == ["gpu-node-1", "gpu-node-2"]
    assert [zone_of(nodes, r.node_name) for r in results] == ["zone-a", "zone-b"]


def test_required_spreads_six_instances_two_per_zone() -> None:
    nodes = nodes_of()
    results, _ = place_all([instance_pod(index=i) for i in range(6)], nodes)
    zones = [str(zone_of(nodes, r.node_name)) for r in results]
    assert sorted(zones) == ["zone-a", "zone-a", "zone-b", "zone-b", "zone-c", "zone-c"]
    # Every prefix keeps counts within one of each other.
    for end in range(1, 7):
        counts = [zones[:end].count(z) for z in ("zone-a", "zone-b", "zone-c")]
        assert max(counts) - min(counts) <= 1


def test_instances_of_other_components_and_services_do_not_count() -> None:
    nodes = nodes_of("zones=2,nodes-per-zone=1")
    existing = [
        bind(instance_pod(isvc="other", index=0), "gpu-node-1"),
        bind(instance_pod(component="decoder", index=0), "gpu-node-1"),
        bind(instance_pod(index=0, namespace="elsewhere"), "gpu-node-1"),
    ]
    result = schedule_pod(instance_pod(index=0), nodes, existing)
    # gpu-node-1 already holds three unrelated pods; least-allocated alone would avoid it,
    # so check the spread filter with both zones at zero by asking for each zone explicitly.
    assert result.node_name == "gpu-node-2"
    pinned = instance_pod(index=0, nodeSelector={ZONE: "zone-a"})
    assert schedule_pod(pinned, nodes, existing).node_name == "gpu-node-1"


# "The scheduler counts only the domains that have a node the pods select" ---------------


def test_required_with_model_ready_in_one_zone_puts_all_instances_there() -> None:
    nodes = explicit_nodes(
        gpu_node("gpu-node-1", "zone-a", extra_labels={MODEL_LABEL: "Ready"}),
        gpu_node("gpu-node-2", "zone-b"),
        gpu_node("gpu-node-3", "zone-a", extra_labels={MODEL_LABEL: "Ready"}),
        gpu_node("gpu-node-4", "zone-b"),
    )
    pods = [instance_pod(index=i, gpus=4, model_ready_affinity=True) for i in range(4)]
    results, _ = place_all(pods, nodes)
    assert all(r.node_name in ("gpu-node-1", "gpu-node-3") for r in results), results
    fifth = schedule_pod(instance_pod(index=4, gpus=4, model_ready_affinity=True), nodes, _)
    assert fifth.node_name is None
    assert fifth.message == (
        "0/4 nodes are available: 2 Insufficient nvidia.com/gpu, 2 node(s) didn't match Pod's node affinity/selector. "
        f"preemption: 0/4 nodes are available: 2 {NO_VICTIMS}, 2 {NOT_HELPFUL}."
    )


def test_node_affinity_policy_ignore_counts_domains_the_pod_cannot_use() -> None:
    nodes = explicit_nodes(
        gpu_node("gpu-node-1", "zone-a", extra_labels={MODEL_LABEL: "Ready"}),
        gpu_node("gpu-node-2", "zone-b"),
    )
    first = bind(instance_pod(index=0, gpus=1, model_ready_affinity=True), "gpu-node-1")
    second = instance_pod(index=1, gpus=1, model_ready_affinity=True)
    assert schedule_pod(second, nodes, [first]).node_name == "gpu-node-1"
    second["spec"]["topologySpreadConstraints"][0]["nodeAffinityPolicy"] = "Ignore"
    result = schedule_pod(second, nodes, [first])
    assert result.node_name is None
    assert "1 node(s) didn't match pod topology spread constraints" in result.message


# Troubleshooting: "(missing required label)" ---------------------------------------------


def test_missing_zone_label_keeps_the_pod_pending_with_the_suffix() -> None:
    nodes = explicit_nodes(gpu_node("gpu-node-1"), gpu_node("gpu-node-2"))
    result = schedule_pod(instance_pod(), nodes, [])
    assert result.node_name is None
    assert result.reason == "Unschedulable"
    assert result.message == (
        "0/2 nodes are available: 2 node(s) didn't match pod topology spread constraints (missing required label). "
        f"preemption: 0/2 nodes are available: 2 {NOT_HELPFUL}."
    )


def test_missing_label_nodes_are_skipped_while_a_labelled_node_fits() -> None:
    nodes = explicit_nodes(gpu_node("gpu-node-1"), gpu_node("gpu-node-2", "zone-b"))
    assert schedule_pod(instance_pod(), nodes, []).node_name == "gpu-node-2"


def test_twelve_node_message_with_missing_labels_and_full_gpus() -> None:
    specs = [gpu_node(f"gpu-node-{n}", f"zone-{'abc'[n % 3]}") for n in range(1, 9)]
    specs += [gpu_node(f"gpu-node-{n}") for n in range(9, 13)]
    nodes = explicit_nodes(*specs)
    fillers = [filler_pod(f"gpu-node-{n}") for n in range(1, 9)]
    result = schedule_pod(instance_pod(gpus=8), nodes, fillers)
    assert result.node_name is None
    assert result.message == (
        "0/12 nodes are available: 4 node(s) didn't match pod topology spread constraints (missing required label), "
        "8 Insufficient nvidia.com/gpu. "
        f"preemption: 0/12 nodes are available: 4 {NOT_HELPFUL}, 8 {NO_VICTIMS}."
    )


# Troubleshooting: "The count has no suffix" ----------------------------------------------


def test_no_suffix_when_the_domains_with_the_fewest_instances_are_full() -> None:
    nodes = explicit_nodes(gpu_node("gpu-node-1", "zone-a"), gpu_node("gpu-node-2", "zone-b"), gpu_node("gpu-node-3", "zone-a"))
    existing = [bind(instance_pod(index=0, gpus=8), "gpu-node-1"), filler_pod("gpu-node-2")]
    result = schedule_pod(instance_pod(index=1, gpus=8), nodes, existing)
    assert result.node_name is None
    assert result.message == (
        "0/3 nodes are available: 1 node(s) didn't match pod topology spread constraints, "
        "2 Insufficient nvidia.com/gpu. "
        f"preemption: 0/3 nodes are available: 3 {NO_VICTIMS}."
    )
    assert "missing required label" not in result.message
    # Freeing room in the fewest domain lets it schedule there.
    assert schedule_pod(instance_pod(index=1, gpus=8), nodes, existing[:1]).node_name == "gpu-node-2"


# Troubleshooting: cordoned or tainted domain still counts --------------------------------


def _two_instances_in_a_and_b_with_zone_c(**zone_c: object) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    nodes = explicit_nodes(
        gpu_node("gpu-node-1", "zone-a"),
        gpu_node("gpu-node-2", "zone-b"),
        gpu_node("gpu-node-3", "zone-c", **zone_c),  # type: ignore[arg-type]
        gpu_node("gpu-node-4", "zone-a"),
        gpu_node("gpu-node-5", "zone-b"),
        gpu_node("gpu-node-6", "zone-c", **zone_c),  # type: ignore[arg-type]
    )
    existing = [bind(instance_pod(index=0), "gpu-node-1"), bind(instance_pod(index=1), "gpu-node-2")]
    return nodes, existing


def test_cordoned_domain_still_counts_and_holds_new_instances_back() -> None:
    nodes, existing = _two_instances_in_a_and_b_with_zone_c(unschedulable=True)
    result = schedule_pod(instance_pod(index=2), nodes, existing)
    assert result.node_name is None
    assert result.message == (
        "0/6 nodes are available: 2 node(s) were unschedulable, 4 node(s) didn't match pod topology spread constraints. "
        f"preemption: 0/6 nodes are available: 2 {NOT_HELPFUL}, 4 {NO_VICTIMS}."
    )


def test_tainted_domain_still_counts_and_holds_new_instances_back() -> None:
    nodes, existing = _two_instances_in_a_and_b_with_zone_c(taints=[Taint("maintenance", "NoSchedule", "true")])
    result = schedule_pod(instance_pod(index=2), nodes, existing)
    assert result.node_name is None
    assert "2 node(s) had untolerated taint {maintenance: true}" in result.message
    assert "4 node(s) didn't match pod topology spread constraints." in result.message


def test_pod_schedules_once_the_domain_accepts_pods_again() -> None:
    nodes, existing = _two_instances_in_a_and_b_with_zone_c()
    assert zone_of(nodes, schedule_pod(instance_pod(index=2), nodes, existing).node_name) == "zone-c"


def test_node_taints_policy_honor_drops_the_tainted_domain() -> None:
    nodes, existing = _two_instances_in_a_and_b_with_zone_c(taints=[Taint("maintenance", "NoSchedule", "true")])
    pod = instance_pod(index=2)
    pod["spec"]["topologySpreadConstraints"][0]["nodeTaintsPolicy"] = "Honor"
    assert zone_of(nodes, schedule_pod(pod, nodes, existing).node_name) in ("zone-a", "zone-b")


def test_not_ready_domain_still_counts() -> None:
    nodes, existing = _two_instances_in_a_and_b_with_zone_c(ready=False)
    result = schedule_pod(instance_pod(index=2), nodes, existing)
    assert result.node_name is None
    assert "2 node(s) had untolerated taint {node.kubernetes.io/unreachable: }" in result.message


# Preferred: ScheduleAnyway ---------------------------------------------------------------


def test_preferred_goes_to_the_fewest_domain_when_it_has_room() -> None:
    nodes = nodes_of()
    existing = [bind(instance_pod(index=0, spread="Preferred"), "gpu-node-1"),
                bind(instance_pod(index=1, spread="Preferred"), "gpu-node-2")]
    result = schedule_pod(instance_pod(index=2, spread="Preferred"), nodes, existing)
    assert zone_of(nodes, result.node_name) == "zone-c"


def test_preferred_lands_elsewhere_when_the_fewest_domains_are_full() -> None:
    nodes = nodes_of()
    existing = [
        bind(instance_pod(index=0, spread="Preferred"), "gpu-node-1"),
        bind(instance_pod(index=1, spread="Preferred"), "gpu-node-2"),
        filler_pod("gpu-node-3"),
        filler_pod("gpu-node-6"),
    ]
    preferred = schedule_pod(instance_pod(index=2, spread="Preferred"), nodes, existing)
    assert zone_of(nodes, preferred.node_name) in ("zone-a", "zone-b")
    required = schedule_pod(instance_pod(index=2, spread="Required"), nodes, existing)
    assert required.node_name is None
    assert "4 node(s) didn't match pod topology spread constraints" in required.message


def test_preferred_prefers_the_emptier_domain_over_least_allocated_nodes() -> None:
    nodes = nodes_of("zones=2,nodes-per-zone=2")
    # zone-a holds two Instances but has an idle node; zone-b holds none but its nodes are
    # busy with someone else's cpu-heavy pods. The spread score outweighs least-allocated.
    busy = [filler_pod(name, gpus=0) for name in ("gpu-node-2", "gpu-node-4")]
    for pod in busy:
        pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "40"
    existing = [
        bind(instance_pod(index=0, spread="Preferred"), "gpu-node-1"),
        bind(instance_pod(index=1, spread="Preferred"), "gpu-node-1"),
        *busy,
    ]
    result = schedule_pod(instance_pod(index=2, spread="Preferred"), nodes, existing)
    assert zone_of(nodes, result.node_name) == "zone-b"
    unspread = schedule_pod(instance_pod(index=2, spread=None), nodes, existing)
    assert unspread.node_name == "gpu-node-3"


# SurgeThenDrain: the old pod counts until it is gone -------------------------------------


def _migration_cluster() -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    nodes = nodes_of("zones=3,nodes-per-zone=2")
    existing = [
        bind(instance_pod(index=0, gpus=8), "gpu-node-1"),
        bind(instance_pod(index=1, gpus=8), "gpu-node-2"),
        filler_pod("gpu-node-3"),
        filler_pod("gpu-node-6"),
    ]
    return nodes, existing


def test_surge_then_drain_old_pod_still_counts() -> None:
    nodes, existing = _migration_cluster()
    replacement = instance_pod(index=0, number=1, gpus=8, revision="rev-2")
    result = schedule_pod(replacement, nodes, existing)
    assert result.node_name is None
    assert result.message.startswith(
        "0/6 nodes are available: 2 node(s) didn't match pod topology spread constraints, 4 Insufficient nvidia.com/gpu."
    )


def test_surge_then_drain_terminating_old_pod_no_longer_counts() -> None:
    nodes, existing = _migration_cluster()
    old = copy.deepcopy(existing[0])
    old["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"  # type: ignore[index]
    replacement = instance_pod(index=0, number=1, gpus=8, revision="rev-2")
    result = schedule_pod(replacement, nodes, [old, *existing[1:]])
    # zone-a is the fewest again; the terminating pod still holds gpu-node-1's GPUs.
    assert result.node_name == "gpu-node-4"


def test_surge_then_drain_deleted_old_pod_frees_its_node() -> None:
    nodes, existing = _migration_cluster()
    replacement = instance_pod(index=0, number=1, gpus=8, revision="rev-2")
    assert schedule_pod(replacement, nodes, existing[1:]).node_name == "gpu-node-1"


def test_succeeded_and_failed_pods_neither_count_nor_hold_resources() -> None:
    nodes = nodes_of("zones=2,nodes-per-zone=1")
    done = bind(instance_pod(index=0, gpus=8), "gpu-node-1")
    done["status"] = {"phase": "Succeeded"}
    failed = bind(instance_pod(index=1, gpus=8), "gpu-node-2")
    failed["status"] = {"phase": "Failed"}
    results, _ = place_all([instance_pod(index=2, gpus=8), instance_pod(index=3, gpus=8)], nodes, [done, failed])
    assert [r.node_name for r in results] == ["gpu-node-1", "gpu-node-2"]


# Workers stay in their leader's domain ---------------------------------------------------


def _leader_and_workers(index: int, workers: int = 1) -> list[dict[str, object]]:
    leader = instance_pod(index=index, role="leader", gpus=8, topology_key=CLIQUE)
    return [leader] + [
        instance_pod(index=index, role="worker", number=n, gpus=8, topology_key=CLIQUE) for n in range(workers)
    ]


def test_workers_follow_their_leader_into_its_clique_and_instances_spread_over_zones() -> None:
    nodes = nodes_of("zones=2,nodes-per-zone=4,racks-per-zone=2")
    cliques = {n["metadata"]["name"]: n["metadata"]["labels"][CLIQUE] for n in nodes}
    results, _ = place_all(_leader_and_workers(0) + _leader_and_workers(1), nodes)
    placed = [r.node_name for r in results]
    assert None not in placed
    assert cliques[placed[0]] == cliques[placed[1]] and placed[0] != placed[1]
    assert cliques[placed[2]] == cliques[placed[3]]
    assert zone_of(nodes, placed[0]) != zone_of(nodes, placed[2])


def test_worker_waits_when_its_leaders_clique_is_full() -> None:
    nodes = nodes_of("zones=1,nodes-per-zone=4,racks-per-zone=2")
    results, _ = place_all(_leader_and_workers(0, workers=2), nodes)
    assert results[0].node_name is not None and results[1].node_name is not None
    assert results[2].node_name is None
    assert results[2].message == (
        "0/4 nodes are available: 2 Insufficient nvidia.com/gpu, 2 node(s) didn't match pod affinity rules. "
        f"preemption: 0/4 nodes are available: 2 {NO_VICTIMS}, 2 {NOT_HELPFUL}."
    )


def test_worker_without_its_leader_stays_pending() -> None:
    nodes = nodes_of("zones=1,nodes-per-zone=2")
    worker = instance_pod(role="worker", gpus=1, topology_key=CLIQUE)
    result = schedule_pod(worker, nodes, [])
    assert result.node_name is None
    assert "2 node(s) didn't match pod affinity rules" in result.message


def test_workers_carry_no_spread_constraint() -> None:
    assert "topologySpreadConstraints" not in instance_pod(role="worker", topology_key=CLIQUE)["spec"]


# The remaining PodTopologySpread rules ---------------------------------------------------


@pytest.mark.parametrize(
    ("min_domains", "expected"),
    [(None, ["gpu-node-1", "gpu-node-2", "gpu-node-3"]), (3, ["gpu-node-1", "gpu-node-2", None])],
)
def test_min_domains_treats_missing_domains_as_empty(min_domains: int | None, expected: list[str | None]) -> None:
    nodes = nodes_of("zones=2,nodes-per-zone=2")
    pods = [instance_pod(index=i) for i in range(3)]
    if min_domains is not None:
        for pod in pods:
            pod["spec"]["topologySpreadConstraints"][0]["minDomains"] = min_domains
    results, _ = place_all(pods, nodes)
    assert [r.node_name for r in results] == expected


def test_match_label_keys_counts_only_the_same_revision() -> None:
    nodes = nodes_of("zones=2,nodes-per-zone=2")
    old = [bind(instance_pod(index=0, revision="rev-1"), "gpu-node-1"),
           bind(instance_pod(index=1, revision="rev-1"), "gpu-node-3")]
    pod = instance_pod(index=2, revision="rev-2")
    assert zone_of(nodes, schedule_pod(pod, nodes, old).node_name) == "zone-b"
    pod["spec"]["topologySpreadConstraints"][0]["matchLabelKeys"] = ["ome.io/revision"]
    # rev-1 pods no longer count, both zones are at zero: the tie goes to the emptier node.
    assert schedule_pod(pod, nodes, old).node_name == "gpu-node-2"
    pinned = copy.deepcopy(pod)
    pinned["spec"]["nodeSelector"] = {ZONE: "zone-a"}
    assert schedule_pod(pinned, nodes, old).node_name == "gpu-node-1"


def test_max_skew_two_allows_a_second_instance_in_the_same_zone() -> None:
    nodes = nodes_of("zones=2,nodes-per-zone=2")
    existing = [bind(instance_pod(index=0, gpus=8), "gpu-node-1"), filler_pod("gpu-node-2"), filler_pod("gpu-node-4")]
    pod = instance_pod(index=1, gpus=8)
    assert schedule_pod(pod, nodes, existing).node_name is None
    pod["spec"]["topologySpreadConstraints"][0]["maxSkew"] = 2
    assert schedule_pod(pod, nodes, existing).node_name == "gpu-node-3"


def test_a_node_selector_narrows_the_domains_that_count() -> None:
    # Honor (the default nodeAffinityPolicy): with only zone-a selectable, zone-b's zero
    # does not count, so a second Instance may join the first in zone-a.
    nodes = nodes_of("zones=2,nodes-per-zone=2")
    existing = [bind(instance_pod(index=0), "gpu-node-1")]
    pod = instance_pod(index=1, nodeSelector={ZONE: "zone-a"})
    assert zone_of(nodes, schedule_pod(pod, nodes, existing).node_name) == "zone-a"


def test_hostname_spread_keeps_one_instance_per_node() -> None:
    nodes = nodes_of("zones=1,nodes-per-zone=3")
    pods = [instance_pod(index=i, spread_key="kubernetes.io/hostname") for i in range(4)]
    results, _ = place_all(pods, nodes)
    assert [r.node_name for r in results[:3]] == ["gpu-node-1", "gpu-node-2", "gpu-node-3"]
    assert results[3].node_name == "gpu-node-1"


def test_spread_over_two_keys_needs_both_labels() -> None:
    nodes = explicit_nodes(gpu_node("gpu-node-1", "zone-a"), gpu_node("gpu-node-2", "zone-b", extra_labels={CLIQUE: "r1"}))
    pod = instance_pod()
    pod["spec"]["topologySpreadConstraints"].append(
        {**pod["spec"]["topologySpreadConstraints"][0], "topologyKey": CLIQUE}
    )
    assert schedule_pod(pod, nodes, []).node_name == "gpu-node-2"
