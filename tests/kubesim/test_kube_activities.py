"""The Kubernetes activities against kubesim, run with Temporal's `ActivityEnvironment`.

Each test works in its own namespace. Where kubesim is made to fail requests, `run_retrying`
plays Temporal's part: it retries what the activity marked retryable and stops at the first
non-retryable error, so "ends right" means the same thing it means under a worker.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any, TypeVar
from uuid import uuid4

import pytest
from kubernetes.client.exceptions import ApiException
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities import kube as kube_module
from activities.kube import KubeActivities
from models.kube_ops import (
    ApplyObjectInput,
    CrdExistsInput,
    CreatePodsInput,
    DeleteObjectInput,
    DeletePodsInput,
    ForceDeletePodInput,
    KubeErrorType,
    ListComponentPodsInput,
    ListInstancePodsInput,
    ListObjectsInput,
    ObjectRef,
    PatchObjectInput,
    PatchStatusInput,
    PodsGoneInput,
    ReadObjectInput,
    RecordEventInput,
    SetServingInput,
)
from models.pods import InstancePods
from planning.pod_summary import pods_digest
from tests.kubesim.activity_objects import headless_service, instance_pod, namespace_manifest, wait_for

pytestmark = pytest.mark.kubesim

T = TypeVar("T")


def run(fn: Callable[[Any], T], arg: Any) -> T:
    return ActivityEnvironment().run(fn, arg)


def run_retrying(fn: Callable[[Any], T], arg: Any, attempts: int = 40) -> T:
    """Retry like Temporal would: retryable ApplicationErrors again, non-retryable ones raise."""
    for _ in range(attempts):
        try:
            return run(fn, arg)
        except ApplicationError as error:
            if error.non_retryable:
                raise
            time.sleep(0.02)
    raise AssertionError(f"{fn.__name__} still failing after {attempts} attempts")


@pytest.fixture
def kube(kubesim: Any) -> KubeActivities:
    return KubeActivities(kubesim.api_client(), cluster="sim")


@pytest.fixture
def namespace(kube: KubeActivities) -> Iterator[str]:
    name = f"t-{uuid4().hex[:8]}"
    run(
        kube.apply_object,
        ApplyObjectInput(manifest=namespace_manifest(name)),
    )
    yield name


def observe(kube: KubeActivities, namespace: str, index: int = 0) -> InstancePods:
    return run(
        kube.list_instance_pods,
        ListInstancePodsInput(namespace=namespace, isvc="chat", component="engine", index=index),
    )


# --- pods -----------------------------------------------------------------------------------


def test_list_component_pods_is_one_request_for_every_instance(kubesim: Any, kube: KubeActivities, namespace: str) -> None:
    batch = [instance_pod(namespace, index=0), instance_pod(namespace, index=1), instance_pod(namespace, index=0, isvc="other")]
    run(kube.create_pods, CreatePodsInput(namespace=namespace, pods=batch))
    kubesim.reset_counters()
    listed = run(kube.list_component_pods, ListComponentPodsInput(namespace=namespace, isvc="chat", component="engine"))
    assert kubesim.counters()["total"] == 1
    # Each Instance's digest is the one it computes from its own view of its pods.
    assert listed.digests == tuple((index, pods_digest(observe(kube, namespace, index).pods)) for index in (0, 1))
    assert listed.resource_version.isdigit()


def test_list_component_pods_of_named_instances_lists_only_theirs(
    kubesim: Any, kube: KubeActivities, namespace: str
) -> None:
    batch = [instance_pod(namespace, index=index) for index in range(4)] + [instance_pod(namespace, index=2, isvc="other")]
    run(kube.create_pods, CreatePodsInput(namespace=namespace, pods=batch))
    whole = run(kube.list_component_pods, ListComponentPodsInput(namespace=namespace, isvc="chat", component="engine"))
    kubesim.reset_counters()
    named = run(
        kube.list_component_pods,
        ListComponentPodsInput(namespace=namespace, isvc="chat", component="engine", indexes=(3, 2, 7, 2)),
    )
    assert kubesim.counters()["total"] == 1
    assert named.digests == tuple(entry for entry in whole.digests if entry[0] in (2, 3))
    kubesim.reset_counters()
    none = run(kube.list_component_pods, ListComponentPodsInput(namespace=namespace, isvc="chat", component="engine", indexes=()))
    assert none.digests == () and kubesim.counters()["total"] == 0  # nothing named: nothing asked


def test_list_component_pods_pages_the_list(
    kubesim: Any, kube: KubeActivities, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    batch = [instance_pod(namespace, index=index) for index in range(3)]
    run(kube.create_pods, CreatePodsInput(namespace=namespace, pods=batch))
    whole = run(kube.list_component_pods, ListComponentPodsInput(namespace=namespace, isvc="chat", component="engine"))
    monkeypatch.setattr(kube_module, "COMPONENT_LIST_PAGE", 2)
    kubesim.reset_counters()
    paged = run(kube.list_component_pods, ListComponentPodsInput(namespace=namespace, isvc="chat", component="engine"))
    assert kubesim.counters()["total"] == 2  # two pages, joined by the continue token
    assert paged.digests == whole.digests and len(paged.digests) == 3


def test_create_pods_is_idempotent_and_refuses_foreign_names(kube: KubeActivities, namespace: str) -> None:
    batch = [instance_pod(namespace, role="leader"), instance_pod(namespace, role="worker")]
    first = run(kube.create_pods, CreatePodsInput(namespace=namespace, pods=batch))
    assert first.names("created") == ["chat-engine-0-leader-0", "chat-engine-0-worker-0"]

    again = run(kube.create_pods, CreatePodsInput(namespace=namespace, pods=batch))
    assert again.names("exists") == first.names("created")
    assert [pod.uid for pod in again.pods] == [pod.uid for pod in first.pods]

    # A later incarnation finds the name still held by the previous one.
    newer = run(
        kube.create_pods,
        CreatePodsInput(namespace=namespace, pods=[instance_pod(namespace, role="leader", incarnation=2)]),
    )
    assert newer.names("occupied") == ["chat-engine-0-leader-0"]
    assert newer.pods[0].incarnation == 1

    foreign = instance_pod(namespace, role="leader")
    foreign["metadata"]["labels"]["ome.io/inferenceservice"] = "other"
    with pytest.raises(ApplicationError) as caught:
        run(kube.create_pods, CreatePodsInput(namespace=namespace, pods=[foreign]))
    assert caught.value.type == KubeErrorType.NAME_TAKEN and caught.value.non_retryable
    assert "chat-engine-0-leader-0" in caught.value.message


def test_delete_pods_treats_not_found_as_done_and_respects_uids(kube: KubeActivities, namespace: str) -> None:
    created = run(kube.create_pods, CreatePodsInput(namespace=namespace, pods=[instance_pod(namespace)]))
    name, uid = created.pods[0].name, created.pods[0].uid

    wrong_uid = run(
        kube.delete_pods, DeletePodsInput(namespace=namespace, names=[name], uids={name: "not-" + uid})
    )
    assert wrong_uid.replaced == [name] and not wrong_uid.deleted

    done = run(
        kube.delete_pods,
        DeletePodsInput(namespace=namespace, names=[name, "never-existed"], uids={name: uid}),
    )
    assert done.deleted == [name] and done.already_gone == ["never-existed"]

    run(kube.force_delete_pod, ForceDeletePodInput(namespace=namespace, name=name, uid=uid))
    gone = wait_for(
        lambda: run(kube.pods_gone, PodsGoneInput(namespace=namespace, names=[name])).all_gone or None,
        f"pod {name} to disappear",
    )
    assert gone
    again = run(kube.delete_pods, DeletePodsInput(namespace=namespace, names=[name], grace_period_seconds=0))
    assert again.already_gone == [name]


def test_serving_condition_drives_pod_readiness(kube: KubeActivities, namespace: str) -> None:
    run(kube.create_pods, CreatePodsInput(namespace=namespace, pods=[instance_pod(namespace)]))
    run(kube.apply_object, ApplyObjectInput(manifest=headless_service(namespace)))
    name = "chat-engine-0-default-0"
    summary = wait_for(
        lambda: (s := observe(kube, namespace)).pods and s.pods[0].containers_ready and s, "containers ready"
    )
    pod = summary.pods[0]
    # Containers are ready, but the readiness gate holds the pod out of rotation.
    assert pod.is_ready and not pod.ready and not pod.is_serving and pod.serving is None
    assert pod.has_serving_gate and pod.node_ready == "True" and pod.incarnation == 1
    # The headless Service's EndpointSlice lists the pod only once it is Ready (spec §9 Available).
    assert wait_for(
        lambda: observe(kube, namespace).endpoints_listed == () or None, "a slice without the pod"
    )

    on = run(
        kube.set_serving_condition,
        SetServingInput(namespace=namespace, pods=[name, "gone-pod"], serving=True, reason="Admitted"),
    )
    assert on.changed == [name] and on.missing == ["gone-pod"]
    serving = wait_for(
        lambda: (s := observe(kube, namespace)).pods[0].ready and s, "pod Ready after the gate"
    )
    assert serving.pods[0].is_serving and serving.serving_count == 1
    wait_for(
        lambda: observe(kube, namespace).endpoints_listed == (name,) or None, "the pod listed on the Service"
    )

    repeat = run(
        kube.set_serving_condition,
        SetServingInput(namespace=namespace, pods=[name], serving=True, reason="Admitted"),
    )
    assert repeat.unchanged == [name]

    off = run(
        kube.set_serving_condition,
        SetServingInput(
            namespace=namespace, pods=[name], serving=False, reason="Draining", message="drain before delete"
        ),
    )
    assert off.changed == [name]
    drained = wait_for(lambda: (s := observe(kube, namespace)).pods[0].ready is False and s, "pod not Ready")
    assert drained.pods[0].serving == "False" and drained.serving_count == 0

    stale = run(
        kube.set_serving_condition,
        SetServingInput(
            namespace=namespace, pods=[name], serving=True, reason="Admitted", uids={name: "old-uid"}
        ),
    )
    assert stale.missing == [name]


def test_a_pod_created_with_its_gate_serves_once_its_containers_are_ready(
    kubesim: Any, kube: KubeActivities, namespace: str
) -> None:
    gate = SetServingInput(namespace=namespace, pods=[], serving=True, reason="ServeWhenReady", message="one pod")
    kubesim.reset_counters()
    created = run(kube.create_pods, CreatePodsInput(namespace=namespace, pods=[instance_pod(namespace)], serving=gate))
    assert created.names("created") == ["chat-engine-0-default-0"] and created.pods[0].gated
    # Two requests: the pod, then its gate, conditional on the new uid; no read.
    assert kubesim.counters()["requests"] == {("create", "pods"): 1, ("patch", "pods/status"): 1}
    serving = wait_for(lambda: (s := observe(kube, namespace)).pods and s.pods[0].is_serving and s, "serving")
    pod = serving.pods[0]
    assert pod.ready and pod.serving == "True" and pod.uid == created.pods[0].uid
    condition = next(
        c for c in kube.rest.get(f"/api/v1/namespaces/{namespace}/pods/{pod.name}")["status"]["conditions"]
        if c["type"] == "ome.io/serving"
    )
    assert (condition["status"], condition["reason"], condition["message"]) == ("True", "ServeWhenReady", "one pod")

    # Another incarnation still holds the name: nothing is written to the pod that holds it.
    newer = instance_pod(namespace, incarnation=2)
    off = SetServingInput(namespace=namespace, pods=[], serving=True, reason="X")
    run(kube.set_serving_condition, SetServingInput(namespace=namespace, pods=[pod.name], serving=False, reason="Y"))
    held = run(kube.create_pods, CreatePodsInput(namespace=namespace, pods=[newer], serving=off))
    assert held.names("occupied") == [pod.name] and not held.pods[0].gated
    assert observe(kube, namespace).pods[0].serving == "False"


def test_write_only_serving_is_one_uid_conditional_patch(kube: KubeActivities, namespace: str) -> None:
    created = run(kube.create_pods, CreatePodsInput(namespace=namespace, pods=[instance_pod(namespace)]))
    name, uid = created.pods[0].name, created.pods[0].uid
    wait_for(lambda: (s := observe(kube, namespace)).pods and s.pods[0].containers_ready and s, "containers ready")

    def write(serving: bool, uids: dict[str, str]) -> Any:
        return run(
            kube.set_serving_condition,
            SetServingInput(
                namespace=namespace, pods=[name, "gone-pod"], serving=serving, reason="R", uids=uids, write_only=True
            ),
        )

    on = write(True, {name: uid})
    assert on.changed == [name] and on.missing == ["gone-pod"]
    assert wait_for(lambda: observe(kube, namespace).pods[0].is_serving or None, "serving after one PATCH")
    # Another pod on the name (a stale uid): nothing written.
    stale = write(False, {name: "old-uid"})
    assert stale.missing == [name, "gone-pod"] and observe(kube, namespace).pods[0].serving == "True"
    off = write(False, {})
    assert off.changed == [name] and observe(kube, namespace).pods[0].serving == "False"


def test_write_only_serving_moves_last_transition_time_only_on_a_transition(
    kube: KubeActivities, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A re-write the caller knows changes nothing (`current` already the wanted status) keeps
    `lastTransitionTime`: the strategic merge of pod conditions merges by `type` and keeps the
    omitted field, as Kubernetes does. A real transition stamps a new one."""
    created = run(kube.create_pods, CreatePodsInput(namespace=namespace, pods=[instance_pod(namespace)]))
    name, uid = created.pods[0].name, created.pods[0].uid
    clock = iter(["2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z", "2026-01-01T00:02:00Z"])
    monkeypatch.setattr("activities.kube.now_rfc3339", lambda: next(clock))

    def write(serving: bool, current: dict[str, str]) -> tuple[str, str]:
        run(
            kube.set_serving_condition,
            SetServingInput(
                namespace=namespace, pods=[name], serving=serving, reason="R", uids={name: uid},
                write_only=True, current=current,
            ),
        )
        pod = kube.rest.get_or_none(f"/api/v1/namespaces/{namespace}/pods/{name}")
        assert pod is not None
        condition = next(c for c in pod["status"]["conditions"] if c["type"] == "ome.io/serving")
        return condition["status"], condition["lastTransitionTime"]

    assert write(True, {}) == ("True", "2026-01-01T00:00:00Z")
    assert write(True, {name: "True"}) == ("True", "2026-01-01T00:00:00Z"), "no transition, time kept"
    assert write(False, {name: "True"}) == ("False", "2026-01-01T00:02:00Z")


def test_create_first_apply_creates_or_falls_back_to_read(kube: KubeActivities, namespace: str) -> None:
    created = run(kube.apply_object, ApplyObjectInput(manifest=headless_service(namespace), create_first=True))
    assert created.action == "created"
    again = run(kube.apply_object, ApplyObjectInput(manifest=headless_service(namespace), create_first=True))
    assert again.action == "unchanged" and again.resource_version == created.resource_version


# --- generic objects ------------------------------------------------------------------------


def test_apply_twice_changes_nothing_and_keeps_foreign_labels(kube: KubeActivities, namespace: str) -> None:
    created = run(kube.apply_object, ApplyObjectInput(manifest=headless_service(namespace)))
    assert created.action == "created" and created.ref.uid
    same = run(kube.apply_object, ApplyObjectInput(manifest=headless_service(namespace)))
    assert same.action == "unchanged" and same.resource_version == created.resource_version

    ref = created.ref
    run(kube.patch_object, PatchObjectInput(ref=ref, patch={"metadata": {"labels": {"team": "search"}}}))
    changed = run(kube.apply_object, ApplyObjectInput(manifest=headless_service(namespace, port=9090)))
    assert changed.action == "updated" and changed.ref.uid == created.ref.uid
    obj = run(kube.read_object, ReadObjectInput(ref=ref)).object
    assert obj is not None
    assert obj["spec"]["ports"][0]["port"] == 9090
    assert obj["metadata"]["labels"] == {
        **headless_service(namespace)["metadata"]["labels"],
        "team": "search",
    }
    # An object read back (resourceVersion, uid, status and all) applies as a no-op.
    assert run(kube.apply_object, ApplyObjectInput(manifest=obj)).action == "unchanged"

    listed = run(
        kube.list_objects,
        ListObjectsInput(
            api_version="v1",
            kind="Service",
            namespace=namespace,
            label_selector="ome.io/inferenceservice=chat",
        ),
    )
    assert [item["metadata"]["name"] for item in listed.items] == ["chat-engine-0"]

    assert run(kube.delete_object, DeleteObjectInput(ref=ref)).deleted
    assert not run(kube.delete_object, DeleteObjectInput(ref=ref)).deleted
    assert not run(kube.read_object, ReadObjectInput(ref=ref)).found


WIDGET_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.test.ome.io"},
    "spec": {
        "group": "test.ome.io",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                },
            }
        ],
    },
}


def test_custom_resource_apply_and_status_patch(kube: KubeActivities, namespace: str) -> None:
    assert not run(kube.crd_exists, CrdExistsInput(name="widgets.test.ome.io")).exists
    run(kube.apply_object, ApplyObjectInput(manifest=WIDGET_CRD))
    crd = wait_for(
        lambda: (r := run(kube.crd_exists, CrdExistsInput(name="widgets.test.ome.io"))).exists and r, "CRD"
    )
    assert crd.served_versions == ["v1"]

    widget = {
        "apiVersion": "test.ome.io/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "namespace": namespace},
        "spec": {"size": 1},
    }
    applied = wait_for(lambda: _try_apply(kube, widget), "Widget kind to be served")
    patched = run(
        kube.patch_status, PatchStatusInput(ref=applied.ref, status={"phase": "Ready", "readyReplicas": 2})
    )
    assert patched.found
    # Applying the spec again must neither bump anything nor wipe the status we wrote.
    assert run(kube.apply_object, ApplyObjectInput(manifest=widget)).action == "unchanged"
    obj = run(kube.read_object, ReadObjectInput(ref=applied.ref)).object
    assert obj is not None and obj["status"] == {"phase": "Ready", "readyReplicas": 2}

    missing = applied.ref.model_copy(update={"name": "nope"})
    assert not run(
        kube.patch_status, PatchStatusInput(ref=missing, status={"phase": "x"}, missing_ok=True)
    ).found
    with pytest.raises(ApplicationError) as caught:
        run(kube.patch_status, PatchStatusInput(ref=missing, status={"phase": "x"}))
    assert caught.value.type == KubeErrorType.NOT_FOUND and caught.value.non_retryable


def _try_apply(kube: KubeActivities, manifest: dict[str, Any]) -> Any:
    try:
        return run(kube.apply_object, ApplyObjectInput(manifest=manifest))
    except ApplicationError as error:
        if error.type == KubeErrorType.NOT_FOUND:
            return None
        raise


def test_events_aggregate_repeats(kube: KubeActivities, namespace: str) -> None:
    target = ObjectRef(
        api_version="ome.io/v1beta1", kind="InferenceService", name="chat", namespace=namespace, uid="u-1"
    )
    first = run(
        kube.record_event,
        RecordEventInput(
            involved=target,
            reason="InstanceFailed",
            message="Instance 0 failed: ImagePullBackOff",
            type="Warning",
        ),
    )
    second = run(
        kube.record_event,
        RecordEventInput(
            involved=target,
            reason="InstanceFailed",
            message="Instance 0 failed: ImagePullBackOff",
            type="Warning",
        ),
    )
    other = run(
        kube.record_event,
        RecordEventInput(
            involved=target,
            reason="InstanceFailed",
            message="Instance 1 failed: ImagePullBackOff",
            type="Warning",
        ),
    )
    assert (first.count, second.count, other.count) == (1, 2, 1)
    assert first.name == second.name != other.name
    event = run(
        kube.read_object,
        ReadObjectInput(ref=ObjectRef(api_version="v1", kind="Event", name=first.name, namespace=namespace)),
    ).object
    assert event is not None
    assert event["count"] == 2 and event["type"] == "Warning" and event["reason"] == "InstanceFailed"
    assert event["involvedObject"]["uid"] == "u-1" and event["source"]["component"] == "ome-lifecycle"


def test_a_repeated_attempt_of_one_recording_counts_once(kube: KubeActivities, namespace: str) -> None:
    """The same `occurrence` again (a retried activity, a workflow task attempted again after
    its worker died) finds itself on the Event; another recording of the same Event counts."""
    target = ObjectRef(api_version="v1", kind="Pod", name="p", namespace=namespace, uid="u-2")

    def record(occurrence: str | None) -> int:
        request = RecordEventInput(
            involved=target, reason="GangSurgeAbandoned", message="gave up", type="Warning", occurrence=occurrence
        )
        return int(run(kube.record_event, request).count)

    counts = [record("run-1/0"), record("run-1/0"), record("run-1/1"), record("run-1/1"), record("run-2/0")]
    assert counts == [1, 1, 2, 2, 3]
    # Recordings without an occurrence (callers from before it) count every time.
    assert [record(None), record(None)] == [4, 5]


# --- errors ---------------------------------------------------------------------------------


def test_invalid_pod_is_a_non_retryable_invalid_error(kube: KubeActivities, namespace: str) -> None:
    broken = instance_pod(namespace)
    broken["spec"]["containers"] = []
    with pytest.raises(ApplicationError) as caught:
        run(kube.create_pods, CreatePodsInput(namespace=namespace, pods=[broken]))
    assert caught.value.type == KubeErrorType.INVALID and caught.value.non_retryable
    assert "422" in caught.value.message and "chat-engine-0-default-0" in caught.value.message
    assert isinstance(caught.value.__cause__, ApiException)


def test_throttling_and_server_errors_are_retryable(
    kubesim: Any, kube: KubeActivities, namespace: str
) -> None:
    ref = ObjectRef(api_version="v1", kind="ConfigMap", name="x", namespace=namespace)
    kubesim.inject_faults(error_rate=1.0, codes=(429,))
    try:
        with pytest.raises(ApplicationError) as caught:
            run(kube.read_object, ReadObjectInput(ref=ref))
        assert caught.value.type == KubeErrorType.TOO_MANY_REQUESTS and not caught.value.non_retryable
        assert caught.value.next_retry_delay == timedelta(seconds=1)
        kubesim.inject_faults(error_rate=1.0, codes=(500,))
        with pytest.raises(ApplicationError) as caught:
            run(kube.read_object, ReadObjectInput(ref=ref))
        assert caught.value.type == KubeErrorType.SERVER_ERROR and not caught.value.non_retryable
    finally:
        kubesim.inject_faults(error_rate=0.0)


# --- a flaky API server ------------------------------------------------------------------------


def test_everything_ends_right_with_injected_faults(
    kubesim: Any, kube: KubeActivities, namespace: str
) -> None:
    kubesim.inject_faults(error_rate=0.1, codes=(500, 429, 409))
    try:
        pods = [instance_pod(namespace, index=i) for i in range(4)]
        for _ in range(2):  # a retried step must converge to the same pods
            created = run_retrying(kube.create_pods, CreatePodsInput(namespace=namespace, pods=pods))
            assert {p.outcome for p in created.pods} <= {"created", "exists"} and len(created.pods) == 4
        names = [p["metadata"]["name"] for p in pods]
        for _ in range(3):
            run_retrying(kube.apply_object, ApplyObjectInput(manifest=headless_service(namespace)))
        target = ObjectRef(api_version="v1", kind="Service", name="chat-engine-0", namespace=namespace)
        counts = [
            run_retrying(
                kube.record_event,
                RecordEventInput(involved=target, reason="Created", message="created 4 pods"),
            ).count
            for _ in range(5)
        ]
        assert counts[-1] == 5
        wait_for(lambda: _all_pods(kube, namespace, "containers_ready"), "containers ready")
        run_retrying(
            kube.set_serving_condition,
            SetServingInput(namespace=namespace, pods=names, serving=True, reason="Admitted"),
        )
        wait_for(lambda: _all_pods(kube, namespace, "ready"), "all pods Ready")
        run_retrying(
            kube.delete_pods, DeletePodsInput(namespace=namespace, names=names, grace_period_seconds=0)
        )
        wait_for(
            lambda: (
                run_retrying(kube.pods_gone, PodsGoneInput(namespace=namespace, names=names)).all_gone or None
            ),
            "pods gone",
        )
    finally:
        kubesim.inject_faults(error_rate=0.0)
    # The run above met real failures (at 10% of ~200 requests, none at all would mean no test).
    assert sum(kubesim.counters()["faults_injected"].values()) > 0
    listed = run(kube.list_objects, ListObjectsInput(api_version="v1", kind="Service", namespace=namespace))
    assert len(listed.items) == 1


def _all_pods(kube: KubeActivities, namespace: str, flag: str) -> bool:
    """True when each of the 4 Instances has its pod and the pod's `flag` is set."""
    for index in range(4):
        try:
            pods = observe(kube, namespace, index).pods
        except ApplicationError as error:
            if error.non_retryable:
                raise
            return False  # an injected fault: look again on the next poll
        if len(pods) != 1 or not getattr(pods[0], flag):
            return False
    return True
