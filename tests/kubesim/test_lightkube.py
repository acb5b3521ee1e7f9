"""The same cluster through a second, independent client: lightkube (httpx, its own models,
its own watch parser and server-side apply support)."""

from __future__ import annotations

import uuid

import pytest
from lightkube import ApiError, Client, KubeConfig
from lightkube.generic_resource import create_namespaced_resource
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ConfigMap, Namespace, Pod
from lightkube.types import PatchType

from kubesim.handle import KubeSim
from tests.kubesim.helpers import wait_for

InferenceReplica = create_namespaced_resource("ome.io", "v1beta1", "InferenceReplica", "inferencereplicas")


@pytest.fixture
def client(kubesim_session: KubeSim) -> Client:
    return Client(KubeConfig.from_file(kubesim_session.kubeconfig_path), field_manager="lightkube-test")


@pytest.fixture
def namespace(client: Client) -> str:
    name = f"lk-{uuid.uuid4().hex[:8]}"
    client.create(Namespace(metadata=ObjectMeta(name=name)))
    return name


def test_crud_and_conflict(client: Client, namespace: str) -> None:
    cm = client.create(ConfigMap(metadata=ObjectMeta(name="a"), data={"x": "1"}), namespace=namespace)
    assert cm.metadata.uid
    cm.data = {"x": "2"}
    updated = client.replace(cm)
    assert updated.data == {"x": "2"}
    cm.data = {"x": "3"}
    with pytest.raises(ApiError) as err:
        client.replace(cm)  # stale resourceVersion
    assert err.value.status.code == 409
    with pytest.raises(ApiError) as err:
        client.get(ConfigMap, "missing", namespace=namespace)
    assert err.value.status.code == 404 and err.value.status.reason == "NotFound"


def test_server_side_apply_through_lightkube(client: Client, namespace: str) -> None:
    body = ConfigMap(metadata=ObjectMeta(name="applied", namespace=namespace), data={"k": "v"})
    applied = client.apply(body)
    assert applied.data == {"k": "v"}
    assert applied.metadata.managedFields[0].manager == "lightkube-test"
    assert applied.metadata.managedFields[0].operation == "Apply"


def test_watch_and_custom_resources(client: Client, namespace: str) -> None:
    client.create(InferenceReplica(metadata=ObjectMeta(name="r", namespace=namespace), spec={"replicas": 1}))
    patched = client.patch(
        InferenceReplica, "r", {"spec": {"replicas": 3}}, namespace=namespace, patch_type=PatchType.MERGE
    )
    assert patched.spec["replicas"] == 3 and patched.metadata.generation == 2
    events = []
    for kind, obj in client.watch(InferenceReplica, namespace=namespace):
        events.append((kind, obj.metadata.name, obj.spec["replicas"]))
        if len(events) == 1:
            client.patch(
                InferenceReplica,
                "r",
                {"spec": {"replicas": 4}},
                namespace=namespace,
                patch_type=PatchType.MERGE,
            )
        else:
            break
    assert events == [("ADDED", "r", 3), ("MODIFIED", "r", 4)]


def test_pod_becomes_ready(client: Client, namespace: str) -> None:
    client.create(
        Pod.from_dict({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x:1"}]}}),
        namespace=namespace,
    )

    def ready() -> bool:
        pod = client.get(Pod, "p", namespace=namespace)
        return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])

    wait_for(ready, what="pod ready through lightkube")
