"""The Kubernetes activities' contract, held by a real API server and kubelet (k3s).

The same promises tests/kubesim/test_kube_activities.py checks against kubesim, so a
difference between kubesim and Kubernetes shows up as a failure here: idempotent pod
creation, the `ome.io/serving` readiness gate deciding Ready, apply twice being a no-op,
status patches on the InferenceReplica custom resource, Event aggregation, NotFound on delete
being success, and the optional PodGroup CRD.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client import ApiClient
from temporalio.exceptions import ApplicationError

from activities.kube import KubeActivities
from models.inferenceservice import InferenceService
from models.kube_ops import (
    PODGROUP_CRD,
    ApplyObjectInput,
    CrdExistsInput,
    CreatePodsInput,
    DeleteObjectInput,
    DeletePodsInput,
    KubeErrorType,
    ListInstancePodsInput,
    ObjectRef,
    PatchStatusInput,
    ReadObjectInput,
    RecordEventInput,
    SetServingInput,
)
from models.pods import InstancePods
from models.resolution import inference_replica_spec
from planning.instance.pods import render_headless_service, render_pod_group, render_pods
from planning.replica.manifest import render_inference_replica
from tests.k3s.helpers import (
    api_client,
    conditions,
    fresh_namespace,
    instance_spec,
    read_pod,
    run,
    wait_crds_established,
    wait_for,
)
from tests.unit.deploy_usage import example_isvc

pytestmark = pytest.mark.k3s

OPTIONAL_CRD = Path(__file__).resolve().parents[2] / "deploy" / "crds" / "optional" / f"{PODGROUP_CRD}.yaml"


@pytest.fixture(scope="module")
def client(k3s_kubeconfig: Path) -> ApiClient:
    return api_client(k3s_kubeconfig)


@pytest.fixture(scope="module")
def kube(client: ApiClient) -> KubeActivities:
    activities = KubeActivities(client, cluster="k3s")
    wait_crds_established(activities)
    return activities


@pytest.fixture
def namespace(client: ApiClient) -> Iterator[str]:
    with fresh_namespace(client, "act") as name:
        yield name


def listed(kube: KubeActivities, namespace: str, index: int = 0) -> InstancePods:
    request = ListInstancePodsInput(namespace=namespace, isvc="chat", component="engine", index=index)
    return run(kube.list_instance_pods, request)


def test_create_pods_is_idempotent_and_refuses_foreign_names(kube: KubeActivities, namespace: str) -> None:
    pods = render_pods(instance_spec(namespace), incarnation=1)
    first = run(kube.create_pods, CreatePodsInput(namespace=namespace, pods=pods))
    again = run(kube.create_pods, CreatePodsInput(namespace=namespace, pods=pods))
    assert [p.outcome for p in first.pods] == ["created"]
    assert [p.outcome for p in again.pods] == ["exists"]
    assert again.pods[0].uid == first.pods[0].uid, "a retried create must not replace the pod"

    # The next incarnation finds the name still held by the old pod: occupied, not an error.
    next_pods = render_pods(instance_spec(namespace), incarnation=2)
    occupied = run(kube.create_pods, CreatePodsInput(namespace=namespace, pods=next_pods))
    assert [p.outcome for p in occupied.pods] == ["occupied"]

    # Someone else's pod with the same name is a permanent error naming the pod.
    foreign = render_pods(instance_spec(namespace, isvc="other"), incarnation=1)[0]
    foreign["metadata"]["name"] = pods[0]["metadata"]["name"]
    with pytest.raises(ApplicationError) as raised:
        run(kube.create_pods, CreatePodsInput(namespace=namespace, pods=[foreign]))
    assert raised.value.type == KubeErrorType.NAME_TAKEN.value
    assert raised.value.non_retryable
    assert pods[0]["metadata"]["name"] in str(raised.value)


def test_serving_gate_decides_ready(kube: KubeActivities, client: ApiClient, namespace: str) -> None:
    (pod,) = render_pods(instance_spec(namespace), incarnation=1)
    name = pod["metadata"]["name"]
    (created,) = run(kube.create_pods, CreatePodsInput(namespace=namespace, pods=[pod])).pods

    # Containers ready, but the readiness gate keeps the pod out of Ready (and of endpoints).
    def containers_ready() -> dict[str, Any] | None:
        seen = read_pod(client, namespace, name)
        return seen if seen and conditions(seen).get("ContainersReady") == "True" else None

    seen = wait_for(containers_ready, f"containers of {name} to be ready")
    assert conditions(seen).get("Ready") == "False"
    summary = listed(kube, namespace).pod(name)
    assert summary is not None and summary.containers_ready and summary.has_serving_gate and not summary.ready

    serve = SetServingInput(
        namespace=namespace, pods=[name], serving=True, reason="InstanceReady", uids={name: created.uid}
    )
    assert run(kube.set_serving_condition, serve).changed == [name]
    wait_for(lambda: listed(kube, namespace).serving_count == 1, f"{name} to be serving")
    # The kubelet folds the gate into Ready: the pod now counts as an endpoint.
    wait_for(
        lambda: conditions(read_pod(client, namespace, name) or {}).get("Ready") == "True", f"{name} Ready"
    )
    assert run(kube.set_serving_condition, serve).unchanged == [name], "a retry writes nothing"

    drain = serve.model_copy(update={"serving": False, "reason": "Draining"})
    assert run(kube.set_serving_condition, drain).changed == [name]
    wait_for(
        lambda: conditions(read_pod(client, namespace, name) or {}).get("Ready") == "False", f"{name} unready"
    )

    stale = serve.model_copy(update={"uids": {name: "00000000-0000-0000-0000-000000000000"}})
    assert run(kube.set_serving_condition, stale).missing == [name], "another pod's uid is not written"


def test_apply_twice_is_a_no_op(kube: KubeActivities, namespace: str) -> None:
    service = render_headless_service(instance_spec(namespace))
    created = run(kube.apply_object, ApplyObjectInput(manifest=service))
    again = run(kube.apply_object, ApplyObjectInput(manifest=service))
    assert (created.action, again.action) == ("created", "unchanged")
    assert again.resource_version == created.resource_version, "an unchanged apply must not write"

    service["metadata"]["labels"]["example.com/team"] = "serving"
    changed = run(kube.apply_object, ApplyObjectInput(manifest=service))
    assert changed.action == "updated" and changed.resource_version != created.resource_version
    found = run(kube.read_object, ReadObjectInput(ref=changed.ref))
    assert found.object is not None
    assert found.object["metadata"]["labels"]["example.com/team"] == "serving"
    assert found.object["spec"]["clusterIP"] == "None", "server-side fields survive the update"


def test_status_patch_on_the_inference_replica(kube: KubeActivities, namespace: str) -> None:
    isvc_manifest = example_isvc()
    isvc_manifest["metadata"]["namespace"] = namespace
    isvc = run(kube.apply_object, ApplyObjectInput(manifest=isvc_manifest, plural="inferenceservices"))
    parsed = InferenceService.model_validate(isvc_manifest)
    manifest = render_inference_replica(
        inference_replica_spec(parsed, None, "engine"), parsed.name, namespace, isvc.ref.uid
    )
    applied = run(kube.apply_object, ApplyObjectInput(manifest=manifest, plural="inferencereplicas"))
    status = {"replicas": 2, "readyReplicas": 1, "conditions": [{"type": "Ready", "status": "False"}]}
    patched = run(kube.patch_status, PatchStatusInput(ref=applied.ref, status=status))
    assert patched.found and patched.generation == applied.generation, "status does not bump generation"

    found = run(kube.read_object, ReadObjectInput(ref=applied.ref)).object
    assert found is not None
    assert found["status"]["readyReplicas"] == 1
    assert found["spec"] == manifest["spec"]
    # Re-applying the spec keeps the status the workflow wrote.
    assert (
        run(kube.apply_object, ApplyObjectInput(manifest=manifest, plural="inferencereplicas")).action
        == "unchanged"
    )
    gone = applied.ref.model_copy(update={"name": "nobody-engine"})
    assert not run(kube.patch_status, PatchStatusInput(ref=gone, status=status, missing_ok=True)).found


def test_repeated_events_aggregate(kube: KubeActivities, namespace: str) -> None:
    involved = ObjectRef(
        api_version="ome.io/v1beta1", kind="InferenceService", name="chat", namespace=namespace
    )
    event = RecordEventInput(
        involved=involved, reason="InstanceFailed", message="pod chat-engine-0 failed", type="Warning"
    )
    first = run(kube.record_event, event)
    second = run(kube.record_event, event)
    other = run(kube.record_event, event.model_copy(update={"message": "another failure"}))
    assert (first.name, first.count) == (second.name, 1) and second.count == 2
    assert other.name != first.name and other.count == 1
    ref = ObjectRef(api_version="v1", kind="Event", name=first.name, namespace=namespace)
    stored = run(kube.read_object, ReadObjectInput(ref=ref)).object
    assert stored is not None
    assert (stored["count"], stored["type"], stored["reason"]) == (2, "Warning", "InstanceFailed")
    assert stored["involvedObject"]["name"] == "chat"


def test_delete_of_what_is_gone_is_success(kube: KubeActivities, client: ApiClient, namespace: str) -> None:
    (pod,) = render_pods(instance_spec(namespace), incarnation=1)
    name = pod["metadata"]["name"]
    assert run(kube.delete_pods, DeletePodsInput(namespace=namespace, names=[name])).already_gone == [name]
    ref = ObjectRef(api_version="v1", kind="Service", name="nothing", namespace=namespace)
    assert not run(kube.delete_object, DeleteObjectInput(ref=ref)).deleted

    (created,) = run(kube.create_pods, CreatePodsInput(namespace=namespace, pods=[pod])).pods
    stale = DeletePodsInput(
        namespace=namespace, names=[name], uids={name: "00000000-0000-0000-0000-000000000000"}
    )
    assert run(kube.delete_pods, stale).replaced == [name], "a uid precondition protects a newer pod"
    assert read_pod(client, namespace, name) is not None
    mine = DeletePodsInput(
        namespace=namespace, names=[name], uids={name: created.uid}, grace_period_seconds=0
    )
    assert run(kube.delete_pods, mine).deleted == [name]
    wait_for(lambda: read_pod(client, namespace, name) is None, f"{name} to be gone")


def test_pod_group_crd_is_optional(kube: KubeActivities, namespace: str) -> None:
    assert not run(kube.crd_exists, CrdExistsInput()).exists, "k3s ships without scheduler-plugins"
    crd = yaml.safe_load(OPTIONAL_CRD.read_text())
    run(kube.apply_object, ApplyObjectInput(manifest=crd))
    crd_ref = ObjectRef(
        api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition", name=PODGROUP_CRD
    )
    try:
        wait_crds_established(kube, (PODGROUP_CRD,))
        assert run(kube.crd_exists, CrdExistsInput()).served_versions == ["v1alpha1"]
        gang = instance_spec(
            namespace, worker_count=1, worker_pod_spec=instance_spec(namespace).leader_pod_spec
        )
        group = render_pod_group(gang)
        assert group is not None
        applied = run(kube.apply_object, ApplyObjectInput(manifest=group, plural="podgroups"))
        assert applied.action == "created"
        stored = run(kube.read_object, ReadObjectInput(ref=applied.ref)).object
        assert stored is not None and stored["spec"]["minMember"] == 2
    finally:
        run(kube.delete_object, DeleteObjectInput(ref=crd_ref))
