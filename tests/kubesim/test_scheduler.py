"""kubesim scheduler filters, scoring and FailedScheduling messages, as table cases."""

from __future__ import annotations

import random
from typing import Any

import pytest

from kubesim.scheduler import explain, failed_scheduling_message, schedule_pod
from kubesim.scheduler.match import QuantityError, pod_requests, resource_amount
from kubesim.topology import Taint
from tests.kubesim.scheduler_pods import (
    bind,
    explicit_nodes,
    filler_pod,
    gpu_node,
    instance_pod,
    nodes_of,
    place_all,
)

pytestmark = pytest.mark.kubesim

JSON = dict[str, Any]
NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_HELPFUL = "Preemption is not helpful for scheduling"


def plain_pod(name: str = "p", namespace: str = "default", labels: dict[str, str] | None = None,
              requests: dict[str, str] | None = None, **spec: Any) -> JSON:
    pod_spec: JSON = {"containers": [{"name": "c", "resources": {"requests": requests or {}}}]}
    pod_spec.update(spec)
    return {"metadata": {"name": name, "namespace": namespace, "labels": labels or {}}, "spec": pod_spec}


def one_node(**kwargs: Any) -> list[JSON]:
    return explicit_nodes(gpu_node("n1", "zone-a", **kwargs))


# Taints and tolerations ------------------------------------------------------------------

TAINT_CASES = [
    ("untolerated NoSchedule", [Taint("dedicated", "NoSchedule", "llm")], [], False),
    ("untolerated NoExecute", [Taint("dedicated", "NoExecute", "llm")], [], False),
    ("PreferNoSchedule only scores", [Taint("dedicated", "PreferNoSchedule", "llm")], [], True),
    ("Equal with the value", [Taint("dedicated", "NoSchedule", "llm")],
     [{"key": "dedicated", "operator": "Equal", "value": "llm", "effect": "NoSchedule"}], True),
    ("Equal with another value", [Taint("dedicated", "NoSchedule", "llm")],
     [{"key": "dedicated", "operator": "Equal", "value": "web"}], False),
    ("operator defaults to Equal", [Taint("dedicated", "NoSchedule", "llm")], [{"key": "dedicated", "value": "llm"}], True),
    ("Exists on the key", [Taint("dedicated", "NoSchedule", "llm")], [{"key": "dedicated", "operator": "Exists"}], True),
    ("empty key with Exists tolerates all", [Taint("a", "NoSchedule"), Taint("b", "NoExecute", "x")],
     [{"operator": "Exists"}], True),
    ("effect mismatch", [Taint("dedicated", "NoSchedule", "llm")],
     [{"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}], False),
    ("second taint untolerated", [Taint("a", "NoSchedule"), Taint("b", "NoSchedule")],
     [{"key": "a", "operator": "Exists"}], False),
    ("gpu taint tolerated", [Taint("nvidia.com/gpu", "NoSchedule", "present")],
     [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}], True),
]


@pytest.mark.parametrize(("case", "taints", "tolerations", "fits"), TAINT_CASES, ids=[c[0] for c in TAINT_CASES])
def test_taints_and_tolerations(case: str, taints: list[Taint], tolerations: list[JSON], fits: bool) -> None:
    result = schedule_pod(plain_pod(tolerations=tolerations), one_node(taints=taints), [])
    assert (result.node_name == "n1") is fits, result.message


def test_untolerated_taint_message_names_the_first_untolerated_taint() -> None:
    result = schedule_pod(plain_pod(), one_node(taints=[Taint("nvidia.com/gpu", "NoSchedule", "present")]), [])
    assert result.message == (
        "0/1 nodes are available: 1 node(s) had untolerated taint {nvidia.com/gpu: present}. "
        f"preemption: 0/1 nodes are available: 1 {NOT_HELPFUL}."
    )


def test_prefer_no_schedule_steers_to_the_untainted_node() -> None:
    nodes = explicit_nodes(gpu_node("n1", "zone-a", taints=[Taint("spot", "PreferNoSchedule")]), gpu_node("n2", "zone-a"))
    assert schedule_pod(plain_pod(), nodes, []).node_name == "n2"


@pytest.mark.parametrize(
    ("ready", "unschedulable", "tolerations", "fits", "reason"),
    [
        (False, False, [], False, "node(s) had untolerated taint {node.kubernetes.io/unreachable: }"),
        (False, False, [{"key": "node.kubernetes.io/unreachable", "operator": "Exists"}], True, ""),
        (True, True, [], False, "node(s) were unschedulable"),
        (True, True, [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}], True, ""),
        (True, False, [], True, ""),
    ],
)
def test_not_ready_and_cordoned_nodes(ready: bool, unschedulable: bool, tolerations: list[JSON], fits: bool, reason: str) -> None:
    result = schedule_pod(plain_pod(tolerations=tolerations), one_node(ready=ready, unschedulable=unschedulable), [])
    assert (result.node_name == "n1") is fits
    assert reason in result.message


def test_ready_false_reads_as_not_ready_taint() -> None:
    node = one_node()[0]
    node["status"]["conditions"][-1]["status"] = "False"
    assert "{node.kubernetes.io/not-ready: }" in schedule_pod(plain_pod(), [node], []).message


# Node selector and node affinity -----------------------------------------------------------

LABELS = {"tier": "gold", "gpus": "8", "models.ome.io/qwen3-0-6b": "Ready"}


def _required(*terms: JSON) -> JSON:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


def _expr(key: str, operator: str, *values: str) -> JSON:
    return {"key": key, "operator": operator, "values": list(values)} if values else {"key": key, "operator": operator}


AFFINITY_CASES: list[tuple[str, JSON, bool]] = [
    ("In matches", _required({"matchExpressions": [_expr("tier", "In", "gold", "silver")]}), True),
    ("In misses", _required({"matchExpressions": [_expr("tier", "In", "silver")]}), False),
    ("NotIn matches other value", _required({"matchExpressions": [_expr("tier", "NotIn", "silver")]}), True),
    ("NotIn matches absent key", _required({"matchExpressions": [_expr("absent", "NotIn", "x")]}), True),
    ("NotIn misses", _required({"matchExpressions": [_expr("tier", "NotIn", "gold")]}), False),
    ("Exists", _required({"matchExpressions": [_expr("tier", "Exists")]}), True),
    ("Exists misses", _required({"matchExpressions": [_expr("absent", "Exists")]}), False),
    ("DoesNotExist", _required({"matchExpressions": [_expr("absent", "DoesNotExist")]}), True),
    ("DoesNotExist misses", _required({"matchExpressions": [_expr("tier", "DoesNotExist")]}), False),
    ("Gt", _required({"matchExpressions": [_expr("gpus", "Gt", "4")]}), True),
    ("Gt equal misses", _required({"matchExpressions": [_expr("gpus", "Gt", "8")]}), False),
    ("Lt", _required({"matchExpressions": [_expr("gpus", "Lt", "9")]}), True),
    ("Gt on non-integer label misses", _required({"matchExpressions": [_expr("tier", "Gt", "1")]}), False),
    ("expressions ANDed", _required({"matchExpressions": [_expr("tier", "In", "gold"), _expr("gpus", "Lt", "2")]}), False),
    ("terms ORed", _required({"matchExpressions": [_expr("tier", "In", "x")]}, {"matchExpressions": [_expr("gpus", "In", "8")]}), True),
    ("empty term matches nothing", _required({}), False),
    ("matchFields on name", _required({"matchFields": [_expr("metadata.name", "In", "n1")]}), True),
    ("matchFields on another name", _required({"matchFields": [_expr("metadata.name", "In", "n2")]}), False),
    ("matchFields NotIn", _required({"matchFields": [_expr("metadata.name", "NotIn", "n1")]}), False),
    ("fields and labels ANDed", _required({"matchExpressions": [_expr("tier", "In", "gold")],
                                           "matchFields": [_expr("metadata.name", "In", "n1")]}), True),
]


@pytest.mark.parametrize(("case", "affinity", "fits"), AFFINITY_CASES, ids=[c[0] for c in AFFINITY_CASES])
def test_required_node_affinity(case: str, affinity: JSON, fits: bool) -> None:
    result = schedule_pod(plain_pod(affinity=affinity), one_node(extra_labels=LABELS), [])
    assert (result.node_name == "n1") is fits
    if not fits:
        assert "1 node(s) didn't match Pod's node affinity/selector" in result.message


@pytest.mark.parametrize(
    ("selector", "fits"),
    [({"tier": "gold"}, True), ({"tier": "silver"}, False), ({"tier": "gold", "absent": "x"}, False), ({}, True)],
)
def test_node_selector(selector: dict[str, str], fits: bool) -> None:
    result = schedule_pod(plain_pod(nodeSelector=selector), one_node(extra_labels=LABELS), [])
    assert (result.node_name == "n1") is fits


def test_node_selector_and_affinity_must_both_match() -> None:
    pod = plain_pod(nodeSelector={"tier": "gold"}, affinity=_required({"matchExpressions": [_expr("gpus", "In", "4")]}))
    assert schedule_pod(pod, one_node(extra_labels=LABELS), []).node_name is None


def test_preferred_node_affinity_picks_the_heavier_match() -> None:
    nodes = explicit_nodes(
        gpu_node("n1", "zone-a", extra_labels={"disk": "ssd"}),
        gpu_node("n2", "zone-a", extra_labels={"tier": "gold"}),
        gpu_node("n3", "zone-a"),
    )
    affinity = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 10, "preference": {"matchExpressions": [_expr("disk", "In", "ssd")]}},
        {"weight": 80, "preference": {"matchExpressions": [_expr("tier", "In", "gold")]}},
    ]}}
    assert schedule_pod(plain_pod(affinity=affinity), nodes, []).node_name == "n2"


# Resources -----------------------------------------------------------------------------------


def test_gpu_capacity_exhaustion() -> None:
    nodes = nodes_of()
    pods = [instance_pod(index=i, gpus=4, spread=None) for i in range(13)]
    results, _ = place_all(pods, nodes)
    assert all(r.node_name for r in results[:12])
    assert results[12].node_name is None
    assert results[12].message == (
        "0/6 nodes are available: 6 Insufficient nvidia.com/gpu. "
        f"preemption: 0/6 nodes are available: 6 {NO_VICTIMS}."
    )


def test_least_allocated_spreads_pods_over_nodes() -> None:
    results, _ = place_all([instance_pod(index=i, gpus=1, spread=None) for i in range(3)], nodes_of("zones=1,nodes-per-zone=3"))
    assert [r.node_name for r in results] == ["gpu-node-1", "gpu-node-2", "gpu-node-3"]


@pytest.mark.parametrize(
    ("requests", "reasons"),
    [
        ({"cpu": "97"}, ["Insufficient cpu"]),
        ({"memory": "2Ti"}, ["Insufficient memory"]),
        ({"cpu": "200", "memory": "2Ti"}, ["Insufficient cpu", "Insufficient memory"]),
        ({"nvidia.com/gpu": "9"}, ["Insufficient nvidia.com/gpu"]),
        ({"example.com/fpga": "1"}, ["Insufficient example.com/fpga"]),
        ({"ephemeral-storage": "5Ti"}, ["Insufficient ephemeral-storage"]),
        ({"cpu": "96", "memory": "1024Gi", "nvidia.com/gpu": "8"}, []),
        ({"cpu": "95500m"}, []),
    ],
)
def test_resource_requests_against_allocatable(requests: dict[str, str], reasons: list[str]) -> None:
    result = explain(plain_pod(requests=requests), one_node(), [])["n1"]
    assert (list(result.reasons) if result else []) == reasons


def test_node_with_two_shortages_counts_under_both_reasons() -> None:
    result = schedule_pod(plain_pod(requests={"cpu": "200", "memory": "2Ti"}), nodes_of("zones=1,nodes-per-zone=2"), [])
    assert result.message.startswith("0/2 nodes are available: 2 Insufficient cpu, 2 Insufficient memory.")
    assert result.message.endswith(f"preemption: 0/2 nodes are available: 2 {NO_VICTIMS}.")


def test_terminating_pods_hold_their_resources() -> None:
    holder = filler_pod("n1", gpus=8)
    holder["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert schedule_pod(plain_pod(requests={"nvidia.com/gpu": "1"}), one_node(), [holder]).node_name is None


def test_unbound_pods_hold_nothing() -> None:
    pending = filler_pod("n1", gpus=8)
    del pending["spec"]["nodeName"]
    assert schedule_pod(plain_pod(requests={"nvidia.com/gpu": "8"}), one_node(), [pending]).node_name == "n1"


def test_too_many_pods() -> None:
    nodes = explicit_nodes(gpu_node("n1", "zone-a"))
    nodes[0]["status"]["allocatable"]["pods"] = "2"
    existing = [filler_pod("n1", gpus=0, name=f"f{i}") for i in range(2)]
    result = schedule_pod(plain_pod(), nodes, existing)
    assert result.message.startswith("0/1 nodes are available: 1 Too many pods.")


def test_the_pod_itself_is_not_counted_twice() -> None:
    pod = plain_pod(requests={"nvidia.com/gpu": "8"})
    assert schedule_pod(pod, one_node(), [pod]).node_name == "n1"


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"containers": [{"resources": {"requests": {"cpu": "1"}}}, {"resources": {"requests": {"cpu": "500m"}}}]},
         {"cpu": 1500}),
        ({"containers": [{"resources": {"requests": {"cpu": "1"}}}],
          "initContainers": [{"resources": {"requests": {"cpu": "3"}}}]}, {"cpu": 3000}),
        ({"containers": [{"resources": {"requests": {"cpu": "2"}}}],
          "initContainers": [{"resources": {"requests": {"cpu": "1"}}}]}, {"cpu": 2000}),
        ({"containers": [{"resources": {"requests": {"cpu": "1"}}}],
          "initContainers": [{"restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
                             {"resources": {"requests": {"cpu": "2"}}}]}, {"cpu": 3000}),
        ({"containers": [{"resources": {"requests": {"memory": "1Gi"}}}], "overhead": {"memory": "128Mi"}},
         {"memory": 1024**3 + 128 * 1024**2}),
        ({"containers": [{"resources": {"requests": {"nvidia.com/gpu": "2"}}}]}, {"nvidia.com/gpu": 2}),
    ],
)
def test_pod_requests_follow_the_init_container_max_rule(spec: JSON, expected: dict[str, int]) -> None:
    assert pod_requests({"spec": spec}) == expected


def test_init_container_peak_can_make_a_pod_unschedulable() -> None:
    pod = plain_pod(requests={"cpu": "1"}, initContainers=[{"name": "i", "resources": {"requests": {"cpu": "100"}}}])
    assert "Insufficient cpu" in schedule_pod(pod, one_node(), []).message


@pytest.mark.parametrize(
    ("resource", "value", "amount"),
    [("cpu", "500m", 500), ("cpu", "2", 2000), ("cpu", "0.1", 100), ("memory", "1Gi", 1024**3),
     ("memory", "1G", 10**9), ("memory", "1.5Ki", 1536), ("memory", "1e3", 1000), ("nvidia.com/gpu", 8, 8),
     ("memory", "100m", 1)],
)
def test_quantities(resource: str, value: object, amount: int) -> None:
    assert resource_amount(resource, value) == amount


def test_bad_quantity_names_the_value() -> None:
    with pytest.raises(QuantityError, match='"lots"'):
        resource_amount("cpu", "lots")


def test_host_port_conflict() -> None:
    ports = [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 8080}]}]
    existing = filler_pod("n1", gpus=0)
    existing["spec"]["containers"] = ports
    result = schedule_pod(plain_pod(containers=ports), one_node(), [existing])
    assert "1 node(s) didn't have free ports for the requested pod ports" in result.message


# Inter-pod affinity and anti-affinity ------------------------------------------------------


def _anti(selector: JSON, key: str = "kubernetes.io/hostname", **term: Any) -> JSON:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": selector, "topologyKey": key, **term}]}}


def test_required_anti_affinity_keeps_replicas_on_different_nodes() -> None:
    nodes = nodes_of("zones=1,nodes-per-zone=2")
    affinity = _anti({"matchLabels": {"app": "web"}})
    pods = [plain_pod(f"web-{i}", labels={"app": "web"}, affinity=affinity) for i in range(3)]
    results, _ = place_all(pods, nodes)
    assert [r.node_name for r in results[:2]] == ["gpu-node-1", "gpu-node-2"]
    assert results[2].message == (
        "0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules. "
        f"preemption: 0/2 nodes are available: 2 {NO_VICTIMS}."
    )


def test_existing_pods_anti_affinity_blocks_the_incoming_pod() -> None:
    guard = bind(plain_pod("guard", affinity=_anti({"matchLabels": {"app": "web"}})), "gpu-node-1")
    nodes = nodes_of("zones=1,nodes-per-zone=2")
    result = schedule_pod(plain_pod("web", labels={"app": "web"}, nodeSelector={"kubernetes.io/hostname": "gpu-node-1"}),
                          nodes, [guard])
    assert "1 node(s) didn't satisfy existing pods anti-affinity rules" in result.message
    assert schedule_pod(plain_pod("web", labels={"app": "web"}), nodes, [guard]).node_name == "gpu-node-2"


@pytest.mark.parametrize(
    ("term", "other_namespace", "blocked"),
    [
        ({}, "default", True),
        ({}, "team-b", False),
        ({"namespaces": ["team-b"]}, "team-b", True),
        ({"namespaces": ["team-b"]}, "default", False),
        ({"namespaceSelector": {}}, "team-b", True),
        ({"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "team-b"}}}, "team-b", True),
        ({"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "team-c"}}}, "team-b", False),
    ],
)
def test_anti_affinity_namespaces(term: JSON, other_namespace: str, blocked: bool) -> None:
    other = bind(plain_pod("other", namespace=other_namespace, labels={"app": "web"}), "n1")
    pod = plain_pod("web", labels={"app": "web"}, affinity=_anti({"matchLabels": {"app": "web"}}, **term))
    assert (schedule_pod(pod, one_node(), [other]).node_name is None) is blocked


def test_zone_anti_affinity_blocks_the_whole_zone() -> None:
    nodes = nodes_of("zones=2,nodes-per-zone=2")
    other = bind(plain_pod("a", labels={"app": "web"}), "gpu-node-1")
    pod = plain_pod("b", labels={"app": "web"}, affinity=_anti({"matchLabels": {"app": "web"}}, "topology.kubernetes.io/zone"))
    assert schedule_pod(pod, nodes, [other]).node_name == "gpu-node-2"


def test_pod_affinity_self_match_lets_the_first_pod_start() -> None:
    affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "cache"}}, "topologyKey": "topology.kubernetes.io/zone"}]}}
    nodes = nodes_of("zones=2,nodes-per-zone=2")
    pods = [plain_pod(f"cache-{i}", labels={"app": "cache"}, affinity=affinity) for i in range(3)]
    results, _ = place_all(pods, nodes)
    zones = {r.node_name for r in results}
    assert zones <= {"gpu-node-1", "gpu-node-3"}


def test_pod_affinity_requires_the_domain_of_an_existing_match() -> None:
    affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "cache"}}, "topologyKey": "topology.kubernetes.io/zone"}]}}
    nodes = nodes_of("zones=2,nodes-per-zone=2")
    # The existing match is busy, so least-allocated alone would pick zone-b's gpu-node-2.
    existing = bind(plain_pod("cache-0", labels={"app": "cache"}, requests={"cpu": "60"}), "gpu-node-1")
    pod = plain_pod("cache-1", labels={"app": "cache"}, affinity=affinity)
    assert schedule_pod(pod, nodes, [existing]).node_name == "gpu-node-3"
    rejections = explain(pod, nodes, [existing])
    assert rejections["gpu-node-2"] is not None
    assert rejections["gpu-node-2"].reasons == ("node(s) didn't match pod affinity rules",)


def test_preferred_anti_affinity_spreads_and_preferred_affinity_gathers() -> None:
    nodes = nodes_of("zones=2,nodes-per-zone=1")
    other = bind(plain_pod("a", labels={"app": "web"}, requests={"cpu": "1"}), "gpu-node-1")
    term = {"weight": 100, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "web"}},
                                               "topologyKey": "kubernetes.io/hostname"}}
    away = plain_pod("b", affinity={"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [term]}})
    near = plain_pod("c", affinity={"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [term]}})
    assert schedule_pod(away, nodes, [other]).node_name == "gpu-node-2"
    assert schedule_pod(near, nodes, [other]).node_name == "gpu-node-1"


# FailedScheduling message format and determinism -------------------------------------------


def test_reasons_sort_as_rendered_strings_with_counts() -> None:
    specs = [gpu_node(f"n{i}", "zone-a", taints=[Taint("t", "NoSchedule")]) for i in range(12)]
    specs += [gpu_node(f"m{i}", "zone-a", unschedulable=True) for i in range(4)]
    result = schedule_pod(plain_pod(), explicit_nodes(*specs), [])
    # "12 ..." sorts before "4 ..." because kube-scheduler sorts the strings.
    assert result.message == (
        "0/16 nodes are available: 12 node(s) had untolerated taint {t: }, 4 node(s) were unschedulable. "
        f"preemption: 0/16 nodes are available: 16 {NOT_HELPFUL}."
    )


def test_a_node_is_charged_to_the_first_failing_plugin() -> None:
    nodes = one_node(unschedulable=True, taints=[Taint("t", "NoSchedule")])
    result = schedule_pod(plain_pod(requests={"cpu": "500"}, nodeSelector={"x": "y"}), nodes, [])
    assert result.message.startswith("0/1 nodes are available: 1 node(s) were unschedulable.")


def test_preemption_policy_never() -> None:
    result = schedule_pod(plain_pod(requests={"cpu": "500"}, preemptionPolicy="Never"), one_node(), [])
    assert result.message == (
        "0/1 nodes are available: 1 Insufficient cpu. preemption: not eligible due to preemptionPolicy=Never."
    )


def test_scheduling_gates_hold_the_pod_without_a_failed_scheduling_message() -> None:
    result = schedule_pod(plain_pod(schedulingGates=[{"name": "ome.io/wait"}]), one_node(), [])
    assert (result.node_name, result.reason) == (None, "SchedulingGated")


def test_no_nodes() -> None:
    assert schedule_pod(plain_pod(), [], []).message == "no nodes available to schedule pods"
    assert failed_scheduling_message(plain_pod(), []) == "no nodes available to schedule pods"


def test_pinned_node_name_is_honoured() -> None:
    nodes = nodes_of("zones=1,nodes-per-zone=2")
    assert schedule_pod(plain_pod(nodeName="gpu-node-2"), nodes, []).node_name == "gpu-node-2"


def test_ties_break_in_natural_name_order_whatever_the_input_order() -> None:
    nodes = nodes_of("zones=1,nodes-per-zone=12")
    shuffled = list(nodes)
    random.Random(7).shuffle(shuffled)
    assert schedule_pod(plain_pod(), shuffled, []).node_name == "gpu-node-1"
    busy = [bind(plain_pod(f"x{i}", requests={"cpu": "8"}), f"gpu-node-{i}") for i in range(1, 11)]
    # gpu-node-11 and gpu-node-12 tie; natural order puts 11 first (not 1x before 2 as strings would).
    assert schedule_pod(plain_pod(), shuffled, busy).node_name == "gpu-node-11"


def test_scores_are_reported_for_feasible_nodes() -> None:
    result = schedule_pod(plain_pod(), nodes_of("zones=1,nodes-per-zone=2"), [])
    assert set(result.scores) == {"gpu-node-1", "gpu-node-2"}


def test_malformed_quantity_leaves_the_pod_pending_with_the_value_named() -> None:
    result = schedule_pod(plain_pod(requests={"nvidia.com/gpu": "eight"}), one_node(), [])
    assert result.node_name is None
    assert '"eight"' in result.message and "resources" in result.message


def test_namespace_selector_uses_the_callers_namespace_labels() -> None:
    other = bind(plain_pod("other", namespace="team-b", labels={"app": "web"}), "n1")
    term = {"namespaceSelector": {"matchLabels": {"tier": "prod"}}}
    pod = plain_pod("web", labels={"app": "web"}, affinity=_anti({"matchLabels": {"app": "web"}}, **term))
    labelled = {"team-b": {"tier": "prod"}}
    assert schedule_pod(pod, one_node(), [other], lambda ns: labelled.get(ns, {})).node_name is None
    assert schedule_pod(pod, one_node(), [other]).node_name == "n1"
    # The metadata.name label is there even when the caller's namespace has no labels.
    by_name = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "team-b"}}}
    pod = plain_pod("web", labels={"app": "web"}, affinity=_anti({"matchLabels": {"app": "web"}}, **by_name))
    assert schedule_pod(pod, one_node(), [other], lambda ns: {}).node_name is None
