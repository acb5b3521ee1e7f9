"""The endpoint controller at scale and to the Kubernetes contract: EndpointSlices of at most
100 endpoints, stable under single-pod changes; Endpoints capped with the over-capacity
annotation; only the Services a change concerns are touched. Also the other fleet-scale
paths: the store's label index and the scheduler's per-pass pods-per-node index."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubesim.cluster import Cluster
from kubesim.controllers.endpoints import (
    MAX_ENDPOINTS_ADDRESSES,
    MAX_ENDPOINTS_PER_SLICE,
    OVER_CAPACITY,
    EndpointsController,
)
from kubesim.scheduler import live_pods_by_node, schedule_pod
from kubesim.selectors import parse_label_selector
from kubesim.store import Store
from kubesim.timing import Timing
from tests.kubesim.scheduler_pods import bind, instance_pod
from tests.kubesim.test_scheduler_properties import clusters

pytestmark = pytest.mark.kubesim

NS = "ep"
SLICES = ("discovery.k8s.io", "endpointslices")
MANAGED_BY = "endpointslice.kubernetes.io/managed-by"


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    sim = Cluster("zones=1,nodes-per-zone=3,gpus=8",
                  Timing(pull_seconds=0, start_seconds=0, ready_seconds=0, factor=0.001))
    await sim.start()
    sim.api.create(sim.api.type_of("", "namespaces"), "", {"metadata": {"name": NS}}, "test")
    try:
        yield sim
    finally:
        await sim.stop()


def controller(sim: Cluster) -> EndpointsController:
    return next(c for c in sim.controllers if isinstance(c, EndpointsController))


async def until(check: Callable[[], Any], what: str, seconds: float = 60.0) -> Any:
    deadline = asyncio.get_running_loop().time() + seconds
    last: Any = None
    while asyncio.get_running_loop().time() < deadline:
        last = check()
        if last:
            return last
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out after {seconds}s waiting for {what} (last value: {last!r})")


def make_service(sim: Cluster, name: str, selector: dict[str, str], headless: bool = False) -> None:
    spec: dict[str, Any] = {"selector": selector, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}
    if headless:
        spec["clusterIP"] = "None"
    sim.api.create(sim.api.type_of("", "services"), NS, {"metadata": {"name": name, "labels": {"team": "a"}},
                                                       "spec": spec}, "test")


def make_pod(sim: Cluster, name: str, labels: dict[str, str], gated: bool = False, **spec: Any) -> None:
    body: dict[str, Any] = {"containers": [{"name": "c", "image": "img:1"}], **spec}
    if gated:
        body["readinessGates"] = [{"conditionType": "ome.io/serving"}]
    sim.api.create(sim.api.type_of("", "pods"), NS, {"metadata": {"name": name, "labels": labels}, "spec": body},
                   "test")


def make_pods(sim: Cluster, count: int, labels: dict[str, str], prefix: str = "p", gated: bool = False) -> None:
    for i in range(count):
        make_pod(sim, f"{prefix}-{i:04d}", {**labels, "i": str(i)}, gated=gated)


def slices_of(sim: Cluster, service: str) -> list[dict[str, Any]]:
    return [s for s in sim.store.list(SLICES, NS)
            if (s["metadata"].get("labels") or {}).get("kubernetes.io/service-name") == service]


def ready_names(sim: Cluster, service: str) -> list[str]:
    return [e["targetRef"]["name"] for s in slices_of(sim, service) for e in s.get("endpoints") or []
            if e["conditions"]["ready"]]


def versions(sim: Cluster, service: str) -> dict[str, str]:
    return {s["metadata"]["name"]: s["metadata"]["resourceVersion"] for s in slices_of(sim, service)}


async def test_a_big_service_is_split_into_slices_of_at_most_100(cluster: Cluster) -> None:
    assert MAX_ENDPOINTS_PER_SLICE == 100 and MAX_ENDPOINTS_ADDRESSES == 1000  # the kube defaults
    make_service(cluster, "big", {"app": "big"})
    make_pods(cluster, 230, {"app": "big"})
    await until(lambda: len(ready_names(cluster, "big")) == 230, "230 ready endpoints")
    slices = slices_of(cluster, "big")
    assert len(slices) >= 3
    names = [e["targetRef"]["name"] for s in slices for e in s["endpoints"]]
    assert sorted(names) == [f"p-{i:04d}" for i in range(230)]  # every pod exactly once
    svc = cluster.store.get(("", "services"), NS, "big")
    assert svc is not None
    for s in slices:
        meta = s["metadata"]
        assert len(s["endpoints"]) <= 100
        assert meta["name"].startswith("big-") and meta["generateName"] == "big-"
        assert meta["labels"]["kubernetes.io/service-name"] == "big"
        assert meta["labels"][MANAGED_BY] == "endpointslice-controller.k8s.io"
        assert meta["labels"]["team"] == "a"  # the Service's own labels are copied
        assert meta["ownerReferences"][0]["uid"] == svc["metadata"]["uid"]
        assert s["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP"}] and s["addressType"] == "IPv4"
    # The Endpoints object (under its 1000 cap) lists them all, without the over-capacity mark.
    ep = cluster.store.get(("", "endpoints"), NS, "big")
    assert ep is not None and len(ep["subsets"][0]["addresses"]) == 230
    assert OVER_CAPACITY not in (ep["metadata"].get("annotations") or {})


async def test_one_pod_change_rewrites_only_its_slice(cluster: Cluster) -> None:
    make_service(cluster, "big", {"app": "big"})
    make_pods(cluster, 150, {"app": "big"})
    await until(lambda: len(ready_names(cluster, "big")) == 150, "150 ready endpoints")
    before = versions(cluster, "big")
    assert len(before) >= 2
    holder = next(s["metadata"]["name"] for s in slices_of(cluster, "big")
                  if any(e["targetRef"]["name"] == "p-0042" for e in s["endpoints"]))
    # The pod leaves the Service (its label changes): only the slice holding it is rewritten.
    rt = cluster.api.type_of("", "pods")
    pod = cluster.store.get(rt.key, NS, "p-0042")
    assert pod is not None
    cluster.api.write(rt, {**pod, "metadata": {**pod["metadata"], "labels": {"app": "other"}}}, "test")
    await until(lambda: "p-0042" not in ready_names(cluster, "big"), "p-0042 out of the slices")
    after = versions(cluster, "big")
    assert set(after) == set(before)
    assert [n for n in before if before[n] != after[n]] == [holder]
    # A change that does not concern endpoints (an annotation) writes nothing at all.
    ep_rv = cluster.store.get(("", "endpoints"), NS, "big")["metadata"]["resourceVersion"]  # type: ignore[index]
    pod = cluster.store.get(rt.key, NS, "p-0007")
    assert pod is not None
    cluster.api.write(rt, {**pod, "metadata": {**pod["metadata"], "annotations": {"note": "x"}}}, "test")
    await asyncio.sleep(0.2)
    assert versions(cluster, "big") == after
    assert cluster.store.get(("", "endpoints"), NS, "big")["metadata"]["resourceVersion"] == ep_rv  # type: ignore[index]


async def test_endpoints_over_capacity_keep_ready_addresses_first(cluster: Cluster) -> None:
    endpoints = controller(cluster)
    endpoints.max_endpoints_addresses = 30  # the mechanism of the 1000 cap, at test size
    make_service(cluster, "cap", {"app": "cap"})
    make_pods(cluster, 20, {"app": "cap"}, prefix="r")
    make_pods(cluster, 20, {"app": "cap"}, prefix="n", gated=True)  # never Ready: their gate stays unset

    def truncated() -> dict[str, Any] | None:
        ep = cluster.store.get(("", "endpoints"), NS, "cap")
        subsets = (ep or {}).get("subsets") or [{}]
        full = len(subsets[0].get("addresses") or []) == 20 and len(subsets[0].get("notReadyAddresses") or []) == 10
        return ep if full else None

    ep = await until(truncated, "Endpoints truncated to 30 addresses, the 20 ready ones kept")
    assert ep["metadata"]["annotations"][OVER_CAPACITY] == "truncated"
    assert {a["targetRef"]["name"] for a in ep["subsets"][0]["addresses"]} == {f"r-{i:04d}" for i in range(20)}
    # Slices are not capped that way: all 40 pods are there.
    assert len([e for s in slices_of(cluster, "cap") for e in s["endpoints"]]) == 40
    # Back under the cap, the annotation goes.
    rt = cluster.api.type_of("", "pods")
    for i in range(15):
        cluster.api.delete(rt, NS, f"n-{i:04d}", {"gracePeriodSeconds": 0})

    def clear() -> bool:
        ep = cluster.store.get(("", "endpoints"), NS, "cap") or {}
        subset = (ep.get("subsets") or [{}])[0]
        return (OVER_CAPACITY not in (ep.get("metadata", {}).get("annotations") or {})
                and len(subset.get("notReadyAddresses") or []) == 5)

    await until(clear, "the over-capacity annotation removed")


async def test_headless_services_per_instance_and_service_lifecycle(cluster: Cluster) -> None:
    make_service(cluster, "all", {"app": "m"})
    for i in range(5):
        make_service(cluster, f"m-{i}", {"app": "m", "i": str(i)}, headless=True)
    make_pods(cluster, 5, {"app": "m"})
    await until(lambda: all(ready_names(cluster, f"m-{i}") == [f"p-{i:04d}"] for i in range(5)),
                "each headless Service listing its own pod")
    assert len(ready_names(cluster, "all")) == 5
    one = slices_of(cluster, "m-3")[0]
    assert one["metadata"]["labels"]["service.kubernetes.io/headless"] == ""
    # A selector change moves the Service to other pods; a deletion removes its Endpoints.
    svc_rt = cluster.api.type_of("", "services")
    svc = cluster.store.get(svc_rt.key, NS, "m-3")
    assert svc is not None
    cluster.api.write(svc_rt, {**svc, "spec": {**svc["spec"], "selector": {"app": "m", "i": "4"}}}, "test")
    await until(lambda: ready_names(cluster, "m-3") == ["p-0004"], "m-3 following its new selector")
    cluster.api.delete(svc_rt, NS, "m-3")
    await until(lambda: cluster.store.get(("", "endpoints"), NS, "m-3") is None, "m-3's Endpoints deleted")
    # A Service whose pods are all gone keeps one empty slice.
    cluster.api.delete(cluster.api.type_of("", "pods"), NS, "p-0001", {"gracePeriodSeconds": 0})
    await until(lambda: [s["endpoints"] for s in slices_of(cluster, "m-1")] == [[]], "m-1's empty slice")


async def test_a_slice_deleted_by_someone_else_comes_back(cluster: Cluster) -> None:
    make_service(cluster, "svc", {"app": "s"})
    make_pods(cluster, 3, {"app": "s"})
    await until(lambda: len(ready_names(cluster, "svc")) == 3, "3 ready endpoints")
    name = slices_of(cluster, "svc")[0]["metadata"]["name"]
    cluster.api.delete(cluster.api.type_of(*SLICES), NS, name)
    await until(lambda: len(ready_names(cluster, "svc")) == 3, "the endpoints published again")


async def test_endpoints_edited_by_someone_else_are_put_back_at_the_next_sync(cluster: Cluster) -> None:
    """The controller keeps each pod's address and skips a sync in which none moved, but only
    while the Endpoints are as it left them: after a foreign edit, the next sync (here from a pod
    change that moves no address) writes them back."""
    make_service(cluster, "svc", {"app": "e"})
    make_pods(cluster, 3, {"app": "e"})
    ep_rt = cluster.api.type_of("", "endpoints")

    def addresses() -> list[str]:
        ep = cluster.store.get(ep_rt.key, NS, "svc") or {}
        return sorted(a["targetRef"]["name"] for s in ep.get("subsets") or [] for a in s.get("addresses") or [])

    await until(lambda: addresses() == ["p-0000", "p-0001", "p-0002"], "3 ready addresses")
    ep = cluster.store.get(ep_rt.key, NS, "svc")
    assert ep is not None
    cluster.api.write(ep_rt, {k: v for k, v in ep.items() if k != "subsets"}, "someone")
    assert addresses() == []
    rt = cluster.api.type_of("", "pods")
    pod = cluster.store.get(rt.key, NS, "p-0001")
    assert pod is not None
    cluster.api.write(rt, {**pod, "metadata": {**pod["metadata"], "annotations": {"note": "x"}}}, "test")
    await until(lambda: addresses() == ["p-0000", "p-0001", "p-0002"], "the 3 addresses written back")


def endpoints_of(sim: Cluster, service: str) -> list[dict[str, Any]]:
    return ((sim.store.get(("", "endpoints"), NS, service) or {}).get("subsets")) or []


def conditions_of(sim: Cluster, service: str) -> dict[str, dict[str, Any]]:
    return {e["targetRef"]["name"]: e["conditions"] for s in slices_of(sim, service) for e in s.get("endpoints") or []}


def hold_and_delete(sim: Cluster, name: str) -> None:
    """Delete a pod that a finalizer keeps terminating until `release`."""
    rt = sim.api.type_of("", "pods")
    pod = sim.store.get(rt.key, NS, name)
    assert pod is not None
    sim.api.write(rt, {**pod, "metadata": {**pod["metadata"], "finalizers": ["test/hold"]}}, "test")
    sim.api.delete(rt, NS, name)


async def test_a_headless_service_that_publishes_not_ready_addresses_lists_every_pod_as_ready(
    cluster: Cluster,
) -> None:
    """The Instance's own Service (`planning.instance.pods.render_headless_service`): headless,
    no ports, `publishNotReadyAddresses`. Its pods are listed from their first IP, also while
    they terminate; only `serving` follows their readiness."""
    cluster.api.create(cluster.api.type_of("", "services"), NS, {
        "metadata": {"name": "inst"},
        "spec": {"clusterIP": "None", "selector": {"app": "i"}, "publishNotReadyAddresses": True}}, "test")
    make_pod(cluster, "inst-0", {"app": "i"}, gated=True, hostname="inst-0", subdomain="inst")
    make_pod(cluster, "inst-1", {"app": "i"})

    def listed() -> list[dict[str, Any]] | None:
        subsets = endpoints_of(cluster, "inst")
        return subsets if subsets and len(subsets[0].get("addresses") or []) == 2 else None

    subsets = await until(listed, "both pods in addresses, the unready one too")
    assert len(subsets) == 1 and "ports" not in subsets[0] and "notReadyAddresses" not in subsets[0]
    addresses = {a["targetRef"]["name"]: a for a in subsets[0]["addresses"]}
    assert addresses["inst-0"]["hostname"] == "inst-0" and "hostname" not in addresses["inst-1"]
    await until(lambda: conditions_of(cluster, "inst").get("inst-1", {}).get("serving"), "inst-1 serving")
    conditions = conditions_of(cluster, "inst")
    assert conditions["inst-0"] == {"ready": True, "serving": False, "terminating": False}
    assert conditions["inst-1"] == {"ready": True, "serving": True, "terminating": False}
    endpoint = next(e for s in slices_of(cluster, "inst") for e in s["endpoints"] if e["targetRef"]["name"] == "inst-0")
    assert endpoint["hostname"] == "inst-0"
    assert all(s["ports"] == [] for s in slices_of(cluster, "inst"))
    hold_and_delete(cluster, "inst-1")
    await until(lambda: conditions_of(cluster, "inst")["inst-1"]["terminating"], "inst-1 terminating")
    assert conditions_of(cluster, "inst")["inst-1"]["ready"] is True
    assert {a["targetRef"]["name"] for a in endpoints_of(cluster, "inst")[0]["addresses"]} == {"inst-0", "inst-1"}


async def test_a_terminating_pod_leaves_endpoints_and_is_not_ready_in_its_slice(cluster: Cluster) -> None:
    make_service(cluster, "svc", {"app": "t"})
    make_pods(cluster, 2, {"app": "t"})
    await until(lambda: len(ready_names(cluster, "svc")) == 2, "2 ready endpoints")
    hold_and_delete(cluster, "p-0001")
    await until(lambda: conditions_of(cluster, "svc")["p-0001"]["terminating"], "p-0001 terminating")
    # Not ready whatever it serves (its containers stop within the test's scaled grace period).
    assert conditions_of(cluster, "svc")["p-0001"]["ready"] is False
    await until(lambda: len(endpoints_of(cluster, "svc")[0].get("addresses") or []) == 1, "p-0001 gone")
    [subset] = endpoints_of(cluster, "svc")
    assert [a["targetRef"]["name"] for a in subset["addresses"]] == ["p-0000"]
    assert "notReadyAddresses" not in subset


async def test_pods_that_differ_in_their_ports_get_subsets_repacked_by_port(cluster: Cluster) -> None:
    cluster.api.create(cluster.api.type_of("", "services"), NS, {
        "metadata": {"name": "web"},
        "spec": {"selector": {"app": "w"}, "ports": [{"name": "web", "port": 80, "targetPort": "web"}]}}, "test")
    for name, port in (("a", 8080), ("b", 8080), ("c", 9090)):
        make_pod(cluster, name, {"app": "w"},
                 containers=[{"name": "c", "image": "img:1", "ports": [{"name": "web", "containerPort": port}]}])
    make_pod(cluster, "d", {"app": "w"})  # no port named `web`: not in Endpoints, as the real controller has it

    def repacked() -> dict[int, list[str]] | None:
        subsets = endpoints_of(cluster, "web")
        shape = {s["ports"][0]["port"]: [a["targetRef"]["name"] for a in s.get("addresses") or []] for s in subsets}
        return shape if sum(map(len, shape.values())) == 3 else None

    shape = await until(repacked, "3 ready addresses in 2 subsets")
    assert {port: sorted(names) for port, names in shape.items()} == {8080: ["a", "b"], 9090: ["c"]}
    ips = [a["ip"] for a in endpoints_of(cluster, "web")[0]["addresses"]]
    assert ips == sorted(ips, key=lambda ip: tuple(int(part) for part in ip.split(".")))


def test_store_label_index_follows_writes_and_restores() -> None:
    store = Store()
    pods = ("", "pods")

    def put(ns: str, name: str, labels: dict[str, str]) -> None:
        store.put(pods, {"metadata": {"namespace": ns, "name": name, "labels": labels}})

    def names(ns: str | None, selector: str) -> list[str]:
        return [o["metadata"]["name"] for o in store.select(pods, ns, parse_label_selector(selector))]

    put("a", "x", {"app": "m", "i": "1"})
    put("a", "y", {"app": "m", "i": "2"})
    put("b", "z", {"app": "m", "i": "1"})
    assert names("a", "app=m") == ["x", "y"] and names(None, "i=1") == ["x", "z"]
    assert names("a", "app=m,i in (2,3)") == ["y"] and names("a", "app=m,i!=1") == ["y"]
    assert names("a", "!i") == [] and names(None, "app") == ["x", "y", "z"]
    put("a", "x", {"app": "other"})  # a relabel moves it in the index
    assert names("a", "app=m") == ["y"] and names("a", "app=other") == ["x"]
    store.remove(pods, {"metadata": {"namespace": "a", "name": "y"}})
    assert names("a", "app=m") == [] and [o["metadata"]["name"] for o in store.list(pods, "a")] == ["x"]
    restored = Store()
    restored.restore(store.snapshot())
    assert [o["metadata"]["name"] for o in restored.select(pods, None, parse_label_selector("i=1"))] == ["z"]
    assert [o["metadata"]["name"] for o in restored.list(pods, "b")] == ["z"]
    assert restored.label_count(pods, "app", "m") == 1


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster=clusters(), gpus=st.lists(st.sampled_from([1, 2, 4, 8]), min_size=1, max_size=8))
def test_scheduler_pods_per_node_index_places_like_a_full_walk(
    cluster: tuple[list[dict[str, Any]], list[dict[str, Any]]], gpus: list[int]
) -> None:
    """The scheduling loop passes a pods-per-node index it extends per binding: the same
    placements as walking every pod for every pod."""
    nodes, existing = cluster
    placed = list(existing)
    by_node = live_pods_by_node(placed)
    for index, count in enumerate(gpus):
        pod = instance_pod(index=index, gpus=count, spread="Preferred")
        walked = schedule_pod(pod, nodes, placed)
        indexed = schedule_pod(pod, nodes, placed, by_node=by_node)
        assert (indexed.node_name, indexed.message, indexed.scores) == (walked.node_name, walked.message,
                                                                       walked.scores)
        if walked.node_name:
            bound = bind(pod, walked.node_name)
            placed.append(bound)
            by_node.put(("placed", index), bound)
