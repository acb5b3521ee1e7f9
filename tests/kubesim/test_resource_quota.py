"""ResourceQuota on the pod count (`kubesim.quota`): a pod over its namespace's quota is refused
with the API server's 403 `exceeded quota`, the quota's status counts the pods that hold it,
and a pod that is gone (or finished) frees its room."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from tests.kubesim.helpers import Clients, pod_body, wait_for

KUBECTL = "/usr/bin/kubectl"


def quota(k8s: Clients, name: str, hard: dict[str, str], **spec: Any) -> None:
    k8s.core.create_namespaced_resource_quota(k8s.namespace, {"metadata": {"name": name}, "spec": {"hard": hard, **spec}})


def used(k8s: Clients, name: str) -> dict[str, str] | None:
    status = k8s.core.read_namespaced_resource_quota(name, k8s.namespace).status
    return status.used if status is not None and status.hard is not None else None


def refused(k8s: Clients, name: str) -> ApiException:
    with pytest.raises(ApiException) as err:
        k8s.core.create_namespaced_pod(k8s.namespace, pod_body(name))
    return err.value


def test_a_pod_over_the_quota_is_refused_until_one_goes(k8s: Clients) -> None:
    ns = k8s.namespace
    quota(k8s, "pod-count", {"pods": "2", "requests.cpu": "4"})
    assert wait_for(lambda: used(k8s, "pod-count"), what="the quota's status") == {"pods": "0"}
    for name in ("a", "b"):
        k8s.core.create_namespaced_pod(ns, pod_body(name))
    error = refused(k8s, "c")
    body = json.loads(error.body)
    assert (error.status, body["reason"]) == (403, "Forbidden")
    assert body["message"] == (
        'pods "c" is forbidden: exceeded quota: pod-count, requested: pods=1, used: pods=2, limited: pods=2'
    )
    assert body["details"] == {"name": "c", "kind": "pods"}
    assert wait_for(lambda: used(k8s, "pod-count") == {"pods": "2"} or None, what="two pods counted")
    hard = k8s.core.read_namespaced_resource_quota("pod-count", ns).status.hard
    assert hard == {"pods": "2", "requests.cpu": "4"}, "every hard limit is shown, enforced or not"
    # A dry run is refused the same way, and a pod that is gone frees its room.
    with pytest.raises(ApiException) as dry:
        k8s.core.create_namespaced_pod(ns, pod_body("c"), dry_run="All")
    assert dry.value.status == 403
    k8s.core.delete_namespaced_pod("a", ns, grace_period_seconds=0)
    k8s.core.create_namespaced_pod(ns, pod_body("c"))
    assert wait_for(lambda: used(k8s, "pod-count") == {"pods": "2"} or None, what="still two pods counted")
    # The API server answers a quota's deletion with the object deleted, as it does a pod's.
    assert k8s.core.delete_namespaced_resource_quota("pod-count", ns).metadata.name == "pod-count"
    k8s.core.create_namespaced_pod(ns, pod_body("d"))


def test_count_pods_and_other_namespaces(k8s: Clients) -> None:
    quota(k8s, "objects", {"count/pods": "1"})
    k8s.core.create_namespaced_pod(k8s.namespace, pod_body("a"))
    assert json.loads(refused(k8s, "b").body)["message"].endswith(
        "exceeded quota: objects, requested: count/pods=1, used: count/pods=1, limited: count/pods=1"
    )
    other = f"{k8s.namespace}-other"
    k8s.core.create_namespace({"metadata": {"name": other}})
    k8s.core.create_namespaced_pod(other, pod_body("b"))


def test_a_scoped_quota_is_kept_but_not_enforced(k8s: Clients) -> None:
    quota(k8s, "best-effort", {"pods": "0"}, scopes=["BestEffort"])
    k8s.core.create_namespaced_pod(k8s.namespace, pod_body("a"))


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
def test_kubectl_shows_the_pods_counted(k8s: Clients, tmp_path: Path) -> None:
    quota(k8s, "pod-count", {"pods": "3", "requests.cpu": "4", "limits.memory": "8Gi"})
    k8s.core.create_namespaced_pod(k8s.namespace, pod_body("a"))
    wait_for(lambda: used(k8s, "pod-count") == {"pods": "1"} or None, what="one pod counted")
    env = {**os.environ, "KUBECONFIG": k8s.sim.kubeconfig_path, "HOME": str(tmp_path)}
    shown = subprocess.run(
        [KUBECTL, "get", "quota", "-n", k8s.namespace], env=env, capture_output=True, text=True, timeout=60, check=True
    ).stdout.splitlines()
    assert shown[0].split() == ["NAME", "AGE", "REQUEST", "LIMIT"]
    assert shown[1].startswith("pod-count")
    assert shown[1].endswith("pods: 1/3, requests.cpu: ?/4   limits.memory: ?/8Gi")
