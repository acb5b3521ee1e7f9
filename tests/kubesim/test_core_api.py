"""Contract tests of the core REST semantics, through the official `kubernetes` client."""

from __future__ import annotations

import http.client
import json
import urllib.request

import kubernetes
import pytest
from kubernetes.client.rest import ApiException

from tests.kubesim.helpers import Clients, pod_body, raw_request


def _status(exc: ApiException) -> dict:
    return json.loads(exc.body)


def test_create_get_list_delete_configmap(k8s: Clients) -> None:
    ns = k8s.namespace
    created, code, _ = k8s.core.create_namespaced_config_map_with_http_info(
        ns, {"metadata": {"name": "a", "labels": {"tier": "web"}}, "data": {"k": "v"}})
    assert code == 201
    assert created.metadata.uid and created.metadata.creation_timestamp is not None
    assert int(created.metadata.resource_version) > 0
    got = k8s.core.read_namespaced_config_map("a", ns)
    assert got.data == {"k": "v"} and got.metadata.uid == created.metadata.uid
    listed = k8s.core.list_namespaced_config_map(ns)
    assert [c.metadata.name for c in listed.items] == ["a"]
    assert int(listed.metadata.resource_version) >= int(created.metadata.resource_version)
    k8s.core.delete_namespaced_config_map("a", ns)
    with pytest.raises(ApiException) as err:
        k8s.core.read_namespaced_config_map("a", ns)
    assert err.value.status == 404
    status = _status(err.value)
    assert status["kind"] == "Status" and status["reason"] == "NotFound"
    assert status["message"] == 'configmaps "a" not found'


def test_already_exists_is_409_status(k8s: Clients) -> None:
    k8s.core.create_namespaced_config_map(k8s.namespace, {"metadata": {"name": "dup"}})
    with pytest.raises(ApiException) as err:
        k8s.core.create_namespaced_config_map(k8s.namespace, {"metadata": {"name": "dup"}})
    assert err.value.status == 409 and _status(err.value)["reason"] == "AlreadyExists"


def test_stale_resource_version_conflicts_on_put_and_patch(k8s: Clients) -> None:
    ns = k8s.namespace
    first = k8s.core.create_namespaced_config_map(ns, {"metadata": {"name": "cm"}, "data": {"a": "1"}})
    first.data = {"a": "2"}
    second = k8s.core.replace_namespaced_config_map("cm", ns, first)
    assert int(second.metadata.resource_version) > int(first.metadata.resource_version)
    first.data = {"a": "3"}
    with pytest.raises(ApiException) as err:
        k8s.core.replace_namespaced_config_map("cm", ns, first)  # carries the stale resourceVersion
    assert err.value.status == 409 and _status(err.value)["reason"] == "Conflict"
    stale_patch = {"metadata": {"resourceVersion": first.metadata.resource_version}, "data": {"a": "4"}}
    with pytest.raises(ApiException) as err:
        k8s.core.patch_namespaced_config_map("cm", ns, stale_patch)
    assert err.value.status == 409
    assert k8s.core.read_namespaced_config_map("cm", ns).data == {"a": "2"}


def test_noop_update_keeps_resource_version(k8s: Clients) -> None:
    cm = k8s.core.create_namespaced_config_map(k8s.namespace, {"metadata": {"name": "same"}, "data": {"a": "1"}})
    again = k8s.core.patch_namespaced_config_map("same", k8s.namespace, {"data": {"a": "1"}})
    assert again.metadata.resource_version == cm.metadata.resource_version


def test_generation_bumps_on_spec_changes_only(k8s: Clients) -> None:
    ns = k8s.namespace
    body = {"metadata": {"name": "d"}, "spec": {"replicas": 0, "selector": {"matchLabels": {"a": "b"}},
            "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "x:1"}]}}}}
    deploy = k8s.apps.create_namespaced_deployment(ns, body)
    assert deploy.metadata.generation == 1
    labelled = k8s.apps.patch_namespaced_deployment("d", ns, {"metadata": {"labels": {"x": "y"}}})
    assert labelled.metadata.generation == 1
    scaled = k8s.apps.patch_namespaced_deployment("d", ns, {"spec": {"replicas": 1}})
    assert scaled.metadata.generation == 2


def test_status_subresource_is_kept_apart(k8s: Clients) -> None:
    ns = k8s.namespace
    k8s.core.create_namespaced_service(ns, {"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}})
    # A status change through the main resource is ignored ...
    svc = k8s.core.patch_namespaced_service(
        "s", ns, {"status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}})
    assert not svc.status.load_balancer.ingress
    # ... and a spec change through status is ignored too.
    svc = k8s.core.patch_namespaced_service_status(
        "s", ns, {"spec": {"sessionAffinity": "ClientIP"}, "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}})
    assert svc.status.load_balancer.ingress[0].ip == "1.2.3.4"
    assert svc.spec.session_affinity == "None"


def test_label_and_field_selectors(k8s: Clients) -> None:
    ns = k8s.namespace
    for name, tier, env in (("a", "web", "prod"), ("b", "web", "dev"), ("c", "db", "prod")):
        k8s.core.create_namespaced_config_map(ns, {"metadata": {"name": name, "labels": {"tier": tier, "env": env}}})
    k8s.core.create_namespaced_config_map(ns, {"metadata": {"name": "d"}})

    def names(**kw: str) -> list[str]:
        return [c.metadata.name for c in k8s.core.list_namespaced_config_map(ns, **kw).items]

    assert names(label_selector="tier=web") == ["a", "b"]
    assert names(label_selector="tier==web,env!=dev") == ["a"]
    assert names(label_selector="env in (prod, dev),tier notin (db)") == ["a", "b"]
    assert names(label_selector="!tier") == ["d"]
    assert names(label_selector="tier") == ["a", "b", "c"]
    assert names(field_selector="metadata.name=c") == ["c"]
    assert names(field_selector="metadata.name!=c", label_selector="env=prod") == ["a"]
    with pytest.raises(ApiException) as err:
        k8s.core.list_namespaced_config_map(ns, field_selector="data.k=v")
    assert err.value.status == 400 and "field label not supported" in _status(err.value)["message"]


def test_pod_field_selectors(k8s: Clients) -> None:
    ns = k8s.namespace
    k8s.core.create_namespaced_pod(ns, pod_body("placed", nodeName="gpu-node-2"))
    k8s.core.create_namespaced_pod(ns, pod_body("waiting", schedulerName="absent-scheduler"))
    on_node = k8s.core.list_namespaced_pod(ns, field_selector="spec.nodeName=gpu-node-2")
    assert [p.metadata.name for p in on_node.items] == ["placed"]
    pending = k8s.core.list_namespaced_pod(ns, field_selector="status.phase=Pending,spec.nodeName=")
    assert [p.metadata.name for p in pending.items] == ["waiting"]


def test_limit_and_continue_page_through_everything(k8s: Clients) -> None:
    ns = k8s.namespace
    for i in range(7):
        k8s.core.create_namespaced_config_map(ns, {"metadata": {"name": f"cm-{i}"}})
    seen, token, pages = [], None, 0
    while True:
        page = k8s.core.list_namespaced_config_map(ns, limit=3, _continue=token)
        seen += [c.metadata.name for c in page.items]
        pages += 1
        token = page.metadata._continue
        if not token:
            break
        assert page.metadata.remaining_item_count == 7 - len(seen)
    assert pages == 3 and seen == [f"cm-{i}" for i in range(7)]


def test_invalid_objects_answer_422_with_causes(k8s: Clients) -> None:
    with pytest.raises(ApiException) as err:
        k8s.core.create_namespaced_pod(k8s.namespace, {"metadata": {"name": "Bad_Name"},
                                                       "spec": {"containers": [{"name": "c"}]}})
    status = _status(err.value)
    assert err.value.status == 422 and status["reason"] == "Invalid"
    fields = {c["field"] for c in status["details"]["causes"]}
    assert {"metadata.name", "spec.containers[0].image"} <= fields


def test_immutable_pod_fields_are_refused(k8s: Clients) -> None:
    ns = k8s.namespace
    k8s.core.create_namespaced_pod(ns, pod_body("p", schedulerName="absent-scheduler"))
    # The image may change ...
    pod = k8s.core.patch_namespaced_pod("p", ns, {"spec": {"containers": [{"name": "main", "image": "server:2"}]}})
    assert pod.spec.containers[0].image == "server:2"
    # ... the command may not.
    with pytest.raises(ApiException) as err:
        k8s.core.patch_namespaced_pod("p", ns, {"spec": {"containers": [{"name": "main", "command": ["x"]}]}})
    assert err.value.status == 422
    assert "pod updates may not change fields" in _status(err.value)["message"]


def test_namespace_must_exist(k8s: Clients) -> None:
    with pytest.raises(ApiException) as err:
        k8s.core.create_namespaced_config_map("no-such-ns", {"metadata": {"name": "x"}})
    assert err.value.status == 404 and 'namespaces "no-such-ns" not found' in _status(err.value)["message"]


def test_generate_name(k8s: Clients) -> None:
    cm = k8s.core.create_namespaced_config_map(k8s.namespace, {"metadata": {"generateName": "gen-"}})
    assert cm.metadata.name.startswith("gen-") and len(cm.metadata.name) == 9


def test_discovery_and_version_serve_dynamic_clients(k8s: Clients) -> None:
    version = kubernetes.client.VersionApi(k8s.api).get_code()
    assert version.major == "1" and version.git_version.startswith("v1.37")
    dynamic = kubernetes.dynamic.DynamicClient(k8s.api)
    deployments = dynamic.resources.get(api_version="apps/v1", kind="Deployment")
    assert deployments.namespaced and deployments.name == "deployments"
    irep = dynamic.resources.get(api_version="ome.io/v1beta1", kind="InferenceReplica")
    created = irep.create(namespace=k8s.namespace, body={"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica",
                                                          "metadata": {"name": "r"}, "spec": {"replicas": 1}})
    assert created.metadata.name == "r"
    with urllib.request.urlopen(f"{k8s.sim.url}/api/v1") as resp:
        names = {r["name"] for r in json.load(resp)["resources"]}
    assert {"pods", "pods/status", "pods/eviction", "pods/binding", "nodes", "services"} <= names


def test_post_without_content_type_is_json(k8s: Clients) -> None:
    body = json.dumps({"metadata": {"name": "raw"}, "data": {"x": "1"}})
    conn = http.client.HTTPConnection("127.0.0.1", k8s.sim.port, timeout=10)
    conn.putrequest("POST", f"/api/v1/namespaces/{k8s.namespace}/configmaps")
    conn.putheader("Content-Length", str(len(body)))
    conn.endheaders(body.encode())
    resp = conn.getresponse()
    assert resp.status == 201
    assert json.loads(resp.read())["data"] == {"x": "1"}
    conn.close()


def test_delete_collection_by_label(k8s: Clients) -> None:
    ns = k8s.namespace
    for name, keep in (("a", "no"), ("b", "no"), ("c", "yes")):
        k8s.core.create_namespaced_config_map(ns, {"metadata": {"name": name, "labels": {"keep": keep}}})
    k8s.core.delete_collection_namespaced_config_map(ns, label_selector="keep=no")
    assert [c.metadata.name for c in k8s.core.list_namespaced_config_map(ns).items] == ["c"]


def test_uid_in_a_patch_is_a_precondition(k8s: Clients) -> None:
    ns = k8s.namespace
    k8s.core.create_namespaced_config_map(ns, {"metadata": {"name": "u"}})
    with pytest.raises(ApiException) as err:
        k8s.core.patch_namespaced_config_map("u", ns, {"metadata": {"uid": "not-the-uid"}, "data": {"a": "1"}})
    assert err.value.status == 409 and "Precondition failed: UID" in _status(err.value)["message"]


def test_pods_table_for_kubectl(k8s: Clients) -> None:
    k8s.core.create_namespaced_pod(k8s.namespace, pod_body("shown", schedulerName="absent-scheduler"))
    code, table = raw_request(k8s.sim, "GET", f"/api/v1/namespaces/{k8s.namespace}/pods",
                              accept="application/json;as=Table;v=v1;g=meta.k8s.io")
    assert code == 200
    columns = table["columnDefinitions"]
    assert [c["name"] for c in columns if c["priority"] == 0] == ["Name", "Ready", "Status", "Restarts", "Age"]
    # -o wide shows the priority-1 columns too, after Age.
    assert [c["name"] for c in columns[5:]] == ["IP", "Node", "Nominated Node", "Readiness Gates"]
    assert {c["priority"] for c in columns[5:]} == {1}
    assert table["rows"][0]["cells"][:4] == ["shown", "0/1", "Pending", 0]


def test_discovery_documents_satisfy_client_models(k8s: Clients) -> None:
    versions = kubernetes.client.CoreApi(k8s.api).get_api_versions()
    assert versions.versions == ["v1"] and versions.server_address_by_client_cidrs
    groups = {g.name: g for g in kubernetes.client.ApisApi(k8s.api).get_api_versions().groups}
    assert {"apps", "policy", "ome.io", "apiextensions.k8s.io", "discovery.k8s.io"} <= set(groups)
    assert groups["ome.io"].preferred_version.group_version == "ome.io/v1beta1"
    resources = {r.name: r for r in k8s.core.get_api_resources().resources}
    assert resources["pods/eviction"].kind == "Eviction" and resources["pods"].short_names == ["po"]
    ome = kubernetes.client.CustomObjectsApi(k8s.api).get_api_resources("ome.io", "v1beta1")
    names = {r.name for r in ome.resources}
    assert {"inferencereplicas", "inferencereplicas/status", "inferencereplicas/scale"} <= names


def test_create_with_a_resource_version_is_refused(k8s: Clients) -> None:
    with pytest.raises(ApiException) as err:
        k8s.core.create_namespaced_config_map(k8s.namespace, {"metadata": {"name": "x", "resourceVersion": "5"}})
    assert err.value.status == 500
    assert _status(err.value)["message"] == "resourceVersion should not be set on objects to be created"


def test_services_get_cluster_ips_and_node_ports(k8s: Clients) -> None:
    ns = k8s.namespace
    plain = k8s.core.create_namespaced_service(ns, {"metadata": {"name": "plain"}, "spec": {"ports": [{"port": 80}]}})
    headless = k8s.core.create_namespaced_service(ns, {"metadata": {"name": "headless"}, "spec": {
        "clusterIP": "None", "ports": [{"port": 80}]}})
    node_port = k8s.core.create_namespaced_service(ns, {"metadata": {"name": "np"}, "spec": {
        "type": "NodePort", "ports": [{"port": 80, "targetPort": 8080}]}})
    assert plain.spec.cluster_ip.startswith("10.96.") and plain.spec.ports[0].target_port == 80
    assert headless.spec.cluster_ip == "None"
    assert 30000 <= node_port.spec.ports[0].node_port <= 32767
    with pytest.raises(ApiException) as err:
        k8s.core.patch_namespaced_service("plain", ns, {"spec": {"clusterIP": "10.96.200.200"}})
    assert err.value.status == 422
