"""The state kubesim keeps in step with store changes instead of gathering it per operation:
the pods counting on each node (scheduler), the pod IPs taken (kubelet), the clusterIPs and
nodePorts taken (API server), the pods each disruption budget counts. Each must answer what a walk over the store would: after
deletes, pods going terminal, updates moving a pod, a missed change, a restart from a
persisted store."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kubesim.allocation import address, address_pool
from kubesim.cluster import Cluster
from kubesim.controllers.scheduling import Scheduling
from kubesim.follow import Follower
from kubesim.scheduler.backoff import backoff_seconds
from kubesim.scheduler.node_pods import PodsByNode
from kubesim.selectors import selector_matches
from kubesim.store import Store
from kubesim.timing import Timing

NS = "t"
FACTOR = 0.001
PODS, SERVICES, PDBS = ("", "pods"), ("", "services"), ("policy", "poddisruptionbudgets")


def _cluster(topology: str = "zones=1,nodes-per-zone=1,gpus=8", state_file: Any = None) -> Cluster:
    cluster = Cluster(topology, Timing(pull_seconds=0, start_seconds=0, ready_seconds=0, factor=FACTOR),
                      state_file=state_file)
    cluster.bootstrap()
    for controller in cluster.controllers:  # told of each change, as `Cluster.start` does, not run
        cluster.store.subscribe(controller.on_change)
    if cluster.store.get(("", "namespaces"), "", NS) is None:
        cluster.api.create(cluster.api.type_of("", "namespaces"), "", {"metadata": {"name": NS}}, "test")
    return cluster


def _scheduler(cluster: Cluster) -> Scheduling:
    return next(c for c in cluster.controllers if isinstance(c, Scheduling))


def _pod(cluster: Cluster, name: str, gpus: int = 0, **spec: Any) -> None:
    resources = {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {}
    cluster.api.create(cluster.api.type_of(*PODS), NS, {"metadata": {"name": name}, "spec": {
        "containers": [{"name": "c", "image": "i:1", "resources": resources}], **spec}}, "test")


def _get(cluster: Cluster, name: str) -> dict[str, Any]:
    pod = cluster.store.get(PODS, NS, name)
    assert pod is not None
    return pod


def _node_of(cluster: Cluster, name: str) -> str | None:
    return _get(cluster, name)["spec"].get("nodeName")


def _reconcile_after_back_off(scheduler: Scheduling) -> None:
    """A pod that did not fit is tried again once its back-off has passed (1 ms at this factor);
    in an event loop, as the controller runs, for the retry it asks for."""
    time.sleep(5 * backoff_seconds(1) * FACTOR)
    _in_loop(scheduler.reconcile)


def _in_loop(body: Callable[[], None]) -> None:
    """Controllers read the event loop's clock: run `body` inside one."""
    async def run() -> None:
        body()
    asyncio.run(run())


def test_a_finished_or_deleted_pod_frees_its_node_for_the_next() -> None:
    cluster = _cluster()
    scheduler = _scheduler(cluster)
    _pod(cluster, "a", gpus=8)
    _in_loop(scheduler.reconcile)
    assert _node_of(cluster, "a") == "gpu-node-1"
    _pod(cluster, "b", gpus=8)
    _in_loop(scheduler.reconcile)
    assert _node_of(cluster, "b") is None
    a = _get(cluster, "a")
    cluster.api.write_status(cluster.api.type_of(*PODS), a, {**(a.get("status") or {}), "phase": "Succeeded"}, "test")
    _reconcile_after_back_off(scheduler)
    assert _node_of(cluster, "b") == "gpu-node-1"
    _pod(cluster, "c", gpus=8)
    _in_loop(scheduler.reconcile)
    assert _node_of(cluster, "c") is None
    cluster.api.delete(cluster.api.type_of(*PODS), NS, "b", {"gracePeriodSeconds": 0})
    _reconcile_after_back_off(scheduler)
    assert _node_of(cluster, "c") == "gpu-node-1"


def test_a_terminating_pod_still_holds_its_resources() -> None:
    cluster = _cluster()
    scheduler = _scheduler(cluster)
    _pod(cluster, "a", gpus=8)
    _in_loop(scheduler.reconcile)
    cluster.api.delete(cluster.api.type_of(*PODS), NS, "a", {"gracePeriodSeconds": 30})
    assert _get(cluster, "a")["metadata"].get("deletionTimestamp")
    _pod(cluster, "b", gpus=8)
    _in_loop(scheduler.reconcile)
    assert _node_of(cluster, "b") is None


def test_pods_by_node_moves_a_pod_its_update_moves() -> None:
    def pod(node: str, gpus: str, phase: str = "Running") -> dict[str, Any]:
        return {"metadata": {"name": "p"}, "spec": {"nodeName": node, "containers": [
            {"name": "c", "resources": {"requests": {"nvidia.com/gpu": gpus}}}]}, "status": {"phase": phase}}

    by_node = PodsByNode()
    by_node.put("p", pod("n1", "2"))
    assert by_node.get("n1").requested() == {"nvidia.com/gpu": 2}
    by_node.put("p", pod("n1", "4"))
    assert by_node.get("n1").requested() == {"nvidia.com/gpu": 4} and len(by_node.get("n1")) == 1
    by_node.put("p", pod("n2", "4"))
    assert by_node.get("n1").requested() == {} and len(by_node.get("n1")) == 0
    assert by_node.get("n2").requested() == {"nvidia.com/gpu": 4}
    by_node.put("p", pod("n2", "4", phase="Failed"))
    assert len(by_node) == 0 and by_node.get("n2").requested() == {}


def test_scheduler_state_survives_a_missed_change_and_a_restore() -> None:
    cluster = _cluster()
    scheduler = _scheduler(cluster)
    _pod(cluster, "a", gpus=8)
    _in_loop(scheduler.reconcile)
    # A change the follower did not see in order (as from a write inside another subscriber).
    cluster.store.rv += 1
    _pod(cluster, "b", gpus=8)
    _in_loop(scheduler.reconcile)
    assert _node_of(cluster, "b") is None
    # A restore replaces the objects without announcing changes: the node is free again.
    snapshot = cluster.store.snapshot()
    snapshot["objects"] = [o for o in snapshot["objects"] if o["object"]["metadata"]["name"] != "a"]
    cluster.store.restore(snapshot)
    _reconcile_after_back_off(scheduler)
    assert _node_of(cluster, "b") == "gpu-node-1"


def test_a_deleted_pods_ip_is_given_again() -> None:
    cluster = _cluster()
    scheduler, kubelet = _scheduler(cluster), cluster.kubelet

    def step() -> None:
        scheduler.reconcile()
        kubelet.reconcile()

    def body() -> None:
        for name in ("a", "b", "c"):
            _pod(cluster, name)
        step()
        ips = {n: _get(cluster, n)["status"]["podIP"] for n in ("a", "b", "c")}
        assert ips == {"a": address("10.244", 1), "b": address("10.244", 2), "c": address("10.244", 3)}
        cluster.api.delete(cluster.api.type_of(*PODS), NS, "a", {"gracePeriodSeconds": 0})
        step()
        _pod(cluster, "d")
        _pod(cluster, "e")
        step()
        assert _get(cluster, "d")["status"]["podIP"] == ips["a"]
        assert _get(cluster, "e")["status"]["podIP"] == address("10.244", 4)

    _in_loop(body)


def test_a_deleted_services_cluster_ip_and_node_ports_are_given_again() -> None:
    cluster = _cluster()
    rt = cluster.api.type_of(*SERVICES)

    def service(name: str, kind: str = "NodePort") -> dict[str, Any]:
        return cluster.api.create(rt, NS, {"metadata": {"name": name}, "spec": {
            "type": kind, "ports": [{"name": "a", "port": 80}, {"name": "b", "port": 81}]}}, "test")["spec"]

    first, second = service("s1"), service("s2")
    assert [p["nodePort"] for p in first["ports"]] == [30000, 30001]
    assert [p["nodePort"] for p in second["ports"]] == [30002, 30003]
    cluster.api.delete(rt, NS, "s1")
    third = service("s3")
    assert third["clusterIP"] == first["clusterIP"]
    assert [p["nodePort"] for p in third["ports"]] == [30000, 30001]
    # A dry run takes nothing.
    cluster.api.create(rt, NS, {"metadata": {"name": "s4"}, "spec": {"ports": [{"port": 80}]}}, "test", dry_run=True)
    assert service("s5", "ClusterIP")["clusterIP"] == address("10.96", 12)


def test_state_is_rebuilt_from_a_persisted_store(tmp_path: Any) -> None:
    state = tmp_path / "state.json"
    first = _cluster(state_file=state)
    rt = first.api.type_of(*SERVICES)
    taken_ip = first.api.create(rt, NS, {"metadata": {"name": "s1"}, "spec": {"ports": [{"port": 80}]}},
                                "test")["spec"]["clusterIP"]

    def run_first() -> None:
        _pod(first, "a", gpus=8)
        _scheduler(first).reconcile()
        first.kubelet.reconcile()

    _in_loop(run_first)
    pod_ip = _get(first, "a")["status"]["podIP"]
    first.save()

    again = _cluster(state_file=state)
    assert again.api.create(rt, NS, {"metadata": {"name": "s2"}, "spec": {"ports": [{"port": 80}]}},
                            "test")["spec"]["clusterIP"] != taken_ip

    def run_again() -> None:
        _pod(again, "b")
        _pod(again, "c", gpus=8)
        _scheduler(again).reconcile()
        again.kubelet.reconcile()

    _in_loop(run_again)
    assert _get(again, "a")["status"]["podIP"] == pod_ip  # kept across the restart
    assert _get(again, "b")["status"]["podIP"] != pod_ip
    assert _node_of(again, "c") is None  # the restored pod still holds the node's GPUs


@settings(max_examples=60, deadline=None)
@given(ops=st.lists(st.tuples(st.booleans(), st.integers(0, 30)), max_size=80), seed=st.integers(0, 1000))
def test_address_pool_answers_like_a_scan_from_the_start(ops: list[tuple[bool, int]], seed: int) -> None:
    pool = address_pool("10.244", 1)
    taken: dict[str, int] = {}
    rnd = random.Random(seed)
    for hold, number in ops:
        value = address("10.244", number)
        if hold:
            pool.hold(value)
            taken[value] = taken.get(value, 0) + 1
        elif taken.get(value):
            pool.release(value)
            taken[value] -= 1
            if not taken[value]:
                del taken[value]
        skip = {address("10.244", rnd.randint(0, 30))}
        scan = next(address("10.244", n) for n in range(1, 100) if address("10.244", n) not in set(taken) | skip)
        assert pool.first_free(skip) == scan


def test_follower_folds_changes_in_order_and_rebuilds_after_a_gap() -> None:
    store = Store()
    seen: dict[str, int] = {}
    rebuilds = []

    def fold(old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        if old is not None:
            seen.pop(old["metadata"]["name"])
        if new is not None:
            seen[new["metadata"]["name"]] = new["value"]

    follower = Follower(store, PODS, fold, lambda: (seen.clear(), rebuilds.append(1)))
    store.put(PODS, {"metadata": {"name": "a"}, "value": 1})
    follower.sync()
    assert seen == {"a": 1} and len(rebuilds) == 1
    store.put(PODS, {"metadata": {"name": "a"}, "value": 2})
    store.put(SERVICES, {"metadata": {"name": "s"}, "value": 0})
    store.remove(PODS, {"metadata": {"name": "a"}})
    store.put(PODS, {"metadata": {"name": "b"}, "value": 3})
    follower.sync()
    assert seen == {"b": 3} and len(rebuilds) == 1
    store.rv += 5  # changes never announced
    store.put(PODS, {"metadata": {"name": "c"}, "value": 4})
    follower.sync()
    assert seen == {"b": 3, "c": 4} and len(rebuilds) == 2


def _budget_by_walking(cluster: Cluster, name: str) -> tuple[int, int]:
    """(expectedPods, currentHealthy) of budget `name` by a walk over every pod, as before."""
    pdb = cluster.store.get(PDBS, NS, name)
    assert pdb is not None
    selector = pdb["spec"]["selector"]
    pods = [p for p in cluster.store.list(PODS, NS) if selector_matches(selector, p["metadata"].get("labels"))
            and p.get("status", {}).get("phase") not in ("Succeeded", "Failed")]
    healthy = [p for p in pods if not p["metadata"].get("deletionTimestamp") and any(
        c["type"] == "Ready" and c["status"] == "True" for c in p.get("status", {}).get("conditions", []))]
    return len(pods), len(healthy)


_POD_OPS = st.sampled_from(["create", "ready", "unready", "relabel", "finish", "terminate", "delete"])


@settings(max_examples=40, deadline=None)
@given(steps=st.lists(st.tuples(st.sampled_from(["pod"] * 8 + ["selector", "gap", "restore", "sync", "sync"]),
                                _POD_OPS, st.integers(0, 5), st.sampled_from(["a", "b"])), max_size=40))
@example(steps=[("sync", "create", 0, "a"), ("selector", "create", 0, "b")])
@example(steps=[("sync", "create", 0, "a"), ("pod", "relabel", 0, "b"), ("pod", "finish", 2, "a")])
def test_disruption_budget_counts_answer_like_a_walk(steps: list[tuple[str, str, int, str]]) -> None:
    """Every pod change, a budget's selector changing, a missed change and a restore: after each
    reconcile each budget's status counts what a walk over the store counts."""
    cluster = _cluster()
    api, disruption = cluster.api, cluster.disruption
    pods_rt, pdbs_rt = api.type_of(*PODS), api.type_of(*PDBS)
    for budget, app in (("one", "a"), ("two", "b")):
        api.create(pdbs_rt, NS, {"metadata": {"name": budget}, "spec": {
            "minAvailable": 1, "selector": {"matchLabels": {"app": app}}}}, "test")
    # Another namespace's pods with the same labels are not counted.
    api.create(api.type_of("", "namespaces"), "", {"metadata": {"name": "other"}}, "test")
    api.create(pods_rt, "other", {"metadata": {"name": "p0", "labels": {"app": "a"}}, "spec": {
        "containers": [{"name": "c", "image": "i:1"}]}}, "test")

    def create(name: str, app: str) -> None:
        api.create(pods_rt, NS, {"metadata": {"name": name, "labels": {"app": app}}, "spec": {
            "containers": [{"name": "c", "image": "i:1"}]}}, "test")

    def status(pod: dict[str, Any], **changes: Any) -> None:
        api.write_status(pods_rt, pod, {**(pod.get("status") or {}), **changes}, "test")

    for number in range(5):  # three "a" and two "b": a selector changing changes the counts
        create(f"p{number}", "ab"[number % 2])
        status(_get(cluster, f"p{number}"), phase="Running", conditions=[{"type": "Ready", "status": "True"}])
    disruption.reconcile()
    snapshot = cluster.store.snapshot()

    for kind, op, number, app in steps:
        name = f"p{number}"
        pod = cluster.store.get(PODS, NS, name)
        if kind == "selector":
            pdb = cluster.store.get(PDBS, NS, "one")
            assert pdb is not None
            api.write(pdbs_rt, {**pdb, "spec": {**pdb["spec"], "selector": {"matchLabels": {"app": app}}}}, "test")
        elif kind == "gap":
            cluster.store.rv += 1  # a change never announced
        elif kind == "restore":
            cluster.store.restore(snapshot)
        elif kind == "sync":
            disruption.reconcile()
        elif op == "create" and pod is None:
            create(name, app)
        elif pod is None:
            continue
        elif op in ("ready", "unready"):
            status(pod, phase="Running", conditions=[{"type": "Ready", "status": str(op == "ready")}])
        elif op == "relabel":
            api.write(pods_rt, {**pod, "metadata": {**pod["metadata"], "labels": {"app": app}}}, "test")
        elif op == "finish":
            status(pod, phase="Succeeded")
        elif op == "terminate":
            api.write(pods_rt, {**pod, "metadata": {**pod["metadata"], "finalizers": ["test/hold"]}}, "test")
            api.delete(pods_rt, NS, name, {"gracePeriodSeconds": 0})
        else:
            api.force_remove(pods_rt, pod)
    disruption.reconcile()
    for budget in ("one", "two"):
        pdb = cluster.store.get(PDBS, NS, budget)
        assert pdb is not None
        assert (pdb["status"]["expectedPods"], pdb["status"]["currentHealthy"]) == _budget_by_walking(cluster, budget)


def test_a_budget_whose_selector_cannot_be_read_leaves_the_others_counted() -> None:
    """A matchExpressions entry without its key cannot be read: that budget's sync fails (the
    loop logs it and tries again), the other budgets of its namespace are still counted, and
    once its selector is fixed it is counted too."""
    cluster = _cluster()
    api, disruption = cluster.api, cluster.disruption
    pods_rt, pdbs_rt = api.type_of(*PODS), api.type_of(*PDBS)
    api.create(pdbs_rt, NS, {"metadata": {"name": "broken"}, "spec": {
        "minAvailable": 1, "selector": {"matchExpressions": [{"operator": "Exists"}]}}}, "test")
    api.create(pdbs_rt, NS, {"metadata": {"name": "good"}, "spec": {
        "minAvailable": 1, "selector": {"matchLabels": {"app": "a"}}}}, "test")
    disruption.reconcile()  # no pod to read the selector against yet
    pod = api.create(pods_rt, NS, {"metadata": {"name": "p", "labels": {"app": "a"}}, "spec": {
        "containers": [{"name": "c", "image": "i:1"}]}}, "test")
    api.write_status(pods_rt, pod, {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}, "test")
    with pytest.raises(KeyError):
        disruption.reconcile()
    assert _budget_status(cluster, "good") == (1, 1)
    broken = cluster.store.get(PDBS, NS, "broken")
    assert broken is not None
    api.write(pdbs_rt, {**broken, "spec": {**broken["spec"], "selector": {"matchLabels": {"app": "a"}}}}, "test")
    disruption.reconcile()
    assert _budget_status(cluster, "broken") == _budget_status(cluster, "good") == (1, 1)


def _budget_status(cluster: Cluster, name: str) -> tuple[int, int]:
    pdb = cluster.store.get(PDBS, NS, name)
    assert pdb is not None
    return pdb["status"]["expectedPods"], pdb["status"]["currentHealthy"]
