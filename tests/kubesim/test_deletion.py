"""Deletion semantics: finalizers and deletionTimestamp, graceful pod deletion, garbage
collection by ownerReferences (background, foreground, orphan) and namespace teardown."""

from __future__ import annotations

import pytest
from kubernetes.client.rest import ApiException

from tests.kubesim.helpers import Clients, is_ready, pod_body, wait_for


def _gone(read: object) -> bool:
    try:
        read()  # type: ignore[operator]
    except ApiException as exc:
        return exc.status == 404
    return False


def test_finalizer_holds_object_until_removed(k8s: Clients) -> None:
    ns = k8s.namespace
    k8s.core.create_namespaced_config_map(ns, {"metadata": {"name": "f", "finalizers": ["example.com/hold"]}})
    _, code, _ = k8s.core.delete_namespaced_config_map_with_http_info("f", ns)
    assert code == 202
    held = k8s.core.read_namespaced_config_map("f", ns)
    assert held.metadata.deletion_timestamp is not None
    with pytest.raises(ApiException) as err:
        k8s.core.patch_namespaced_config_map("f", ns, {"metadata": {"finalizers": ["example.com/hold", "more"]}})
    assert err.value.status == 422
    k8s.core.patch_namespaced_config_map("f", ns, [{"op": "remove", "path": "/metadata/finalizers"}])
    assert _gone(lambda: k8s.core.read_namespaced_config_map("f", ns))


def test_pod_graceful_deletion_honours_grace_and_zero_is_immediate(k8s: Clients) -> None:
    ns = k8s.namespace
    k8s.core.create_namespaced_pod(ns, pod_body("slow", terminationGracePeriodSeconds=60))
    k8s.core.create_namespaced_pod(ns, pod_body("now"))
    wait_for(lambda: all(is_ready(k8s.core.read_namespaced_pod(n, ns)) for n in ("slow", "now")), what="pods ready")
    pod = k8s.core.delete_namespaced_pod("slow", ns)
    assert pod.metadata.deletion_timestamp is not None and pod.metadata.deletion_grace_period_seconds == 60
    still = k8s.core.read_namespaced_pod("slow", ns)
    assert still.metadata.deletion_timestamp is not None
    # 60 s of grace at the test factor of 0.01 is 0.6 s: the kubelet then finishes the deletion.
    wait_for(lambda: _gone(lambda: k8s.core.read_namespaced_pod("slow", ns)), what="graceful deletion")
    k8s.core.delete_namespaced_pod("now", ns, grace_period_seconds=0)
    assert _gone(lambda: k8s.core.read_namespaced_pod("now", ns))


def test_unscheduled_pod_is_deleted_at_once(k8s: Clients) -> None:
    ns = k8s.namespace
    k8s.core.create_namespaced_pod(ns, pod_body("nowhere", schedulerName="absent-scheduler"))
    k8s.core.delete_namespaced_pod("nowhere", ns)
    assert _gone(lambda: k8s.core.read_namespaced_pod("nowhere", ns))


def _owner_and_children(k8s: Clients) -> str:
    ns = k8s.namespace
    owner = k8s.core.create_namespaced_config_map(ns, {"metadata": {"name": "owner"}})
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid,
           "blockOwnerDeletion": True}
    for name in ("child-1", "child-2"):
        k8s.core.create_namespaced_config_map(ns, {"metadata": {"name": name, "ownerReferences": [ref]}})
    return owner.metadata.uid


def test_background_deletion_collects_dependents(k8s: Clients) -> None:
    _owner_and_children(k8s)
    k8s.core.delete_namespaced_config_map("owner", k8s.namespace, propagation_policy="Background")
    wait_for(lambda: not k8s.core.list_namespaced_config_map(k8s.namespace).items, what="dependents collected")


def test_foreground_deletion_waits_for_dependents(k8s: Clients) -> None:
    ns = k8s.namespace
    _owner_and_children(k8s)
    k8s.core.create_namespaced_config_map(ns, {"metadata": {"name": "child-3", "finalizers": ["example.com/slow"],
                                                            "ownerReferences": [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
         "uid": k8s.core.read_namespaced_config_map("owner", ns).metadata.uid}]}})
    k8s.core.delete_namespaced_config_map("owner", ns, propagation_policy="Foreground")
    wait_for(lambda: [c.metadata.name for c in k8s.core.list_namespaced_config_map(ns).items] == ["child-3", "owner"],
             what="children without finalizers collected")
    owner = k8s.core.read_namespaced_config_map("owner", ns)
    assert owner.metadata.deletion_timestamp is not None and "foregroundDeletion" in owner.metadata.finalizers
    k8s.core.patch_namespaced_config_map("child-3", ns, [{"op": "remove", "path": "/metadata/finalizers"}])
    wait_for(lambda: not k8s.core.list_namespaced_config_map(ns).items, what="owner released")


def test_orphan_deletion_keeps_dependents_without_the_reference(k8s: Clients) -> None:
    ns = k8s.namespace
    _owner_and_children(k8s)
    k8s.core.delete_namespaced_config_map("owner", ns, propagation_policy="Orphan")
    wait_for(lambda: _gone(lambda: k8s.core.read_namespaced_config_map("owner", ns)), what="owner deleted")
    children = k8s.core.list_namespaced_config_map(ns).items
    assert [c.metadata.name for c in children] == ["child-1", "child-2"]
    assert all(not c.metadata.owner_references for c in children)


def test_deleting_a_namespace_deletes_its_contents(k8s: Clients) -> None:
    ns = k8s.namespace
    k8s.core.create_namespaced_config_map(ns, {"metadata": {"name": "c"}})
    # This one holds the namespace in Terminating until its finalizer is removed.
    k8s.core.create_namespaced_config_map(ns, {"metadata": {"name": "held", "finalizers": ["example.com/x"]}})
    k8s.core.delete_namespace(ns)
    assert k8s.core.read_namespace(ns).status.phase == "Terminating"
    with pytest.raises(ApiException) as err:
        k8s.core.create_namespaced_config_map(ns, {"metadata": {"name": "late"}})
    assert err.value.status == 403
    wait_for(lambda: [c.metadata.name for c in k8s.core.list_namespaced_config_map(ns).items] == ["held"],
             what="contents deleted")
    assert k8s.core.read_namespace(ns).status.phase == "Terminating"
    k8s.core.patch_namespaced_config_map("held", ns, [{"op": "remove", "path": "/metadata/finalizers"}])
    wait_for(lambda: _gone(lambda: k8s.core.read_namespace(ns)), what="namespace removed")


def test_every_namespace_gets_a_default_service_account(k8s: Clients) -> None:
    wait_for(lambda: [sa.metadata.name for sa in k8s.core.list_namespaced_service_account(k8s.namespace).items]
             == ["default"], what="default ServiceAccount")
