"""ResourceQuota on object counts (`kubesim.quota_objects`, `kubesim.quota`): `services`,
`count/configmaps`, `count/deployments.apps` and the other names that count objects of a kind
are counted by the quota controller and enforced at creation with the API server's 403, judged
on the quota's status; an object deleted frees its room once counted again."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from kubesim.errors import ApiError
from kubesim.quota import QUOTAS, admit
from kubesim.quota_objects import counted_kind, object_usage
from kubesim.store import Store
from tests.kubesim.helpers import Clients, wait_for
from tests.kubesim.test_resource_quota import quota, used

SERVICES = ("", "services")


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("services", ("", "services")),
        ("count/services", ("", "services")),
        ("services.nodeports", ("", "services")),
        ("services.loadbalancers", ("", "services")),
        ("configmaps", ("", "configmaps")),
        ("count/configmaps", ("", "configmaps")),
        ("secrets", ("", "secrets")),
        ("persistentvolumeclaims", ("", "persistentvolumeclaims")),
        ("resourcequotas", ("", "resourcequotas")),
        ("count/deployments.apps", ("apps", "deployments")),
        ("count/inferenceservices.ome.io", ("ome.io", "inferenceservices")),
        ("count/pods", None),  # the pod evaluator's (`kubesim.quota_usage`)
        ("pods", None),
        ("deployments", None),  # only `count/deployments.apps` counts them
        ("requests.storage", None),
        ("requests.nvidia.com/gpu", None),
        ("count/", None),
    ],
)
def test_a_quota_name_counts_the_objects_of_one_kind(name: str, kind: tuple[str, str] | None) -> None:
    assert counted_kind(name) == kind


def _service(kind: str | None, ports: int = 1, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"ports": [{"port": 80 + n, "nodePort": 30000 + n} for n in range(ports)], **spec}
    if kind is not None:
        body["type"] = kind
    return {"metadata": {"name": "s", "namespace": "ns"}, "spec": body}


@pytest.mark.parametrize(
    ("service", "nodeports", "loadbalancers"),
    [
        pytest.param(_service(None), 0, 0, id="ClusterIP by default"),
        pytest.param(_service("ClusterIP", clusterIP="None"), 0, 0, id="headless"),
        pytest.param(_service("NodePort", ports=2), 2, 0, id="NodePort: each port"),
        pytest.param(_service("LoadBalancer", ports=3), 3, 1, id="LoadBalancer"),
        pytest.param(
            {"metadata": {"name": "s"}, "spec": {"type": "LoadBalancer", "allocateLoadBalancerNodePorts": False,
                                                 "ports": [{"port": 80}, {"port": 81, "nodePort": 30001}]}},
            1,
            1,
            id="LoadBalancer without node ports: only those given one",
        ),
    ],
)
def test_a_service_uses_its_node_ports_and_load_balancer(service: dict[str, Any], nodeports: int, loadbalancers: int) -> None:
    shown = {name: str(amount) for name, amount in object_usage(SERVICES, service).items()}
    assert shown == {
        "count/services": "1",
        "services": "1",
        "services.nodeports": str(nodeports),
        "services.loadbalancers": str(loadbalancers),
    }


def _quota(name: str, hard: dict[str, str], used: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns"}, "spec": {"hard": hard}, "status": {"hard": hard, "used": used}}


@pytest.mark.parametrize(
    ("kind", "quotas", "outcome"),
    [
        pytest.param(SERVICES, [_quota("q", {"services": "2"}, {"services": "1"})], {"q": {"services": "2"}}, id="room"),
        pytest.param(
            SERVICES,
            [_quota("q", {"services": "2", "pods": "1"}, {"services": "2", "pods": "1"})],
            'services "x" is forbidden: exceeded quota: q, requested: services=1, used: services=2, limited: services=2',
            id="full",
        ),
        pytest.param(
            SERVICES,
            [_quota("q", {"services.loadbalancers": "0"}, {"services.loadbalancers": "0"})],
            {"q": {"services.loadbalancers": "0"}},
            id="a ClusterIP Service takes no load balancer",
        ),
        pytest.param(
            SERVICES,
            [_quota("q", {"count/services": "3"}, {})],
            'services "x" is forbidden: status unknown for quota: q, resources: count/services',
            id="not counted yet",
        ),
        pytest.param(SERVICES, [_quota("q", {"pods": "0"}, {"pods": "0"})], {}, id="a pod quota: not the Service's"),
        pytest.param(
            ("apps", "deployments"),
            [_quota("q", {"count/deployments.apps": "1"}, {"count/deployments.apps": "1"})],
            'deployments.apps "x" is forbidden: exceeded quota: q, requested: count/deployments.apps=1, '
            "used: count/deployments.apps=1, limited: count/deployments.apps=1",
            id="another group's kind",
        ),
    ],
)
def test_admission_judges_an_object_on_each_quotas_status(kind: tuple[str, str], quotas: list[dict[str, Any]], outcome: Any) -> None:
    store = Store()
    for body in quotas:
        store.put(QUOTAS, body)
    obj = {"metadata": {"name": "x", "namespace": "ns"}, "spec": {"ports": [{"port": 80}]}}
    if isinstance(outcome, str):
        with pytest.raises(ApiError) as error:
            admit(store, kind, obj)
        assert (error.value.code, error.value.message) == (403, outcome)
        return
    assert {q["metadata"]["name"]: status["used"] for q, status in admit(store, kind, obj)} == outcome


def _headless(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"clusterIP": "None", "selector": {"app": name}}}


def test_a_service_over_the_quota_is_refused_until_one_goes(k8s: Clients) -> None:
    ns = k8s.namespace
    quota(k8s, "objects", {"services": "2", "count/configmaps": "1"})
    assert wait_for(lambda: used(k8s, "objects"), what="the quota's status") == {"services": "0", "count/configmaps": "0"}
    for name in ("a", "b"):
        k8s.core.create_namespaced_service(ns, _headless(name))
    with pytest.raises(ApiException) as error:
        k8s.core.create_namespaced_service(ns, _headless("c"))
    body = json.loads(error.value.body)
    assert (error.value.status, body["reason"]) == (403, "Forbidden")
    assert body["message"] == (
        'services "c" is forbidden: exceeded quota: objects, requested: services=1, used: services=2, limited: services=2'
    )
    assert body["details"] == {"name": "c", "kind": "services"}
    k8s.core.create_namespaced_config_map(ns, {"metadata": {"name": "one"}})
    with pytest.raises(ApiException) as refused:
        k8s.core.create_namespaced_config_map(ns, {"metadata": {"name": "two"}})
    assert json.loads(refused.value.body)["message"].startswith('configmaps "two" is forbidden: exceeded quota: objects')
    # A Service deleted frees its room once the controller has counted again.
    k8s.core.delete_namespaced_service("a", ns)
    wait_for(lambda: used(k8s, "objects") == {"services": "1", "count/configmaps": "1"} or None, what="one Service")
    k8s.core.create_namespaced_service(ns, _headless("c"))
    assert wait_for(lambda: used(k8s, "objects") == {"services": "2", "count/configmaps": "1"} or None, what="two")


def test_a_deployment_count_names_its_group(k8s: Clients) -> None:
    ns = k8s.namespace
    quota(k8s, "apps", {"count/deployments.apps": "0"})
    deployment = {
        "metadata": {"name": "web"},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
        },
    }
    with pytest.raises(ApiException) as error:
        k8s.apps.create_namespaced_deployment(ns, deployment)
    body = json.loads(error.value.body)
    assert body["message"] == (
        'deployments.apps "web" is forbidden: exceeded quota: apps, requested: count/deployments.apps=1, '
        "used: count/deployments.apps=0, limited: count/deployments.apps=0"
    )
    assert body["details"] == {"name": "web", "group": "apps", "kind": "deployments"}
