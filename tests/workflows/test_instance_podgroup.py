"""The PodGroup of a multi-pod Instance (gang scheduling, spec reference §9).

- A PodGroup of the same name that is still terminating (a finalizer holds it) is waited
  for with `waiting: PodGroupTerminating`: no pod is created meanwhile, the readiness clock
  stops, and a full window starts when it is gone; then the Instance makes its own.
- A PodGroup of the same name that belongs to someone else is never adopted: the attempt
  fails with `PodGroupNameTaken`, naming the PodGroup, the owner found and the fix.

The in-memory cluster covers the long waits (time skips freely); kubesim covers the real
thing: a finalizer on the custom resource, a restart of a Ready gang meeting it.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import kubernetes
import pytest
from temporalio.testing import WorkflowEnvironment

from kubesim.handle import KubeSim
from kubesim.timing import Timing
from models.instance import DeleteRequest, InstancePhase, InstanceStatus
from tests.fixtures.kubesim import TEST_TOPOLOGY
from tests.workflows.instance_fake_cluster import FakeCluster
from tests.workflows.instance_harness import Harness, ready_at
from tests.workflows.instance_kube_harness import kube_harness
from tests.workflows.test_instance_failures import within

pytestmark = pytest.mark.workflows

P = InstancePhase
GROUP = "chat-engine-1"
KEY = f"PodGroup/{GROUP}"
HOLDING_FINALIZER = "example.com/hold"


def pod_group(namespace: str, isvc: str = "chat", **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {
            "name": GROUP,
            "namespace": namespace,
            "labels": {
                "ome.io/inferenceservice": isvc,
                "ome.io/component": "engine",
                "ome.io/instance-index": "1",
            },
            **metadata,
        },
        "spec": {"minMember": 2},
    }


async def test_terminating_pod_group_holds_the_create_and_stops_the_clock(harness: Harness) -> None:
    cluster = harness.cluster
    cluster.objects[KEY] = pod_group(
        harness.namespace, deletionTimestamp="2026-01-01T00:00:00Z", finalizers=[HOLDING_FINALIZER]
    )
    handle = await harness.start(harness.spec(workers=1))
    status = await within(
        harness, handle, lambda s: s.operation is not None and s.operation.waiting == "PodGroupTerminating"
    )
    assert status.phase == P.CREATING and status.operation is not None
    assert status.operation.type == "Create" and status.operation.deadline is None
    # Far past instanceReadyTimeout (30m): held, so nothing fails and no pod is created.
    await harness.env.sleep(timedelta(minutes=45).total_seconds())
    status = await handle.query("status", result_type=InstanceStatus)
    assert status.phase == P.CREATING and status.operation is not None
    assert status.operation.waiting == "PodGroupTerminating" and status.operation.deadline is None
    assert cluster.created == [] and "InstanceFailed" not in cluster.reasons()

    # The finalizer lets go; the pods then take a while, and get a full 30-minute window.
    def never_ready(fake: FakeCluster) -> None:
        for pod in fake.pods.values():
            pod.containers_ready = False

    cluster.on_change = never_ready
    del cluster.objects[KEY]
    status = await within(harness, handle, lambda s: s.total_pods == 2)
    assert status.operation is not None and status.operation.waiting is None
    assert status.operation.deadline is not None and status.updated_at is not None
    assert status.operation.deadline - status.updated_at >= timedelta(minutes=29)
    group = cluster.objects[KEY]
    assert "deletionTimestamp" not in group["metadata"] and group["spec"]["minMember"] == 2
    cluster.on_change = None
    for pod in cluster.pods.values():
        pod.containers_ready = True
    await cluster.notify_pod(next(iter(cluster.pods.values())).manifest)
    await within(harness, handle, ready_at())
    await handle.signal("delete", DeleteRequest())
    await handle.result()


async def test_pod_group_of_another_owner_fails_the_instance(harness: Harness) -> None:
    cluster = harness.cluster
    foreign = pod_group(
        harness.namespace,
        isvc="other",
        ownerReferences=[
            {"apiVersion": "ome.io/v1beta1", "kind": "InferenceService", "name": "other", "uid": "u-2"}
        ],
    )
    cluster.objects[KEY] = foreign
    handle = await harness.start(harness.spec(workers=1, isvc_uid="u-1"))
    status = await within(harness, handle, lambda s: s.phase == P.FAILED)
    failure = status.last_failure
    assert failure is not None and failure.reason == "PodGroupNameTaken" and not failure.counting
    assert f"PodGroup {harness.namespace}/{GROUP} already exists" in failure.message
    assert "InferenceService other (uid u-2)" in failure.message
    assert f"kubectl delete podgroup {GROUP} -n {harness.namespace}" in failure.message
    assert cluster.created == [] and cluster.objects[KEY] is foreign, "another owner's PodGroup was adopted"
    assert "InstanceFailed" in cluster.reasons()
    # Its owner removes it: the rebuild after back-off makes our own and comes up.
    del cluster.objects[KEY]
    await within(harness, handle, ready_at(), tries=180)
    owners = cluster.objects[KEY]["metadata"]["ownerReferences"]
    assert [owner["uid"] for owner in owners] == ["u-1"]
    await handle.signal("delete", DeleteRequest())
    await handle.result()


async def test_deleting_the_instance_leaves_another_owners_pod_group(harness: Harness) -> None:
    foreign = pod_group(harness.namespace, isvc="other")
    harness.cluster.objects[KEY] = foreign
    handle = await harness.start(harness.spec(workers=1))
    await within(harness, handle, lambda s: s.phase == P.FAILED)
    await handle.signal("delete", DeleteRequest())
    final = await handle.result()
    assert final.deleted and harness.cluster.objects.get(KEY) is foreign


@pytest.fixture
def gang_sim() -> Iterator[KubeSim]:
    """kubesim with the optional scheduler-plugins PodGroup CRD installed."""
    sim = KubeSim(topology=TEST_TOPOLOGY, crds="all", timing=Timing.fast()).start()
    try:
        yield sim
    finally:
        sim.stop()


def read_group(custom: Any, namespace: str) -> dict[str, Any]:
    found = custom.get_namespaced_custom_object(
        "scheduling.x-k8s.io", "v1alpha1", namespace, "podgroups", GROUP
    )
    assert isinstance(found, dict)
    return found


@pytest.mark.kubesim
async def test_restart_waits_for_the_previous_pod_group_to_finish_terminating(
    workflow_env: WorkflowEnvironment, gang_sim: KubeSim, task_queue: str
) -> None:
    """A killed worker restarts the gang while its PodGroup, deleted meanwhile, is held by a
    finalizer: no pod of the new incarnation exists until it is gone, then a fresh one is made."""
    custom = kubernetes.client.CustomObjectsApi(gang_sim.api_client())
    group_api = ("scheduling.x-k8s.io", "v1alpha1")
    async with kube_harness(workflow_env, gang_sim, task_queue) as harness:
        namespace = harness.namespace
        handle = await harness.start(harness.spec(workers=1))
        await harness.until_real(handle, lambda s: s.phase == P.READY and s.serving)
        first = read_group(custom, namespace)
        custom.patch_namespaced_custom_object(
            *group_api, namespace, "podgroups", GROUP, {"metadata": {"finalizers": [HOLDING_FINALIZER]}}
        )
        custom.delete_namespaced_custom_object(*group_api, namespace, "podgroups", GROUP)
        harness.sim.kill_pod(namespace, "chat-engine-1-worker-0")
        status = await harness.until_real(
            handle,
            lambda s: s.operation is not None and s.operation.waiting == "PodGroupTerminating",
            within=30,
        )
        assert status.phase == P.RESTARTING and status.incarnation == 2
        assert harness.live_pods() == {}, "pods were created while the old PodGroup was terminating"
        held = read_group(custom, namespace)
        assert held["metadata"].get("deletionTimestamp")
        custom.patch_namespaced_custom_object(
            *group_api, namespace, "podgroups", GROUP, {"metadata": {"finalizers": None}}
        )
        status = await harness.until_skipping(
            handle, lambda s: s.phase == P.READY and s.serving and s.incarnation == 2, step=5, within=60
        )
        fresh = read_group(custom, namespace)
        assert fresh["metadata"]["uid"] != first["metadata"]["uid"]
        assert not fresh["metadata"].get("deletionTimestamp") and fresh["spec"]["minMember"] == 2
        assert {p["metadata"]["labels"]["ome.io/incarnation"] for p in harness.live_pods().values()} == {"2"}
        await handle.signal("delete", DeleteRequest())
        await harness.until_real(handle, lambda s: s.deleted)
