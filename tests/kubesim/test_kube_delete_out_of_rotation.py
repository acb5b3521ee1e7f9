"""`kube.delete_pods` with `out_of_rotation` (Instance version 6, `instance-retire-in-one-call`)
against kubesim: the pods leave rotation, then go, in one call."""

from __future__ import annotations

from typing import Any
from uuid import uuid4

import pytest

from activities.kube import KubeActivities
from models.kube_ops import ApplyObjectInput, CreatePodsInput, DeletePodsInput, SetServingInput
from tests.kubesim.activity_objects import instance_pod, namespace_manifest
from tests.kubesim.test_kube_activities import run

pytestmark = pytest.mark.kubesim


def test_delete_pods_can_take_them_out_of_rotation_first_in_the_same_call(kubesim: Any) -> None:
    kube = KubeActivities(kubesim.api_client(), cluster="sim")
    namespace = f"t-{uuid4().hex[:8]}"
    run(kube.apply_object, ApplyObjectInput(manifest=namespace_manifest(namespace)))
    manifest = instance_pod(namespace)
    manifest["metadata"]["finalizers"] = ["test.ome.io/hold"]  # keeps the deleted pod readable
    created = run(kube.create_pods, CreatePodsInput(namespace=namespace, pods=[manifest]))
    name, uid = created.pods[0].name, created.pods[0].uid
    gate = SetServingInput(
        namespace=namespace, pods=[name], serving=False, reason="surge replaced the pod", uids={name: uid},
        write_only=True,
    )  # fmt: skip
    result = run(
        kube.delete_pods,
        DeletePodsInput(namespace=namespace, names=[name], uids={name: uid}, out_of_rotation=gate),
    )
    assert result.deleted == [name]
    path = f"/api/v1/namespaces/{namespace}/pods/{name}"
    pod = kube.rest.get_or_none(path)
    assert pod is not None and pod["metadata"].get("deletionTimestamp")
    serving = [c for c in pod["status"]["conditions"] if c["type"] == "ome.io/serving"]
    assert [(c["status"], c["reason"]) for c in serving] == [("False", "surge replaced the pod")]
    # A repeated attempt (a retry of the local activity) finds the pod on its way out: the gate
    # is written again and the DELETE answered with the terminating pod, as Kubernetes does.
    again = run(
        kube.delete_pods,
        DeletePodsInput(namespace=namespace, names=[name], uids={name: uid}, out_of_rotation=gate),
    )
    assert again.deleted == [name]
    kube.rest.request(
        "PATCH", path, body={"metadata": {"finalizers": None}}, content_type="application/merge-patch+json"
    )
