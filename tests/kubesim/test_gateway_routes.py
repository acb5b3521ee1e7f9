"""The Gateway API and Inference Extension CRDs kubesim serves with `--crds product`, and its
simulated gateway controller's route status: Accepted and ResolvedRefs per parentRef, as a
Gateway implementation reports them."""

from __future__ import annotations

from typing import Any

import kubernetes
import pytest

from tests.kubesim.helpers import Clients, wait_for

GW = ("gateway.networking.k8s.io", "v1")
CONTROLLER = "kubesim.ome.io/gateway-controller"


def gateway(name: str, hostname: str | None = None) -> dict[str, Any]:
    listener: dict[str, Any] = {"name": "http", "port": 80, "protocol": "HTTP"}
    if hostname:
        listener["hostname"] = hostname
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "metadata": {"name": name},
            "spec": {"gatewayClassName": "kubesim", "listeners": [listener]}}


def route(name: str, parent: str, backend: str, hostnames: list[str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute", "metadata": {"name": name},
            "spec": {"parentRefs": [{"name": parent}], "hostnames": hostnames or ["chat.global.example.com"],
                     "rules": [{"backendRefs": [{"name": backend, "port": 80, "weight": 1}]}]}}


def service(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"type": "ExternalName", "externalName": "127.0.0.1"}}


def parent_conditions(k8s: Clients, name: str) -> dict[str, tuple[str, str]] | None:
    obj = k8s.custom.get_namespaced_custom_object(*GW, k8s.namespace, "httproutes", name)
    parents = [p for p in (obj.get("status") or {}).get("parents") or [] if p["controllerName"] == CONTROLLER]
    generation = obj["metadata"]["generation"]
    if not parents or any(c["observedGeneration"] != generation for c in parents[0]["conditions"]):
        return None  # not reconciled yet
    return {c["type"]: (c["status"], c["reason"]) for c in parents[0]["conditions"]}


def wait_conditions(k8s: Clients, name: str, expected: dict[str, tuple[str, str]]) -> None:
    wait_for(lambda: parent_conditions(k8s, name) == expected, what=f"route {name} to report {expected}")


def test_the_gateway_and_inference_crds_are_served(k8s: Clients) -> None:
    ext = kubernetes.client.ApiextensionsV1Api(k8s.api)
    crds = {c.metadata.name: c for c in ext.list_custom_resource_definition().items}
    for name, version in [("gatewayclasses.gateway.networking.k8s.io", "v1"),
                          ("gateways.gateway.networking.k8s.io", "v1"),
                          ("httproutes.gateway.networking.k8s.io", "v1"),
                          ("inferencepools.inference.networking.k8s.io", "v1"),
                          ("inferencepoolimports.inference.networking.x-k8s.io", "v1alpha1")]:
        assert [v.name for v in crds[name].spec.versions] == [version]
        assert crds[name].spec.versions[0].subresources.status is not None
    assert crds["gatewayclasses.gateway.networking.k8s.io"].spec.scope == "Cluster"
    classes = k8s.custom.list_cluster_custom_object(*GW, "gatewayclasses")["items"]
    assert [c["spec"]["controllerName"] for c in classes if c["metadata"]["name"] == "kubesim"] == [CONTROLLER]


def test_a_route_to_a_gateway_is_accepted_and_resolves_once_its_service_exists(k8s: Clients) -> None:
    k8s.custom.create_namespaced_custom_object(*GW, k8s.namespace, "gateways", gateway("global"))
    k8s.custom.create_namespaced_custom_object(*GW, k8s.namespace, "httproutes", route("chat", "global", "tmb-1"))
    wait_conditions(k8s, "chat", {"Accepted": ("True", "Accepted"), "ResolvedRefs": ("False", "BackendNotFound")})
    k8s.core.create_namespaced_service(k8s.namespace, service("tmb-1"))
    wait_conditions(k8s, "chat", {"Accepted": ("True", "Accepted"), "ResolvedRefs": ("True", "ResolvedRefs")})
    k8s.custom.patch_namespaced_custom_object(*GW, k8s.namespace, "httproutes", "chat",
                                              {"spec": {"rules": [{"backendRefs": [{"name": "tmb-2", "port": 80}]}]}})
    wait_conditions(k8s, "chat", {"Accepted": ("True", "Accepted"), "ResolvedRefs": ("False", "BackendNotFound")})
    obj = k8s.custom.get_namespaced_custom_object(*GW, k8s.namespace, "httproutes", "chat")
    assert obj["metadata"]["generation"] == 2
    gw = wait_for(lambda: k8s.custom.get_namespaced_custom_object(*GW, k8s.namespace, "gateways", "global")
                  .get("status"), what="the Gateway's status")
    assert gw["listeners"][0]["attachedRoutes"] == 1


def test_a_route_to_a_missing_gateway_has_no_matching_parent(k8s: Clients) -> None:
    k8s.core.create_namespaced_service(k8s.namespace, service("tmb-1"))
    k8s.custom.create_namespaced_custom_object(*GW, k8s.namespace, "httproutes", route("lost", "nowhere", "tmb-1"))
    wait_conditions(k8s, "lost", {"Accepted": ("False", "NoMatchingParent"), "ResolvedRefs": ("True", "ResolvedRefs")})
    k8s.custom.create_namespaced_custom_object(*GW, k8s.namespace, "gateways", gateway("nowhere"))
    wait_conditions(k8s, "lost", {"Accepted": ("True", "Accepted"), "ResolvedRefs": ("True", "ResolvedRefs")})


@pytest.mark.parametrize(("listener", "accepted"), [("*.global.example.com", True), ("other.example.com", False)])
def test_listener_hostnames_must_admit_the_route(k8s: Clients, listener: str, accepted: bool) -> None:
    k8s.core.create_namespaced_service(k8s.namespace, service("tmb-1"))
    k8s.custom.create_namespaced_custom_object(*GW, k8s.namespace, "gateways", gateway("gw", listener))
    k8s.custom.create_namespaced_custom_object(*GW, k8s.namespace, "httproutes", route("r", "gw", "tmb-1"))
    reason = ("True", "Accepted") if accepted else ("False", "NoMatchingListenerHostname")
    wait_conditions(k8s, "r", {"Accepted": reason, "ResolvedRefs": ("True", "ResolvedRefs")})


def test_inference_pools_and_imports_take_status(k8s: Clients) -> None:
    pool = {"apiVersion": "inference.networking.k8s.io/v1", "kind": "InferencePool", "metadata": {"name": "chat"},
            "spec": {"selector": {"matchLabels": {"ome.io/inferenceservice": "chat"}}, "targetPorts": [{"number": 8000}]}}
    k8s.custom.create_namespaced_custom_object("inference.networking.k8s.io", "v1", k8s.namespace, "inferencepools",
                                               pool)
    imp = {"apiVersion": "inference.networking.x-k8s.io/v1alpha1", "kind": "InferencePoolImport",
           "metadata": {"name": "chat"}}
    x = ("inference.networking.x-k8s.io", "v1alpha1")
    k8s.custom.create_namespaced_custom_object(*x, k8s.namespace, "inferencepoolimports", imp)
    status = {"status": {"controllers": [{"name": "ome.io/trafficmap", "exportingClusters": [{"name": "worker-a"}]}]}}
    k8s.custom.patch_namespaced_custom_object_status(*x, k8s.namespace, "inferencepoolimports", "chat", status)
    got = k8s.custom.get_namespaced_custom_object(*x, k8s.namespace, "inferencepoolimports", "chat")
    assert got["status"] == status["status"]
