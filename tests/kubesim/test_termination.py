"""Pod termination as a kubelet performs it: SIGTERM, the container's own exit time, SIGKILL at
the end of the grace period, the final container states and `Killing` events, and no kubelet at
all on a failed node. The clusters run at the test factor 0.01, so 100 s of grace is 1 s here.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import kubernetes
import pytest
from kubernetes.client.rest import ApiException

from kubesim.__main__ import parse_args
from kubesim.handle import KubeSim
from kubesim.timing import Timing
from tests.kubesim.helpers import Clients, is_ready, pod_body, raw_request, wait_for, wait_pod


def _image(stem: str) -> str:
    """A fresh image name, so behaviours set on the shared cluster cannot leak between tests."""
    return f"{stem}-{uuid.uuid4().hex[:6]}:1"


def _exists(core: kubernetes.client.CoreV1Api, name: str, namespace: str) -> bool:
    try:
        core.read_namespaced_pod(name, namespace)
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


def _delete_and_watch(core: kubernetes.client.CoreV1Api, name: str, namespace: str,
                      grace: int | None = None, timeout: int = 30) -> tuple[float, list[tuple[str, Any]]]:
    """Delete the pod and follow its watch events until DELETED; return the seconds it took
    and the (type, pod) events seen after the delete."""
    listed = core.list_namespaced_pod(namespace, field_selector=f"metadata.name={name}")
    started = time.monotonic()
    if grace is None:
        deleted = core.delete_namespaced_pod(name, namespace)
    else:
        deleted = core.delete_namespaced_pod(name, namespace, grace_period_seconds=grace)
    assert deleted.metadata.deletion_timestamp is not None, "the delete must start a graceful termination"
    seen: list[tuple[str, Any]] = []
    watch = kubernetes.watch.Watch()
    for event in watch.stream(core.list_namespaced_pod, namespace, field_selector=f"metadata.name={name}",
                              resource_version=listed.metadata.resource_version, timeout_seconds=timeout):
        seen.append((event["type"], event["object"]))
        if event["type"] == "DELETED":
            watch.stop()
    assert seen and seen[-1][0] == "DELETED", f"pod {name} was not deleted within {timeout}s: {seen!r}"
    return time.monotonic() - started, seen


def _ready(k8s: Clients, body: dict[str, Any]) -> Any:
    k8s.core.create_namespaced_pod(k8s.namespace, body)
    return wait_pod(k8s, body["metadata"]["name"], is_ready, what="Ready")


def _terminated(pod: Any) -> dict[str, tuple[int, str]]:
    return {s.name: (s.state.terminated.exit_code, s.state.terminated.reason)
            for s in pod.status.container_statuses if s.state.terminated}


def test_deleted_pod_is_gone_once_its_container_exits_not_after_the_grace(k8s: Clients) -> None:
    image = _image("stops-in-2s")
    k8s.sim.set_image_behavior(image, stop_seconds=200)  # 2 s here
    # 6000 s of grace is 60 s here: the pod must leave long before it runs out.
    _ready(k8s, pod_body("p", image=image, terminationGracePeriodSeconds=6000))
    took, seen = _delete_and_watch(k8s.core, "p", k8s.namespace)
    assert 1.9 <= took < 30, f"expected the pod gone ~2 s after the delete (its stop time), took {took:.2f}s"
    final = seen[-1][1]
    assert _terminated(final) == {"main": (0, "Completed")}
    status = final.status.container_statuses[0]
    assert not status.ready and status.state.terminated.finished_at is not None
    assert status.state.terminated.container_id == status.container_id
    events = k8s.core.list_namespaced_event(k8s.namespace, field_selector="involvedObject.name=p").items
    killing = [e for e in events if e.reason == "Killing"]
    assert len(killing) == 1, [e.reason for e in events]
    assert killing[0].type == "Normal" and killing[0].message == "Stopping container main"
    assert killing[0].source.component == "kubelet" and killing[0].source.host == final.spec.node_name


def test_default_stop_time_is_short_and_scaled(k8s: Clients) -> None:
    # The default 1 s stop is 10 ms here, against 6000 s (60 s here) of grace.
    assert Timing.fast().stop_after("any:1") == pytest.approx(0.01)
    _ready(k8s, pod_body("p", image=_image("plain"), terminationGracePeriodSeconds=6000))
    took, seen = _delete_and_watch(k8s.core, "p", k8s.namespace)
    assert took < 30, f"took {took:.2f}s"
    assert _terminated(seen[-1][1]) == {"main": (0, "Completed")}


def test_image_ignoring_sigterm_is_killed_at_the_grace_with_137(k8s: Clients) -> None:
    image = _image("deaf")
    k8s.sim.set_image_behavior(image, stop_seconds=-1)
    _ready(k8s, pod_body("p", image=image, terminationGracePeriodSeconds=100))  # 1 s here
    took, seen = _delete_and_watch(k8s.core, "p", k8s.namespace)
    assert took >= 0.95, f"a SIGTERM-ignoring container must last the whole grace period; took {took:.2f}s"
    assert _terminated(seen[-1][1]) == {"main": (137, "Error")}


def test_second_delete_with_shorter_grace_kills_sooner(k8s: Clients) -> None:
    image = _image("deaf")
    k8s.sim.set_image_behavior(image, stop_seconds=-1)
    _ready(k8s, pod_body("p", image=image, terminationGracePeriodSeconds=6000))  # 60 s here
    k8s.core.delete_namespaced_pod("p", k8s.namespace)
    assert k8s.core.read_namespaced_pod("p", k8s.namespace).metadata.deletion_grace_period_seconds == 6000
    took, seen = _delete_and_watch(k8s.core, "p", k8s.namespace, grace=100)  # 1 s here
    assert took < 30, f"the shortened grace period must apply; took {took:.2f}s"
    assert _terminated(seen[-1][1]) == {"main": (137, "Error")}


def test_containers_exit_one_by_one_and_each_reports_how(k8s: Clients) -> None:
    quick, deaf = _image("quick"), _image("deaf")
    k8s.sim.set_image_behavior(quick, stop_seconds=0)
    k8s.sim.set_image_behavior(deaf, stop_seconds=-1)
    body = pod_body("p", image=quick, terminationGracePeriodSeconds=150)  # 1.5 s here
    body["spec"]["containers"].append({"name": "sidecar", "image": deaf})
    _ready(k8s, body)
    _, seen = _delete_and_watch(k8s.core, "p", k8s.namespace)
    # While the sidecar still runs, the kubelet already reports the main container's exit.
    partial = [pod for kind, pod in seen if kind == "MODIFIED" and _terminated(pod) == {"main": (0, "Completed")}]
    assert partial, [(kind, _terminated(pod)) for kind, pod in seen]
    assert partial[0].status.container_statuses[1].state.running is not None
    assert _terminated(seen[-1][1]) == {"main": (0, "Completed"), "sidecar": (137, "Error")}
    events = k8s.core.list_namespaced_event(k8s.namespace, field_selector="involvedObject.name=p").items
    assert sorted(e.message for e in events if e.reason == "Killing") == [
        "Stopping container main", "Stopping container sidecar"]


def test_grace_zero_is_immediate(k8s: Clients) -> None:
    image = _image("deaf")
    k8s.sim.set_image_behavior(image, stop_seconds=-1)
    _ready(k8s, pod_body("p", image=image))
    k8s.core.delete_namespaced_pod("p", k8s.namespace, grace_period_seconds=0)
    assert not _exists(k8s.core, "p", k8s.namespace)


def test_stop_time_through_the_control_api_and_cli(k8s: Clients) -> None:
    image = _image("http-deaf")
    code, _ = raw_request(k8s.sim, "POST", "/sim/images", {"image": image, "stop_seconds": -1})
    assert code == 200
    assert k8s.sim.cluster.timing.stop_after(image) is None
    code, body = raw_request(k8s.sim, "POST", "/sim/timing", {"stop_seconds": 2})
    try:
        assert code == 200 and body["stop_seconds"] == 2
        assert k8s.sim.cluster.timing.stop_after("other:1") == pytest.approx(0.02)
    finally:
        k8s.sim.set_default_timing(stop_seconds=1.0)
    code, body = raw_request(k8s.sim, "POST", "/sim/timing", {"stop_secs": 2})
    assert code == 400 and "stop_secs" in body["message"] and "stop_seconds" in body["message"]
    assert parse_args([]).stop_seconds == 1.0
    assert parse_args(["--stop-seconds", "-1"]).stop_seconds == -1.0


def test_pod_on_failed_node_stays_terminating_until_force_deleted(kubesim: KubeSim) -> None:
    core = kubernetes.client.CoreV1Api(kubesim.api_client())
    image = _image("deaf")
    kubesim.set_image_behavior(image, stop_seconds=-1)
    for name, node in (("stranded", "gpu-node-1"), ("reference", "gpu-node-2")):
        core.create_namespaced_pod("default", pod_body(name, image=image, nodeName=node,
                                                       terminationGracePeriodSeconds=100))
        wait_for(lambda n=name: is_ready(core.read_namespaced_pod(n, "default")), what=f"{name} ready")
    kubesim.fail_node("gpu-node-1")
    core.delete_namespaced_pod("stranded", "default")
    core.delete_namespaced_pod("reference", "default")
    # The same grace on a healthy node runs out and that pod goes; the failed node's does not.
    wait_for(lambda: not _exists(core, "reference", "default"), timeout=30, what="reference pod gone")
    stranded = core.read_namespaced_pod("stranded", "default")
    assert stranded.metadata.deletion_timestamp is not None
    assert all(s.state.terminated is None for s in stranded.status.container_statuses)
    core.delete_namespaced_pod("stranded", "default", grace_period_seconds=0)
    assert not _exists(core, "stranded", "default")
