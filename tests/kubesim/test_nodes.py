"""Node failure and recovery, NoExecute taint eviction, cordon and drain. Each test gets its
own cluster because it breaks nodes."""

from __future__ import annotations

import time
from typing import Any

import kubernetes
import pytest
from kubernetes.client.rest import ApiException

from kubesim.errors import ApiError
from kubesim.handle import KubeSim
from tests.kubesim.helpers import is_ready, pod_body, wait_for


def _ready_status(core: kubernetes.client.CoreV1Api, node: str) -> str:
    return next(c.status for c in core.read_node(node).status.conditions if c.type == "Ready")


def _ready_pod_on(core: kubernetes.client.CoreV1Api, name: str, node: str, **spec: object) -> None:
    core.create_namespaced_pod("default", pod_body(name, nodeName=node, **spec))
    wait_for(lambda: is_ready(core.read_namespaced_pod(name, "default")), what=f"{name} ready")


def test_failed_node_loses_readiness_then_evicts_after_toleration(kubesim: KubeSim) -> None:
    core = kubernetes.client.CoreV1Api(kubesim.api_client())
    _ready_pod_on(core, "default-tolerations", "gpu-node-1")
    # Tolerates the unreachable taint for 3000 s (30 s at the test factor): still there after others go.
    _ready_pod_on(
        core,
        "patient",
        "gpu-node-1",
        tolerations=[
            {
                "key": "node.kubernetes.io/unreachable",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 1000,
            }
        ],
    )
    _ready_pod_on(core, "forever", "gpu-node-1", tolerations=[{"operator": "Exists"}])
    kubesim.fail_node("gpu-node-1")
    assert _ready_status(core, "gpu-node-1") == "Unknown"
    wait_for(lambda: not is_ready(core.read_namespaced_pod("forever", "default")), what="pod Ready=False")
    taints = wait_for(lambda: core.read_node("gpu-node-1").spec.taints, what="unreachable taints")
    assert {(t.key, t.effect) for t in taints} == {
        ("node.kubernetes.io/unreachable", "NoSchedule"),
        ("node.kubernetes.io/unreachable", "NoExecute"),
    }
    # The default 300 s toleration is 3 s here; the pod is marked for deletion but, its kubelet
    # being gone, stays Terminating until force-deleted.
    pod = wait_for(
        lambda: (
            (p := core.read_namespaced_pod("default-tolerations", "default")).metadata.deletion_timestamp
            and p
        ),
        timeout=15,
        what="taint eviction",
    )
    assert any(
        c.type == "DisruptionTarget" and c.reason == "DeletionByTaintManager" for c in pod.status.conditions
    )
    patient = core.read_namespaced_pod("patient", "default")
    assert patient.metadata.deletion_timestamp is None
    core.delete_namespaced_pod("default-tolerations", "default", grace_period_seconds=0)
    with pytest.raises(ApiException):
        core.read_namespaced_pod("default-tolerations", "default")
    kubesim.restore_node("gpu-node-1")
    wait_for(
        lambda: is_ready(core.read_namespaced_pod("forever", "default")), what="ready again after restore"
    )
    wait_for(lambda: not core.read_node("gpu-node-1").spec.taints, what="taints removed")
    assert core.read_namespaced_pod("forever", "default").metadata.deletion_timestamp is None


def test_cordon_keeps_new_pods_off_and_drain_respects_budgets(kubesim: KubeSim) -> None:
    api = kubesim.api_client()
    core, policy = kubernetes.client.CoreV1Api(api), kubernetes.client.PolicyV1Api(api)
    for name in ("web-1", "web-2"):
        core.create_namespaced_pod("default", pod_body(name, labels={"app": "web"}, nodeName="gpu-node-2"))
    core.create_namespaced_pod("default", pod_body("batch", nodeName="gpu-node-2"))
    wait_for(
        lambda: all(is_ready(core.read_namespaced_pod(n, "default")) for n in ("web-1", "web-2", "batch")),
        what="pods ready",
    )
    policy.create_namespaced_pod_disruption_budget(
        "default",
        {
            "metadata": {"name": "web"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
        },
    )
    result = kubesim.drain_node("gpu-node-2")
    assert result == {"evicted": ["default/batch"], "blocked": ["default/web-1", "default/web-2"]}
    node = core.read_node("gpu-node-2")
    assert node.spec.unschedulable is True
    assert any(
        t.key == "node.kubernetes.io/unschedulable"
        for t in wait_for(lambda: core.read_node("gpu-node-2").spec.taints, what="unschedulable taint")
    )
    # A new pod pinned by selector to the cordoned node cannot be scheduled.
    core.create_namespaced_pod(
        "default", pod_body("late", nodeSelector={"kubernetes.io/hostname": "gpu-node-2"})
    )
    pod = wait_for(
        lambda: (p := core.read_namespaced_pod("late", "default")).status.conditions and p,
        what="scheduling verdict",
    )
    assert pod.spec.node_name is None and pod.status.conditions[0].reason == "Unschedulable"
    # The drain keeps retrying: once a third replica is Ready elsewhere, the budget allows one
    # eviction, and exactly one of the two blocked pods goes.
    core.create_namespaced_pod("default", pod_body("web-3", labels={"app": "web"}, nodeName="gpu-node-1"))

    def still_serving_on_drained_node() -> list[str]:
        return [p.metadata.name for p in core.list_namespaced_pod("default", label_selector="app=web").items
                if p.spec.node_name == "gpu-node-2" and p.metadata.deletion_timestamp is None]

    wait_for(lambda: len(still_serving_on_drained_node()) == 1, what="one blocked pod evicted once allowed")
    kubesim.uncordon_node("gpu-node-2")
    wait_for(
        lambda: core.read_namespaced_pod("late", "default").spec.node_name == "gpu-node-2",
        what="scheduled after uncordon",
    )


def _gone(core: kubernetes.client.CoreV1Api, name: str) -> bool:
    try:
        core.read_namespaced_pod(name, "default")
    except ApiException as exc:
        return exc.status == 404
    return False


def test_deleted_node_takes_its_pods(kubesim: KubeSim) -> None:
    core = kubernetes.client.CoreV1Api(kubesim.api_client())
    _ready_pod_on(core, "orphan", "gpu-node-4")
    core.delete_node("gpu-node-4")
    wait_for(lambda: _gone(core, "orphan"), what="pod garbage-collected with its node")
    # Later, with no node changing since, a pod bound to the gone node: the node controller
    # looks at the pods that changed, not only at every pod when a node changes.
    core.create_namespaced_pod("default", pod_body("late-orphan", nodeName="gpu-node-4"))
    wait_for(lambda: _gone(core, "late-orphan"), what="a pod bound to a node that is gone garbage-collected")


def test_a_stalled_node_stays_ready_but_its_new_pods_wait_in_container_creating(kubesim: KubeSim) -> None:
    """A wedged container runtime: the node is Ready and takes pods, which never get a sandbox
    (one `FailedCreatePodSandBox` Warning) and wait in ContainerCreating; a pod that ran before
    keeps running; deleting a waiting pod removes it at once; once unstalled, pods start."""
    core = kubernetes.client.CoreV1Api(kubesim.api_client())
    _ready_pod_on(core, "before", "gpu-node-1")
    kubesim.stall_node("gpu-node-1")
    assert _ready_status(core, "gpu-node-1") == "True"
    core.create_namespaced_pod("default", pod_body("wedged", nodeName="gpu-node-1"))

    def waiting_reason() -> str | None:
        statuses = core.read_namespaced_pod("wedged", "default").status.container_statuses or []
        waiting = statuses[0].state.waiting if statuses else None
        return waiting.reason if waiting is not None else None

    assert wait_for(waiting_reason, what="the container waits") == "ContainerCreating"
    time.sleep(0.5)  # far past the time the fast timing needs to make a pod Ready
    pod = core.read_namespaced_pod("wedged", "default")
    assert not is_ready(pod) and pod.status.phase == "Pending" and not pod.status.pod_ip
    assert waiting_reason() == "ContainerCreating"
    warned = [
        e for e in core.list_namespaced_event("default").items
        if e.reason == "FailedCreatePodSandBox" and e.involved_object.name == "wedged"
    ]
    assert len(warned) == 1 and warned[0].type == "Warning"
    assert is_ready(core.read_namespaced_pod("before", "default"))

    core.delete_namespaced_pod("wedged", "default")
    wait_for(lambda: "wedged" not in {p.metadata.name for p in core.list_namespaced_pod("default").items},
             what="the waiting pod is removed")

    core.create_namespaced_pod("default", pod_body("later", nodeName="gpu-node-1"))
    wait_for(waiting_reason_of(core, "later"), what="the later pod waits")
    kubesim.unstall_node("gpu-node-1")
    wait_for(lambda: is_ready(core.read_namespaced_pod("later", "default")), what="the later pod starts")
    with pytest.raises(ApiError, match='nodes "no-such-node" not found'):
        kubesim.stall_node("no-such-node")


def waiting_reason_of(core: kubernetes.client.CoreV1Api, name: str) -> Any:
    def probe() -> bool:
        statuses = core.read_namespaced_pod(name, "default").status.container_statuses or []
        return bool(statuses and statuses[0].state.waiting and statuses[0].state.waiting.reason == "ContainerCreating")

    return probe
