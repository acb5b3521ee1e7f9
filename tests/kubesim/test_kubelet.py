"""Pod lifecycle as the simulated kubelet reports it: phases, conditions, container states,
readiness gates, endpoints, image pull failures, crash loops, readiness loss, kills."""

from __future__ import annotations

from typing import Any

import kubernetes

from kubesim.handle import KubeSim
from tests.kubesim.helpers import Clients, condition, is_ready, pod_body, wait_for, wait_pod


def _pod(k8s: Clients, name: str) -> Any:
    return k8s.core.read_namespaced_pod(name, k8s.namespace)


def test_pod_runs_through_phases_to_ready(k8s: Clients) -> None:
    k8s.core.create_namespaced_pod(k8s.namespace, pod_body("p", gpus=2))
    pod = wait_pod(k8s, "p", lambda p: is_ready(p), what="pod Ready")
    assert pod.status.phase == "Running" and pod.spec.node_name.startswith("gpu-node-")
    assert pod.status.pod_ip and pod.status.host_ip and pod.status.start_time is not None
    types = [c.type for c in pod.status.conditions]
    assert types == ["PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"]
    status = pod.status.container_statuses[0]
    assert status.ready and status.started and status.restart_count == 0
    assert status.state.running.started_at is not None and status.container_id.startswith("containerd://")
    assert pod.status.observed_generation == pod.metadata.generation == 1
    events = k8s.core.list_namespaced_event(k8s.namespace, field_selector="involvedObject.name=p").items
    reasons = [e.reason for e in sorted(events, key=lambda e: int(e.metadata.resource_version))]
    assert reasons == ["Scheduled", "Pulling", "Pulled", "Created", "Started"]
    kubelet_events = [e for e in events if e.source.component == "kubelet"]
    assert {e.source.host for e in kubelet_events} == {pod.spec.node_name}
    assert kubelet_events[0].message == 'Pulling image "server:1"'
    assert pod.status.qos_class == "BestEffort" or pod.status.qos_class == "Burstable"


def test_slow_image_shows_container_creating(k8s: Clients) -> None:
    k8s.sim.set_image_behavior("slow:1", pull_seconds=30)
    k8s.core.create_namespaced_pod(k8s.namespace, pod_body("p", image="slow:1"))
    pod = wait_pod(k8s, "p", lambda p: p.status.container_statuses, what="container status")
    assert pod.status.phase == "Pending"
    assert pod.status.container_statuses[0].state.waiting.reason == "ContainerCreating"
    assert condition(pod, "ContainersReady").reason == "ContainersNotReady"


def test_readiness_gate_controls_ready_and_endpoints(k8s: Clients) -> None:
    ns = k8s.namespace
    k8s.core.create_namespaced_service(ns, {"metadata": {"name": "svc"}, "spec": {
        "selector": {"app": "m"}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}})
    k8s.core.create_namespaced_pod(ns, pod_body("g", labels={"app": "m"},
                                                readinessGates=[{"conditionType": "ome.io/serving"}]))
    pod = wait_pod(k8s, "g", lambda p: condition(p, "ContainersReady") and
                   condition(p, "ContainersReady").status == "True", what="containers ready")
    ready = condition(pod, "Ready")
    assert ready.status == "False" and ready.reason == "ReadinessGatesNotReady"
    assert 'readiness gate "ome.io/serving" does not exist' in ready.message
    ep = wait_for(lambda: (e := k8s.core.read_namespaced_endpoints("svc", ns)).subsets and e, what="endpoints")
    assert not ep.subsets[0].addresses and ep.subsets[0].not_ready_addresses[0].target_ref.name == "g"
    assert ep.subsets[0].ports[0].port == 8080
    k8s.core.patch_namespaced_pod_status("g", ns, {"status": {"conditions": [
        {"type": "ome.io/serving", "status": "True"}]}})
    wait_for(lambda: is_ready(_pod(k8s, "g")), what="Ready after the gate")
    ep = wait_for(lambda: (e := k8s.core.read_namespaced_endpoints("svc", ns)).subsets[0].addresses and e,
                  what="ready address")
    assert ep.subsets[0].addresses[0].ip == _pod(k8s, "g").status.pod_ip
    discovery = kubernetes.client.DiscoveryV1Api(k8s.api)
    found = discovery.list_namespaced_endpoint_slice(ns, label_selector="kubernetes.io/service-name=svc").items
    assert found[0].endpoints[0].conditions.ready is True
    # Setting the gate False takes the pod out of rotation again.
    k8s.core.patch_namespaced_pod_status("g", ns, {"status": {"conditions": [
        {"type": "ome.io/serving", "status": "False"}]}})
    wait_for(lambda: not k8s.core.read_namespaced_endpoints("svc", ns).subsets[0].addresses, what="out of rotation")


def test_image_pull_failure_then_backoff(k8s: Clients) -> None:
    k8s.sim.set_image_behavior("broken:1", fail_pull=True)
    k8s.core.create_namespaced_pod(k8s.namespace, pod_body("p", image="broken:1"))
    reasons: set[str] = set()

    def both_seen() -> bool:
        statuses = _pod(k8s, "p").status.container_statuses or []
        waiting = statuses[0].state.waiting if statuses else None
        if waiting is not None:
            reasons.add(waiting.reason)
        return {"ErrImagePull", "ImagePullBackOff"} <= reasons

    wait_for(both_seen, what="ErrImagePull and ImagePullBackOff")
    assert _pod(k8s, "p").status.phase == "Pending"


def test_crashing_image_loops_with_back_off(k8s: Clients) -> None:
    k8s.sim.set_image_behavior("crashy:1", crash=True)
    k8s.core.create_namespaced_pod(k8s.namespace, pod_body("p", image="crashy:1"))
    pod = wait_pod(k8s, "p", lambda p: (p.status.container_statuses or [None])[0] is not None and
                   p.status.container_statuses[0].restart_count >= 2, timeout=20, what="two restarts")
    status = pod.status.container_statuses[0]
    assert status.last_state.terminated.exit_code == 1 and status.last_state.terminated.reason == "Error"
    wait_for(lambda: (s := _pod(k8s, "p").status.container_statuses[0].state.waiting) and
             s.reason == "CrashLoopBackOff", timeout=20, what="CrashLoopBackOff")
    assert not is_ready(_pod(k8s, "p"))
    back_off = k8s.core.list_namespaced_event(k8s.namespace, field_selector="involvedObject.name=p,reason=BackOff")
    assert back_off.items[0].type == "Warning"
    assert back_off.items[0].message.startswith("Back-off restarting failed container main in pod p_")


def test_crash_with_restart_policy_never_fails_the_pod(k8s: Clients) -> None:
    k8s.sim.set_image_behavior("crash-once:1", crash=True)
    k8s.core.create_namespaced_pod(k8s.namespace, pod_body("p", image="crash-once:1", restartPolicy="Never"))
    pod = wait_pod(k8s, "p", lambda p: p.status.phase == "Failed", what="phase Failed")
    assert pod.status.container_statuses[0].state.terminated.exit_code == 1
    assert pod.status.container_statuses[0].restart_count == 0


def test_image_that_stops_being_ready(k8s: Clients) -> None:
    k8s.sim.set_image_behavior("flaky:1", unready_after_seconds=2.0)
    k8s.core.create_namespaced_pod(k8s.namespace, pod_body("p", image="flaky:1"))
    wait_for(lambda: is_ready(_pod(k8s, "p")), what="ready first")
    pod = wait_pod(k8s, "p", lambda p: not is_ready(p), what="unready later")
    assert pod.status.phase == "Running" and pod.status.container_statuses[0].state.running is not None


def test_kill_pod_restarts_the_container(k8s: Clients) -> None:
    k8s.core.create_namespaced_pod(k8s.namespace, pod_body("p"))
    wait_for(lambda: is_ready(_pod(k8s, "p")), what="ready")
    k8s.sim.kill_pod(k8s.namespace, "p")
    pod = wait_pod(k8s, "p", lambda p: p.status.container_statuses[0].restart_count == 1
                   and is_ready(p), what="restarted and ready")
    assert pod.status.container_statuses[0].last_state.terminated.exit_code == 137


def test_unschedulable_pod_gets_condition_and_one_counted_event(kubesim: KubeSim) -> None:
    # A cluster of its own: other tests' pods leaving would count as scheduling attempts too.
    api = kubesim.api_client()
    k8s = Clients(kubesim, api, kubernetes.client.CoreV1Api(api), kubernetes.client.AppsV1Api(api),
                  kubernetes.client.PolicyV1Api(api), kubernetes.client.CustomObjectsApi(api), "default")
    ns = k8s.namespace
    k8s.core.create_namespaced_pod(ns, pod_body("huge", gpus=64))
    pod = wait_pod(k8s, "huge", lambda p: condition(p, "PodScheduled"), what="PodScheduled")
    cond = condition(pod, "PodScheduled")
    assert cond.status == "False" and cond.reason == "Unschedulable"
    assert "Insufficient nvidia.com/gpu" in cond.message
    events = wait_for(lambda: k8s.core.list_namespaced_event(
        ns, field_selector="involvedObject.name=huge,reason=FailedScheduling").items, what="FailedScheduling event")
    assert len(events) == 1 and events[0].type == "Warning" and events[0].message == cond.message
    assert events[0].count == 1 and events[0].source.component == "default-scheduler"
    # A change that could make room (here a pod leaving) is a new attempt: the same Event counts it.
    k8s.core.create_namespaced_pod(ns, pod_body("leaving", schedulerName="absent-scheduler"))
    k8s.core.delete_namespaced_pod("leaving", ns)
    wait_for(lambda: k8s.core.list_namespaced_event(
        ns, field_selector="involvedObject.name=huge,reason=FailedScheduling").items[0].count == 2,
        what="event count 2")


def test_pod_for_another_scheduler_waits(k8s: Clients) -> None:
    k8s.core.create_namespaced_pod(k8s.namespace, pod_body("other", schedulerName="volcano"))
    k8s.core.create_namespaced_pod(k8s.namespace, pod_body("mine"))
    wait_for(lambda: is_ready(_pod(k8s, "mine")), what="default-scheduler pod ready")
    other = _pod(k8s, "other")
    assert other.spec.node_name is None and not other.status.conditions


def test_binding_subresource_places_a_pod(k8s: Clients) -> None:
    ns = k8s.namespace
    k8s.core.create_namespaced_pod(ns, pod_body("b", schedulerName="my-scheduler"))
    k8s.core.create_namespaced_pod_binding("b", ns, {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "b"},
                                                     "target": {"apiVersion": "v1", "kind": "Node",
                                                                "name": "gpu-node-3"}},
                                           _preload_content=False)
    pod = wait_pod(k8s, "b", lambda p: is_ready(p), what="bound pod ready")
    assert pod.spec.node_name == "gpu-node-3"


def test_a_pass_for_one_pod_keeps_the_wake_up_of_another(k8s: Clients) -> None:
    """The kubelet looks only at the pods that changed or whose timer is due: a pass for one
    pod (here a label written on a Ready pod) must not drop the wake-up of a pod still pulling."""
    k8s.sim.set_image_behavior("late:1", pull_seconds=3.0)
    k8s.core.create_namespaced_pod(k8s.namespace, pod_body("late", image="late:1"))
    k8s.core.create_namespaced_pod(k8s.namespace, pod_body("early"))
    wait_for(lambda: is_ready(_pod(k8s, "early")), what="the quick pod ready")
    assert not is_ready(_pod(k8s, "late"))
    k8s.core.patch_namespaced_pod("early", k8s.namespace, {"metadata": {"labels": {"touched": "yes"}}})
    pod = wait_pod(k8s, "late", lambda p: is_ready(p), what="the slow pod ready once its pull ends")
    assert pod.status.container_statuses[0].state.running is not None
