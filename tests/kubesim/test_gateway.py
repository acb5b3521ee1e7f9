"""The workload cluster's inference gateway (`kubesim.gateway`): the Gateway object describing
it, the capacity report and health probe per InferenceService, and every injectable fault, set
from Python and through the control API."""

from __future__ import annotations

import datetime as dt
import http.client
import time
import uuid
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest

from kubesim.handle import KubeSim
from tests.kubesim.engine_pods import engine_pod, set_serving, start_serving
from tests.kubesim.helpers import wait_for
from tests.kubesim.workload_cluster import request


@pytest.fixture
def remote(workload_kubesim: KubeSim) -> KubeSim:
    return workload_kubesim


@pytest.fixture
def served(remote: KubeSim) -> Iterator[tuple[kubernetes.client.CoreV1Api, str]]:
    """Core client and a fresh namespace; its gateway faults are cleared afterwards."""
    client = remote.api_client()
    core = kubernetes.client.CoreV1Api(client)
    namespace = f"gw-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": namespace}})
    yield core, namespace
    for target in ("probe", "capacity"):
        remote.clear_gateway_fault(namespace, "chat", target)
    client.close()


def endpoint(sim: KubeSim, namespace: str, name: str = "chat") -> str:
    return f"{sim.gateway_url}/{namespace}/{name}"


def report(sim: KubeSim, namespace: str, method: str = "GET") -> tuple[int, Any]:
    return request(sim, method, f"{endpoint(sim, namespace)}/capacity", token=None)


def probe(sim: KubeSim, namespace: str) -> tuple[int, Any]:
    return request(sim, "GET", f"{endpoint(sim, namespace)}/healthz", token=None)


def test_the_gateway_object_describes_the_endpoint(remote: KubeSim) -> None:
    assert remote.gateway_url is not None
    port = int(remote.gateway_url.rsplit(":", 1)[1])
    (gateway,) = [g for g in remote.objects("gateway.networking.k8s.io", "gateways", "ome")
                  if g["metadata"]["name"] == "inference-gateway"]
    assert gateway["apiVersion"] == "gateway.networking.k8s.io/v1"
    assert gateway["spec"]["listeners"][0]["port"] == port
    wait_for(lambda: remote.objects("gateway.networking.k8s.io", "gateways", "ome")[0].get("status"),
             what="the Gateway's status")
    status = remote.objects("gateway.networking.k8s.io", "gateways", "ome")[0]["status"]
    assert status["addresses"][0]["value"] == "127.0.0.1"
    assert {c["type"]: c["status"] for c in status["conditions"]} == {"Accepted": "True", "Programmed": "True"}


def test_capacity_counts_serving_engine_pods_and_the_probe_follows(
    remote: KubeSim, served: tuple[kubernetes.client.CoreV1Api, str]
) -> None:
    core, namespace = served
    assert report(remote, namespace)[1]["servable"] == 0
    assert probe(remote, namespace)[0] == 503
    start_serving(core, namespace, [engine_pod(f"chat-engine-{i}", "r1", "vllm:1") for i in range(2)])
    core.create_namespaced_pod(namespace, engine_pod("chat-engine-9", "r1", "vllm:1"))  # not in rotation
    status, body = report(remote, namespace, "POST")
    assert status == 200 and body["servable"] == 2
    observed = dt.datetime.fromisoformat(body["observedAt"].replace("Z", "+00:00"))
    assert abs((dt.datetime.now(dt.UTC) - observed).total_seconds()) < 5
    assert probe(remote, namespace)[0] == 200
    assert request(remote, "GET", endpoint(remote, namespace), token=None)[0] == 200
    set_serving(core, namespace, "chat-engine-0", False)
    set_serving(core, namespace, "chat-engine-1", False)
    assert report(remote, namespace)[1]["servable"] == 0
    assert probe(remote, namespace)[0] == 503


def test_prefill_decode_serves_the_lower_of_engines_and_decoders(
    remote: KubeSim, served: tuple[kubernetes.client.CoreV1Api, str]
) -> None:
    core, namespace = served
    start_serving(core, namespace, [engine_pod(f"chat-engine-{i}", "r1", "vllm:1") for i in range(2)])
    core.create_namespaced_pod(namespace, engine_pod("chat-decoder-0", "r1", "vllm:1", component="decoder"))
    assert report(remote, namespace)[1]["servable"] == 0
    set_serving(core, namespace, "chat-decoder-0", True)
    assert report(remote, namespace)[1]["servable"] == 1


@pytest.mark.parametrize("target", ["probe", "capacity"])
def test_faults_bend_one_target_until_cleared(remote: KubeSim, served: tuple[Any, str], target: str) -> None:
    _, namespace = served
    answer = report if target == "capacity" else probe
    other = probe if target == "capacity" else report
    usual = answer(remote, namespace)
    remote.set_gateway_fault(namespace, "chat", target, status=500, body="boom")
    assert answer(remote, namespace) == (500, "boom")
    assert other(remote, namespace)[0] == (503 if target == "capacity" else 200)
    remote.set_gateway_fault(namespace, "chat", target, delaySeconds=0.3)
    started = time.monotonic()
    assert answer(remote, namespace)[0] == usual[0]
    assert time.monotonic() - started >= 0.3
    remote.set_gateway_fault(namespace, "chat", target, close=True)
    conn = http.client.HTTPConnection("127.0.0.1", int((remote.gateway_url or "").rsplit(":", 1)[1]), timeout=10)
    try:
        with pytest.raises((http.client.RemoteDisconnected, ConnectionResetError)):
            conn.request("GET", f"/{namespace}/chat/{'capacity' if target == 'capacity' else 'ready'}")
            conn.getresponse()
    finally:
        conn.close()
    assert remote.clear_gateway_fault(namespace, "chat", target)
    assert not remote.clear_gateway_fault(namespace, "chat", target)
    assert answer(remote, namespace)[0] == usual[0]


def test_capacity_faults_override_the_count_and_the_stamp(remote: KubeSim, served: tuple[Any, str]) -> None:
    _, namespace = served
    remote.set_gateway_fault(namespace, "chat", "capacity", servable=7, observedAt="2020-01-01T00:00:00Z")
    assert report(remote, namespace) == (200, {"servable": 7, "observedAt": "2020-01-01T00:00:00Z"})
    remote.set_gateway_fault(namespace, "chat", "probe", servable=3)
    assert probe(remote, namespace)[0] == 200


def test_the_control_api_sets_lists_and_clears_faults(remote: KubeSim, served: tuple[Any, str]) -> None:
    _, namespace = served
    where = {"namespace": namespace, "name": "chat", "target": "capacity"}
    status, answer = request(remote, "POST", "/kubesim/gateway/faults", body={**where, "servable": 0, "close": False})
    assert status == 200 and {**where, "servable": 0} in answer["faults"]
    _, answer = request(remote, "POST", "/kubesim/gateway/faults", body={**where, "servable": -1})
    assert report(remote, namespace)[1]["servable"] == -1
    assert request(remote, "GET", "/kubesim/gateway/faults")[1]["faults"] == answer["faults"]
    status, answer = request(remote, "DELETE", "/kubesim/gateway/faults", body=where)
    assert status == 200 and answer["cleared"] is True
    assert report(remote, namespace)[1]["servable"] == 0


@pytest.mark.parametrize("body", [
    {"namespace": "a", "name": "b", "target": "elsewhere"},
    {"namespace": "a", "target": "probe"},
    {"namespace": "a", "name": "b", "target": "probe", "status": "500"},
    {"namespace": "a", "name": "b", "target": "probe", "delaySeconds": -1},
    {"namespace": "a", "name": "b", "target": "probe", "colour": "red"},
])
def test_the_control_api_refuses_a_malformed_fault(remote: KubeSim, body: dict[str, Any]) -> None:
    status, answer = request(remote, "POST", "/kubesim/gateway/faults", body=body)
    assert status == 400 and answer["reason"] == "BadRequest"


def test_paths_outside_an_inference_service_are_not_found(remote: KubeSim) -> None:
    assert request(remote, "GET", f"{remote.gateway_url}/only-one", token=None)[0] == 404
