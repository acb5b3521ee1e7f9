"""PATCH formats and server-side apply, through the official client and as pure functions."""

from __future__ import annotations

import json

import pytest
from kubernetes.client.rest import ApiException

from kubesim.errors import ApiError
from kubesim.patch import json_patch, merge_patch, strategic_merge_patch
from tests.kubesim.helpers import Clients, condition, pod_body, raw_request, wait_for


def test_merge_patch_deletes_with_null() -> None:
    assert merge_patch({"a": {"b": 1, "c": 2}, "l": [1, 2]}, {"a": {"b": None}, "l": [3]}) == {"a": {"c": 2}, "l": [3]}


def test_json_patch_operations_and_failed_test() -> None:
    doc = {"a": [1, 2], "b": {"c": 1}}
    out = json_patch(doc, [{"op": "add", "path": "/a/-", "value": 3}, {"op": "replace", "path": "/b/c", "value": 2},
                           {"op": "move", "from": "/b/c", "path": "/d"}, {"op": "test", "path": "/d", "value": 2}])
    assert out == {"a": [1, 2, 3], "b": {}, "d": 2}
    assert doc == {"a": [1, 2], "b": {"c": 1}}  # the input is untouched
    with pytest.raises(ApiError) as err:
        json_patch(doc, [{"op": "test", "path": "/a/0", "value": 9}])
    assert err.value.code == 422


def test_strategic_merge_uses_schema_merge_keys() -> None:
    pod = {"spec": {"containers": [{"name": "a", "image": "1", "env": [{"name": "X", "value": "1"}]},
                                   {"name": "b", "image": "1"}],
                    "tolerations": [{"key": "k"}]},
           "metadata": {"finalizers": ["f1"]}}
    patch = {"spec": {"containers": [{"name": "a", "env": [{"name": "Y", "value": "2"}]},
                                     {"name": "b", "$patch": "delete"}],
                      "tolerations": [{"key": "other"}]},
             "metadata": {"finalizers": ["f2"]}}
    out = strategic_merge_patch(pod, patch)
    assert out["spec"]["containers"] == [{"name": "a", "image": "1", "env": [{"name": "X", "value": "1"},
                                                                              {"name": "Y", "value": "2"}]}]
    assert out["spec"]["tolerations"] == [{"key": "other"}]  # atomic list: replaced
    assert out["metadata"]["finalizers"] == ["f1", "f2"]  # merged primitive list
    ports = strategic_merge_patch({"spec": {"ports": [{"port": 80, "name": "http"}]}},
                                  {"spec": {"ports": [{"port": 443, "name": "https"}]}})
    assert [p["port"] for p in ports["spec"]["ports"]] == [80, 443]


def test_patch_formats_through_the_client(k8s: Clients) -> None:
    ns = k8s.namespace
    k8s.core.create_namespaced_pod(ns, pod_body("p", labels={"a": "1"}, schedulerName="absent-scheduler"))
    # A dict body goes as strategic merge patch: the containers list merges by name.
    pod = k8s.core.patch_namespaced_pod("p", ns, {"spec": {"containers": [{"name": "main", "image": "server:9"}]}})
    assert [(c.name, c.image) for c in pod.spec.containers] == [("main", "server:9")]
    # A list body goes as JSON patch.
    pod = k8s.core.patch_namespaced_pod("p", ns, [{"op": "add", "path": "/metadata/labels/b", "value": "2"}])
    assert pod.metadata.labels == {"a": "1", "b": "2"}
    with pytest.raises(ApiException) as err:
        k8s.core.patch_namespaced_pod("p", ns, [{"op": "test", "path": "/metadata/labels/b", "value": "3"}])
    assert err.value.status == 422


def test_readiness_gate_condition_merges_by_type(k8s: Clients) -> None:
    ns = k8s.namespace
    k8s.core.create_namespaced_pod(ns, pod_body("p", nodeSelector={"no-such-label": "x"}))
    wait_for(lambda: condition(k8s.core.read_namespaced_pod("p", ns), "PodScheduled"), what="PodScheduled=False")
    k8s.core.patch_namespaced_pod_status("p", ns, {"status": {"conditions": [{"type": "ome.io/serving",
                                                                              "status": "False"}]}})
    pod = k8s.core.patch_namespaced_pod_status("p", ns, {"status": {"conditions": [
        {"type": "ome.io/serving", "status": "True"}]}})
    serving = [c for c in pod.status.conditions if c.type == "ome.io/serving"]
    assert len(serving) == 1 and serving[0].status == "True"
    assert any(c.type == "PodScheduled" for c in pod.status.conditions)  # the scheduler's condition is kept


def test_strategic_merge_on_custom_resources_is_415(k8s: Clients) -> None:
    ns = k8s.namespace
    body = {"apiVersion": "ome.io/v1beta1", "kind": "TrafficMap", "metadata": {"name": "t"}, "spec": {"mode": "a"}}
    k8s.custom.create_namespaced_custom_object("ome.io", "v1beta1", ns, "trafficmaps", body)
    code, status = raw_request(k8s.sim, "PATCH", f"/apis/ome.io/v1beta1/namespaces/{ns}/trafficmaps/t",
                               {"spec": {"mode": "b"}}, "application/strategic-merge-patch+json")
    assert code == 415 and status["reason"] == "UnsupportedMediaType"
    patched = k8s.custom.patch_namespaced_custom_object("ome.io", "v1beta1", ns, "trafficmaps", "t",
                                                        {"spec": {"mode": "b"}})
    assert patched["spec"]["mode"] == "b"


class ApplyConflict(Exception):
    def __init__(self, code: int, status: dict) -> None:
        super().__init__(status.get("message"))
        self.code, self.status = code, status


def _apply(k8s: Clients, name: str, data: dict, manager: str, force: bool = False) -> dict:
    yaml_body = f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata: {json.dumps(data)}\n"
    path = f"/api/v1/namespaces/{k8s.namespace}/configmaps/{name}?fieldManager={manager}" + (
        "&force=true" if force else "")
    code, obj = raw_request(k8s.sim, "PATCH", path, yaml_body, "application/apply-patch+yaml")
    if code >= 400:
        raise ApplyConflict(code, obj)
    return obj


def test_server_side_apply_owns_fields_and_reports_conflicts(k8s: Clients) -> None:
    created = _apply(k8s, "ssa", {"a": "1", "b": "1"}, "alice")
    assert created["data"] == {"a": "1", "b": "1"}
    assert [m["manager"] for m in created["metadata"]["managedFields"]] == ["alice"]
    # Bob changing alice's field conflicts ...
    with pytest.raises(ApplyConflict) as err:
        _apply(k8s, "ssa", {"a": "2"}, "bob")
    assert err.value.code == 409
    assert err.value.status["details"]["causes"][0] == {"type": "FieldManagerConflict",
                                                        "message": 'conflict with "alice"', "field": ".data.a"}
    # ... unless forced, which moves ownership of `a` to bob.
    forced = _apply(k8s, "ssa", {"a": "2"}, "bob", force=True)
    assert forced["data"] == {"a": "2", "b": "1"}
    # Alice stops applying `b`: nobody else owns it, so it is removed. `a` is bob's and stays.
    final = _apply(k8s, "ssa", {}, "alice")
    assert final["data"] == {"a": "2"}
    owners = {m["manager"]: m["fieldsV1"] for m in final["metadata"]["managedFields"]}
    assert owners["bob"] == {"f:data": {"f:a": {}}}


def test_update_takes_ownership_from_an_applier(k8s: Clients) -> None:
    _apply(k8s, "mixed", {"a": "1"}, "alice")
    k8s.core.patch_namespaced_config_map("mixed", k8s.namespace, {"data": {"a": "9"}}, field_manager="editor")
    cm = k8s.core.read_namespaced_config_map("mixed", k8s.namespace)
    managers = {m.manager: m.operation for m in cm.metadata.managed_fields}
    assert managers == {"editor": "Update"}


def test_apply_merges_keyed_lists_and_drops_items_no_longer_applied() -> None:
    from kubesim.apply import server_side_apply

    def deployment(*containers: str) -> dict:
        return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                "spec": {"template": {"spec": {"containers": [{"name": c, "image": f"{c}:1"} for c in containers]}}}}

    first = server_side_apply(None, deployment("a", "b"), "alice", force=False, builtin=True)
    # Another manager adds a sidecar through the same keyed list.
    second = server_side_apply(first, deployment("sidecar"), "bob", force=False, builtin=True)
    names = [c["name"] for c in second["spec"]["template"]["spec"]["containers"]]
    assert names == ["a", "b", "sidecar"]
    # Alice stops applying "b": it goes; bob's sidecar stays.
    third = server_side_apply(second, deployment("a"), "alice", force=False, builtin=True)
    assert [c["name"] for c in third["spec"]["template"]["spec"]["containers"]] == ["a", "sidecar"]
