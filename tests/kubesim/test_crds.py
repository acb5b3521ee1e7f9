"""CustomResourceDefinitions and custom resources: the product CRDs, status and scale
subresources, cluster scope, CRDs created and deleted at runtime, and the optional PodGroup."""

from __future__ import annotations

from pathlib import Path

import kubernetes
import pytest
import yaml
from kubernetes.client.rest import ApiException

from kubesim.cluster import CRD_DIR
from tests.kubesim.helpers import Clients, raw_request, wait_for

GROUP, VERSION = "ome.io", "v1beta1"


def test_product_crds_are_installed_with_their_names(k8s: Clients) -> None:
    ext = kubernetes.client.ApiextensionsV1Api(k8s.api)
    crds = {c.metadata.name: c for c in ext.list_custom_resource_definition().items}
    expected = {
        "inferenceservices.ome.io",
        "inferencereplicas.ome.io",
        "servingruntimes.ome.io",
        "clusterservingruntimes.ome.io",
        "trafficmaps.ome.io",
        "workloadclusters.ome.io",
    }
    assert expected <= set(crds)
    assert "podgroups.scheduling.x-k8s.io" not in crds
    irep = crds["inferencereplicas.ome.io"]
    assert irep.spec.names.short_names == ["irep"]
    columns = [c.name for c in irep.spec.versions[0].additional_printer_columns]
    assert columns[:5] == ["COMPONENT", "DESIRED", "CURRENT", "READY", "AVAILABLE"]
    assert crds["clusterservingruntimes.ome.io"].spec.scope == "Cluster"
    established = {c.type: c.status for c in irep.status.conditions}
    assert established == {"NamesAccepted": "True", "Established": "True"}


def test_custom_resource_status_and_scale(k8s: Clients) -> None:
    ns, custom = k8s.namespace, k8s.custom
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "InferenceReplica",
        "metadata": {"name": "r"},
        "spec": {"replicas": 2, "component": "engine"},
        "status": {"replicas": 99},
    }
    created = custom.create_namespaced_custom_object(GROUP, VERSION, ns, "inferencereplicas", body)
    assert "status" not in created and created["metadata"]["generation"] == 1
    status = {"status": {"replicas": 2, "readyReplicas": 1, "labelSelector": "app=r"}}
    after = custom.patch_namespaced_custom_object_status(GROUP, VERSION, ns, "inferencereplicas", "r", status)
    assert after["status"]["readyReplicas"] == 1 and after["metadata"]["generation"] == 1
    scale = custom.get_namespaced_custom_object_scale(GROUP, VERSION, ns, "inferencereplicas", "r")
    assert scale["spec"]["replicas"] == 2 and scale["status"] == {"replicas": 2, "selector": "app=r"}
    custom.patch_namespaced_custom_object_scale(
        GROUP, VERSION, ns, "inferencereplicas", "r", {"spec": {"replicas": 5}}
    )
    obj = custom.get_namespaced_custom_object(GROUP, VERSION, ns, "inferencereplicas", "r")
    assert obj["spec"]["replicas"] == 5 and obj["metadata"]["generation"] == 2
    # A PUT of a custom resource must carry its resourceVersion.
    del obj["metadata"]["resourceVersion"]
    with pytest.raises(ApiException) as err:
        custom.replace_namespaced_custom_object(GROUP, VERSION, ns, "inferencereplicas", "r", obj)
    assert err.value.status == 422


def test_cluster_scoped_custom_resource(k8s: Clients) -> None:
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "WorkloadCluster",
        "metadata": {"name": f"wc-{k8s.namespace}"},
        "spec": {"clusterSource": {"kubeConfig": {"secretRef": {"name": "s", "namespace": "n"}}}},
    }
    k8s.custom.create_cluster_custom_object(GROUP, VERSION, "workloadclusters", body)
    got = k8s.custom.get_cluster_custom_object(GROUP, VERSION, "workloadclusters", f"wc-{k8s.namespace}")
    assert "namespace" not in got["metadata"]
    k8s.custom.delete_cluster_custom_object(GROUP, VERSION, "workloadclusters", f"wc-{k8s.namespace}")


def test_optional_podgroup_crd_installs_and_uninstalls(k8s: Clients) -> None:
    ext = kubernetes.client.ApiextensionsV1Api(k8s.api)
    path = Path(CRD_DIR) / "optional" / "podgroups.scheduling.x-k8s.io.yaml"
    crd = yaml.safe_load(path.read_text())
    with pytest.raises(ApiException) as err:
        k8s.custom.list_namespaced_custom_object(
            "scheduling.x-k8s.io", "v1alpha1", k8s.namespace, "podgroups"
        )
    assert err.value.status == 404
    ext.create_custom_resource_definition(crd)
    try:
        pg = {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "g"},
            "spec": {"minMember": 2},
        }
        k8s.custom.create_namespaced_custom_object(
            "scheduling.x-k8s.io", "v1alpha1", k8s.namespace, "podgroups", pg
        )
        listed = k8s.custom.list_namespaced_custom_object(
            "scheduling.x-k8s.io", "v1alpha1", k8s.namespace, "podgroups"
        )
        assert [i["metadata"]["name"] for i in listed["items"]] == ["g"]
    finally:
        ext.delete_custom_resource_definition(crd["metadata"]["name"])

    def removed() -> bool:
        try:
            k8s.custom.list_namespaced_custom_object(
                "scheduling.x-k8s.io", "v1alpha1", k8s.namespace, "podgroups"
            )
        except ApiException as exc:
            return exc.status == 404
        return False

    wait_for(removed, what="podgroups served no more")


def test_invalid_crd_is_rejected(k8s: Clients) -> None:
    ext = kubernetes.client.ApiextensionsV1Api(k8s.api)
    bad = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "wrong.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "things", "kind": "Thing"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": {"type": "object"}},
                }
            ],
        },
    }
    with pytest.raises(ApiException) as err:
        ext.create_custom_resource_definition(bad)
    assert err.value.status == 422
    assert "spec.names.plural" in err.value.body


def test_kubectl_style_table_uses_printer_columns(k8s: Clients) -> None:
    ns = k8s.namespace
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "InferenceReplica", "metadata": {"name": "engine"},
            "spec": {"replicas": 3, "component": "engine"}}
    k8s.custom.create_namespaced_custom_object(GROUP, VERSION, ns, "inferencereplicas", body)
    k8s.custom.patch_namespaced_custom_object_status(GROUP, VERSION, ns, "inferencereplicas", "engine", {
        "status": {"replicas": 3, "readyReplicas": 2, "availableReplicas": 1}})
    code, table = raw_request(k8s.sim, "GET", f"/apis/{GROUP}/{VERSION}/namespaces/{ns}/inferencereplicas",
                              accept="application/json;as=Table;v=v1;g=meta.k8s.io,application/json")
    assert code == 200 and table["kind"] == "Table"
    names = [c["name"] for c in table["columnDefinitions"]]
    assert names == ["Name", "COMPONENT", "DESIRED", "CURRENT", "READY", "AVAILABLE", "AGE"]
    assert table["rows"][0]["cells"][:6] == ["engine", "engine", 3, 3, 2, 1]
    assert table["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
