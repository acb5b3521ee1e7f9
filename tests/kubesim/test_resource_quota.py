"""ResourceQuota on pods (`kubesim.quota`): a pod over its namespace's quota (its count, or what
it requests: cpu, memory, GPUs) is refused with the API server's 403 `exceeded quota`, judged on
the quota's status (which counts the pods that hold it, and is charged at each admission), after
the validating webhooks; a pod that is gone (or finished) frees its room once counted; a cpu or
memory quota refuses a container that does not state it (`failed quota`)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from kubesim.controllers.quota import QuotaStatus
from kubesim.errors import ApiError
from kubesim.quota import QUOTAS, admit
from kubesim.quota_objects import PODS
from kubesim.store import Store
from tests.kubesim.helpers import Clients, pod_body, quota_counted, raw_request, wait_for
from tests.kubesim.webhooks import WebhookServer, hold_writes, pod_writes

KUBECTL = "/usr/bin/kubectl"


def quota(k8s: Clients, name: str, hard: dict[str, str], **spec: Any) -> None:
    """Create a quota and wait until its status names its limits: only then does it limit."""
    k8s.core.create_namespaced_resource_quota(k8s.namespace, {"metadata": {"name": name}, "spec": {"hard": hard, **spec}})
    wait_for(lambda: quota_counted(k8s.core, k8s.namespace, name) or None, what=f"quota {name} counted")


def used(k8s: Clients, name: str) -> dict[str, str] | None:
    status = k8s.core.read_namespaced_resource_quota(name, k8s.namespace).status
    return status.used if status is not None and status.hard is not None else None


def refused(k8s: Clients, name: str) -> ApiException:
    with pytest.raises(ApiException) as err:
        k8s.core.create_namespaced_pod(k8s.namespace, pod_body(name))
    return err.value


def test_a_pod_over_the_quota_is_refused_until_one_goes(k8s: Clients) -> None:
    ns = k8s.namespace
    quota(k8s, "pod-count", {"pods": "2", "services": "4"})
    assert wait_for(lambda: used(k8s, "pod-count"), what="the quota's status") == {"pods": "0", "services": "0"}
    for name in ("a", "b"):
        k8s.core.create_namespaced_pod(ns, pod_body(name))
    error = refused(k8s, "c")
    body = json.loads(error.body)
    assert (error.status, body["reason"]) == (403, "Forbidden")
    assert body["message"] == (
        'pods "c" is forbidden: exceeded quota: pod-count, requested: pods=1, used: pods=2, limited: pods=2'
    )
    assert body["details"] == {"name": "c", "kind": "pods"}
    assert wait_for(lambda: used(k8s, "pod-count") == {"pods": "2", "services": "0"} or None, what="two pods counted")
    hard = k8s.core.read_namespaced_resource_quota("pod-count", ns).status.hard
    assert hard == {"pods": "2", "services": "4"}
    # A dry run is refused the same way, and a pod that is gone frees its room.
    with pytest.raises(ApiException) as dry:
        k8s.core.create_namespaced_pod(ns, pod_body("c"), dry_run="All")
    assert dry.value.status == 403
    k8s.core.delete_namespaced_pod("a", ns, grace_period_seconds=0)
    # The room shows once the controller has counted again (admission reads the status).
    wait_for(lambda: used(k8s, "pod-count") == {"pods": "1", "services": "0"} or None, what="one pod counted")
    k8s.core.create_namespaced_pod(ns, pod_body("c"))
    assert wait_for(lambda: used(k8s, "pod-count") == {"pods": "2", "services": "0"} or None, what="two pods counted")
    # The API server answers a quota's deletion with the object deleted, as it does a pod's.
    assert k8s.core.delete_namespaced_resource_quota("pod-count", ns).metadata.name == "pod-count"
    k8s.core.create_namespaced_pod(ns, pod_body("d"))


def test_a_finished_pod_frees_pods_but_not_count_pods(k8s: Clients) -> None:
    """`pods` counts pods that have not finished; `count/pods` every pod stored."""
    ns = k8s.namespace
    k8s.sim.set_image_behavior("exits:1", crash=True)
    quota(k8s, "live", {"pods": "1"})
    quota(k8s, "stored", {"count/pods": "2"})
    k8s.core.create_namespaced_pod(ns, pod_body("done", image="exits:1", restartPolicy="Never"))
    wait_for(lambda: k8s.core.read_namespaced_pod("done", ns).status.phase == "Failed", what="the pod to finish")
    wait_for(lambda: used(k8s, "live") == {"pods": "0"} or None, what="the finished pod not counted")
    assert used(k8s, "stored") == {"count/pods": "1"}
    k8s.core.create_namespaced_pod(ns, pod_body("a"))
    both = json.loads(refused(k8s, "b").body)["message"]
    assert both == 'pods "b" is forbidden: exceeded quota: live, requested: pods=1, used: pods=1, limited: pods=1'
    k8s.core.delete_namespaced_resource_quota("live", ns)
    wait_for(lambda: used(k8s, "stored") == {"count/pods": "2"} or None, what="two pods stored, counted")
    assert json.loads(refused(k8s, "b").body)["message"].endswith(
        "exceeded quota: stored, requested: count/pods=1, used: count/pods=2, limited: count/pods=2"
    )
    other = f"{ns}-other"
    k8s.core.create_namespace({"metadata": {"name": other}})
    k8s.core.create_namespaced_pod(other, pod_body("b"))


def test_a_pod_terminating_past_its_grace_stops_counting(k8s: Clients) -> None:
    """A pod stuck Terminating (its node lost) holds the quota
    until its deletion grace has passed after its deletion time, then frees it."""
    ns = k8s.namespace
    quota(k8s, "pod-count", {"pods": "1"})
    k8s.core.create_namespaced_pod(ns, pod_body("stuck"))
    wait_for(lambda: k8s.core.read_namespaced_pod("stuck", ns).status.phase == "Running" or None, what="Running")
    node = k8s.core.read_namespaced_pod("stuck", ns).spec.node_name
    k8s.sim.fail_node(node)
    try:
        k8s.core.delete_namespaced_pod("stuck", ns, grace_period_seconds=1)
        assert refused(k8s, "next").status == 403
        # deletionTimestamp is now + 1 s; it stops counting 1 s of grace after that.
        wait_for(lambda: used(k8s, "pod-count") == {"pods": "0"} or None, what="the stuck pod to stop counting")
        still = k8s.core.read_namespaced_pod("stuck", ns)
        assert (still.status.phase, still.metadata.deletion_timestamp is not None) == ("Running", True)
        k8s.core.create_namespaced_pod(ns, pod_body("next"))
    finally:
        k8s.sim.restore_node(node)


def test_a_scoped_quota_is_kept_but_not_enforced(k8s: Clients) -> None:
    quota(k8s, "best-effort", {"pods": "0"}, scopes=["BestEffort"])
    k8s.core.create_namespaced_pod(k8s.namespace, pod_body("a"))
    status = wait_for(lambda: k8s.core.read_namespaced_resource_quota("best-effort", k8s.namespace).status, what="status")
    assert status.hard == {"pods": "0"}
    assert not status.used, "no count for pods kubesim cannot tell it covers"


def test_a_quotas_scopes_cannot_change(k8s: Clients) -> None:
    quota(k8s, "best-effort", {"pods": "0"}, scopes=["BestEffort"])
    with pytest.raises(ApiException) as err:
        k8s.core.patch_namespaced_resource_quota("best-effort", k8s.namespace, {"spec": {"scopes": ["NotBestEffort"]}})
    assert err.value.status == 422
    assert json.loads(err.value.body)["message"] == (
        'ResourceQuota "best-effort" is invalid: spec.scopes: Invalid value: '
        '[]core.ResourceQuotaScope{"NotBestEffort"}: field is immutable'
    )
    # The same scopes in another order are the same set; the limits themselves may change.
    k8s.core.patch_namespaced_resource_quota("best-effort", k8s.namespace, {"spec": {"hard": {"pods": "3"}}})
    assert k8s.core.read_namespaced_resource_quota("best-effort", k8s.namespace).spec.scopes == ["BestEffort"]


def test_a_replicaset_refused_by_the_quota_stops_and_tries_again(k8s: Clients) -> None:
    """As the ReplicaSet controller does: a refused create is an event, and the controller
    tries again later (here once the quota has room)."""
    ns = k8s.namespace
    quota(k8s, "pod-count", {"pods": "1"})
    template = {"metadata": {"labels": {"app": "w"}}, "spec": {"containers": [{"name": "main", "image": "server:1"}]}}
    k8s.apps.create_namespaced_replica_set(
        ns, {"metadata": {"name": "w"}, "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "w"}}, "template": template}}
    )
    wait_for(lambda: len(k8s.core.list_namespaced_pod(ns).items) == 1 or None, what="one pod")
    failed = wait_for(
        lambda: [e for e in k8s.core.list_namespaced_event(ns).items if e.reason == "FailedCreate"] or None,
        what="the refusal's event",
    )
    assert "exceeded quota: pod-count" in failed[0].message
    k8s.core.patch_namespaced_resource_quota("pod-count", ns, {"spec": {"hard": {"pods": "3"}}})
    wait_for(lambda: len(k8s.core.list_namespaced_pod(ns).items) == 3 or None, timeout=15, what="three pods")


@pytest.mark.parametrize(
    ("value", "says"),
    [("many", 'spec.hard[pods]: Invalid value: "many"'), ("-1", 'spec.hard[pods]: Invalid value: "-1": must be greater')],
)
def test_a_hard_limit_that_is_no_quantity_is_invalid(k8s: Clients, value: str, says: str) -> None:
    with pytest.raises(ApiException) as err:
        quota(k8s, "bad", {"pods": value})
    assert err.value.status == 422
    assert says in json.loads(err.value.body)["message"]


@pytest.mark.skipif(not os.path.exists(KUBECTL), reason=f"{KUBECTL} is absent (it ships in the base image)")
def test_kubectl_shows_what_the_pods_use(k8s: Clients, tmp_path: Path) -> None:
    quota(k8s, "pod-count", {"pods": "3", "requests.cpu": "4", "limits.memory": "8Gi", "services": "2"})
    stated = {"name": "main", "image": "server:1", "resources": {"requests": {"cpu": "500m"}, "limits": {"memory": "1Gi"}}}
    k8s.core.create_namespaced_pod(k8s.namespace, pod_body("a", containers=[stated]))
    wanted = {"pods": "1", "requests.cpu": "500m", "limits.memory": "1Gi", "services": "0"}
    wait_for(lambda: used(k8s, "pod-count") == wanted or None, what="one pod counted")
    env = {**os.environ, "KUBECONFIG": k8s.sim.kubeconfig_path, "HOME": str(tmp_path)}
    shown = subprocess.run(
        [KUBECTL, "get", "quota", "-n", k8s.namespace], env=env, capture_output=True, text=True, timeout=60, check=True
    ).stdout.splitlines()
    assert shown[0].split() == ["NAME", "AGE", "REQUEST", "LIMIT"]
    assert shown[1].startswith("pod-count")
    assert shown[1].endswith("pods: 1/3, requests.cpu: 500m/4, services: 0/2   limits.memory: 1Gi/8Gi")


def test_admission_reads_and_charges_the_status_not_the_pods(k8s: Clients, monkeypatch: pytest.MonkeyPatch) -> None:
    """As kube-apiserver's: each pod admitted is charged to the quota's status at once, so the
    limit holds however far behind the controller's count is; and room a pod frees shows only
    once the controller has counted again. Here the controller stops counting after its first
    count."""
    quota(k8s, "pod-count", {"pods": "2"})
    (controller,) = [c for c in k8s.sim.cluster.controllers if isinstance(c, QuotaStatus)]
    monkeypatch.setattr(controller, "relevant", lambda change: False)
    k8s.core.create_namespaced_pod(k8s.namespace, pod_body("a"))
    # A pod made by server-side apply is charged the same way.
    path = f"/api/v1/namespaces/{k8s.namespace}/pods/b?fieldManager=test"
    code, _ = raw_request(k8s.sim, "PATCH", path, json.dumps(pod_body("b")), "application/apply-patch+yaml")
    assert code == 201
    assert used(k8s, "pod-count") == {"pods": "2"}, "charged by the admission"
    assert refused(k8s, "c").status == 403
    code, body = raw_request(k8s.sim, "PATCH", path.replace("/b?", "/c?"), json.dumps(pod_body("c")),
                             "application/apply-patch+yaml")
    assert (code, body["message"][:34]) == (403, 'pods "c" is forbidden: exceeded qu')
    k8s.core.delete_namespaced_pod("a", k8s.namespace, grace_period_seconds=0)
    assert refused(k8s, "c").status == 403, "not counted again yet"
    monkeypatch.undo()
    k8s.sim.call(controller.poke)
    wait_for(lambda: used(k8s, "pod-count") == {"pods": "1"} or None, what="counted again")
    k8s.core.create_namespaced_pod(k8s.namespace, pod_body("c"))


def test_a_taken_name_is_refused_after_the_quota(k8s: Clients, monkeypatch: pytest.MonkeyPatch) -> None:
    """Storage finds a name taken after the whole admission: a full quota refuses a pod whose
    name is taken (403, not 409); with room, the pod is charged, then refused 409, and the charge
    stays until the quota is counted again, as on the API server. A dryRun finds it taken too."""
    quota(k8s, "pod-count", {"pods": "2"})
    (controller,) = [c for c in k8s.sim.cluster.controllers if isinstance(c, QuotaStatus)]
    monkeypatch.setattr(controller, "relevant", lambda change: False)
    k8s.core.create_namespaced_pod(k8s.namespace, pod_body("a"))
    with pytest.raises(ApiException) as dry:
        k8s.core.create_namespaced_pod(k8s.namespace, pod_body("a"), dry_run="All")
    assert (dry.value.status, json.loads(dry.value.body)["reason"]) == (409, "AlreadyExists")
    assert used(k8s, "pod-count") == {"pods": "1"}, "a dry run charges nothing"
    taken = refused(k8s, "a")
    assert (taken.status, json.loads(taken.body)["message"]) == (409, 'pods "a" already exists')
    assert used(k8s, "pod-count") == {"pods": "2"}, "charged before storage refused the name"
    full = refused(k8s, "a")
    assert full.status == 403
    assert json.loads(full.body)["message"].startswith('pods "a" is forbidden: exceeded quota: pod-count')
    monkeypatch.undo()
    k8s.sim.call(controller.poke)
    wait_for(lambda: used(k8s, "pod-count") == {"pods": "1"} or None, what="counted again")


def test_the_webhooks_judge_a_pod_before_the_quota(k8s: Clients) -> None:
    """The quota is the API server's last validating admission: a pod the webhooks deny is told
    their reason even when the quota is full, and a pod the quota refuses was shown to them."""
    server = WebhookServer().start()
    remove = hold_writes(k8s.sim, server, "watch-pods", k8s.namespace, pod_writes("CREATE"), 0.0)
    try:
        quota(k8s, "none", {"pods": "0"})
        error = refused(k8s, "a")
        assert "exceeded quota: none" in json.loads(error.body)["message"]
        assert [r["name"] for r in server.requests("/hold-watch-pods")] == ["a"], "asked before the quota refused"
        server.answers["/hold-watch-pods"] = lambda _: {"allowed": False, "status": {"code": 403, "message": "no"}}
        denied = json.loads(refused(k8s, "b").body)["message"]
        assert "exceeded quota" not in denied and "no" in denied
        # A dry run is judged on the quota too, after the webhooks.
        server.answers.pop("/hold-watch-pods")
        with pytest.raises(ApiException) as dry:
            k8s.core.create_namespaced_pod(k8s.namespace, pod_body("c"), dry_run="All")
        assert "exceeded quota: none" in json.loads(dry.value.body)["message"]
        # A create of a name already taken is shown to the webhooks too: storage refuses it after.
        k8s.core.delete_namespaced_resource_quota("none", k8s.namespace)
        k8s.core.create_namespaced_pod(k8s.namespace, pod_body("d"))
        server.answers["/hold-watch-pods"] = lambda _: {"allowed": False, "status": {"code": 403, "message": "no"}}
        assert refused(k8s, "d").status == 403, "the webhook's denial, not AlreadyExists"
    finally:
        remove()
        server.stop()


def _quota(name: str, status: dict[str, Any] | None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"metadata": {"name": name, "namespace": "ns"}, "spec": {"hard": {"pods": "2"}, **spec}}
    if status is not None:
        body["status"] = status
    return body


@pytest.mark.parametrize(
    ("quotas", "outcome"),
    [
        pytest.param([_quota("q", None)], {}, id="just-created: no status, no limit yet"),
        pytest.param([_quota("q", {"hard": {"pods": "2"}, "used": {"pods": "1"}})], {"q": {"pods": "2"}}, id="room"),
        pytest.param(
            [_quota("q", {"hard": {"pods": "2", "count/pods": "5"}, "used": {"pods": "1", "count/pods": "4"}})],
            {"q": {"pods": "2", "count/pods": "5"}},
            id="both counts charged",
        ),
        pytest.param(
            [_quota("q", {"hard": {"pods": "3"}, "used": {"pods": "2"}})],
            {"q": {"pods": "3"}},
            id="the status's limit, not the spec's (not yet counted)",
        ),
        pytest.param(
            [_quota("b", {"hard": {"pods": "2"}, "used": {"pods": "2"}}),
             _quota("a", {"hard": {"pods": "2"}, "used": {"pods": "2"}})],
            'pods "p" is forbidden: exceeded quota: a, requested: pods=1, used: pods=2, limited: pods=2',
            id="full: the first by name",
        ),
        pytest.param(
            [_quota("q", {"hard": {"pods": "2"}, "used": {}})],
            'pods "p" is forbidden: status unknown for quota: q, resources: pods',
            id="limit without use",
        ),
        pytest.param(
            [_quota("a", {"hard": {"pods": "2"}, "used": {"pods": "2"}}),
             _quota("b", {"hard": {"pods": "2", "count/pods": "9"}, "used": {"pods": "0"}})],
            'pods "p" is forbidden: status unknown for quota: b, resources: count/pods,pods',
            id="any use unknown before any quota is judged full",
        ),
        pytest.param(
            [_quota("q", {"hard": {"pods": "0"}, "used": {}}, scopes=["BestEffort"])], {}, id="scoped: not enforced"
        ),
        pytest.param([_quota("q", {"hard": {"services": "1"}, "used": {}})], {}, id="another kind's count: not the pod's"),
        pytest.param(
            [_quota("q", {"hard": {"requests.nvidia.com/gpu": "16"}, "used": {"requests.nvidia.com/gpu": "8"}})],
            {"q": {"requests.nvidia.com/gpu": "16"}},
            id="GPUs: room for 8 more",
        ),
        pytest.param(
            [_quota("q", {"hard": {"requests.nvidia.com/gpu": "16"}, "used": {"requests.nvidia.com/gpu": "9"}})],
            'pods "p" is forbidden: exceeded quota: q, requested: requests.nvidia.com/gpu=8, '
            "used: requests.nvidia.com/gpu=9, limited: requests.nvidia.com/gpu=16",
            id="GPUs: no room",
        ),
        pytest.param(
            [_quota("q", {"hard": {"pods": "2", "requests.memory": "64Gi", "requests.nvidia.com/gpu": "16"},
                          "used": {"pods": "2", "requests.memory": "0", "requests.nvidia.com/gpu": "16"}})],
            'pods "p" is forbidden: exceeded quota: q, requested: pods=1,requests.nvidia.com/gpu=8, '
            "used: pods=2,requests.nvidia.com/gpu=16, limited: pods=2,requests.nvidia.com/gpu=16",
            id="each limit it would pass, by name",
        ),
        pytest.param(
            [_quota("q", {"hard": {"requests.memory": "64Gi"}, "used": {"requests.memory": "0"}})],
            {"q": {"requests.memory": "32Gi"}},
            id="memory charged in its own form",
        ),
        pytest.param(
            [_quota("q", {"hard": {"limits.cpu": "8"}, "used": {"limits.cpu": "0"}})],
            'pods "p" is forbidden: failed quota: q: must specify limits.cpu for: engine',
            id="a cpu quota: every container states it",
        ),
    ],
)
def test_admission_judges_a_pod_on_each_quotas_status(quotas: list[dict[str, Any]], outcome: Any) -> None:
    store = Store()
    for body in quotas:
        store.put(QUOTAS, body)
    engine = {"name": "engine", "resources": {"requests": {"cpu": "4", "memory": "32Gi", "nvidia.com/gpu": "8"}}}
    pod = {"metadata": {"name": "p", "namespace": "ns"}, "spec": {"containers": [engine]}}
    if isinstance(outcome, str):
        with pytest.raises(ApiError) as error:
            admit(store, PODS, pod)
        assert (error.value.code, error.value.message) == (403, outcome)
        return
    charged = {quota["metadata"]["name"]: status["used"] for quota, status in admit(store, PODS, pod)}
    assert charged == outcome


def test_a_status_someone_overwrote_is_put_right_by_the_periodic_recount(
    k8s: Clients, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kube-controller-manager counts every quota again every five minutes (here 0.2 s), not
    only when pods change: a status another client wrote is put right."""
    monkeypatch.setattr("kubesim.controllers.quota.RESYNC_SECONDS", 0.2)
    quota(k8s, "pod-count", {"pods": "2"})
    k8s.core.create_namespaced_pod(k8s.namespace, pod_body("a"))
    wait_for(lambda: used(k8s, "pod-count") == {"pods": "1"} or None, what="one pod counted")
    wrong = {"status": {"hard": {"pods": "2"}, "used": {"pods": "2"}}}
    k8s.core.patch_namespaced_resource_quota_status("pod-count", k8s.namespace, wrong)
    wait_for(lambda: used(k8s, "pod-count") == {"pods": "1"} or None, what="counted again")


def test_a_gpu_quota_refuses_the_pod_that_would_pass_it(k8s: Clients) -> None:
    """The quota a GPU fleet sets: `requests.nvidia.com/gpu`, counted from the containers' GPU
    limits (their requests default to them)."""
    quota(k8s, "gpus", {"requests.nvidia.com/gpu": "16"})
    for name in ("a", "b"):
        k8s.core.create_namespaced_pod(k8s.namespace, pod_body(name, gpus=8))
    with pytest.raises(ApiException) as err:
        k8s.core.create_namespaced_pod(k8s.namespace, pod_body("c", gpus=8))
    assert (err.value.status, json.loads(err.value.body)["message"]) == (
        403,
        'pods "c" is forbidden: exceeded quota: gpus, requested: requests.nvidia.com/gpu=8, '
        "used: requests.nvidia.com/gpu=16, limited: requests.nvidia.com/gpu=16",
    )
    k8s.core.create_namespaced_pod(k8s.namespace, pod_body("cpu-only"))  # no GPU: nothing to judge
    wait_for(lambda: used(k8s, "gpus") == {"requests.nvidia.com/gpu": "16"} or None, what="16 GPUs counted")
    k8s.core.delete_namespaced_pod("a", k8s.namespace, grace_period_seconds=0)
    wait_for(lambda: used(k8s, "gpus") == {"requests.nvidia.com/gpu": "8"} or None, what="8 GPUs counted")
    k8s.core.create_namespaced_pod(k8s.namespace, pod_body("c", gpus=8))


def test_a_cpu_quota_refuses_a_container_that_does_not_state_its_cpu(k8s: Clients) -> None:
    quota(k8s, "cpu", {"requests.cpu": "4"})
    error = refused(k8s, "a")
    assert (error.status, json.loads(error.body)["message"]) == (
        403,
        'pods "a" is forbidden: failed quota: cpu: must specify requests.cpu for: main',
    )
    stated = {"name": "main", "image": "server:1", "resources": {"requests": {"cpu": "3"}}}
    k8s.core.create_namespaced_pod(k8s.namespace, pod_body("a", containers=[stated]))
    with pytest.raises(ApiException) as err:
        k8s.core.create_namespaced_pod(k8s.namespace, pod_body("b", containers=[stated]))
    assert "exceeded quota: cpu, requested: requests.cpu=3, used: requests.cpu=3, limited: requests.cpu=4" in (
        json.loads(err.value.body)["message"]
    )
