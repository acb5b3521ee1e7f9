"""Deployments (through ReplicaSets), the scale subresource, PodDisruptionBudget status and
eviction."""

from __future__ import annotations

import json

import pytest
from kubernetes.client.rest import ApiException

from tests.kubesim.helpers import Clients, is_ready, pod_body, wait_for


def _deployment(name: str, replicas: int, image: str = "web:1", **strategy: object) -> dict:
    spec: dict = {
        "replicas": replicas,
        "selector": {"matchLabels": {"app": name}},
        "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {"containers": [{"name": "c", "image": image}]},
        },
    }
    if strategy:
        spec["strategy"] = strategy
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name}, "spec": spec}


def _ready_replicas(k8s: Clients, name: str, n: int) -> None:
    def check() -> bool:
        d = k8s.apps.read_namespaced_deployment(name, k8s.namespace)
        s = d.status
        return (
            s.ready_replicas == n
            and s.updated_replicas == n
            and s.replicas == n
            and s.observed_generation == d.metadata.generation
        )

    wait_for(check, timeout=15, what=f"deployment {name} at {n} ready replicas")


def test_deployment_creates_and_replaces_pods(k8s: Clients) -> None:
    ns = k8s.namespace
    k8s.apps.create_namespaced_deployment(ns, _deployment("web", 3))
    _ready_replicas(k8s, "web", 3)
    pods = k8s.core.list_namespaced_pod(ns, label_selector="app=web").items
    assert len(pods) == 3
    owner = pods[0].metadata.owner_references[0]
    assert owner.kind == "ReplicaSet" and owner.controller
    assert "pod-template-hash" in pods[0].metadata.labels
    deploy = k8s.apps.read_namespaced_deployment("web", ns)
    available = next(c for c in deploy.status.conditions if c.type == "Available")
    assert available.status == "True" and available.reason == "MinimumReplicasAvailable"
    victim = pods[0].metadata.name
    k8s.core.delete_namespaced_pod(victim, ns, grace_period_seconds=0)
    wait_for(
        lambda: (
            len(
                [
                    p
                    for p in k8s.core.list_namespaced_pod(ns, label_selector="app=web").items
                    if p.metadata.name != victim and is_ready(p)
                ]
            )
            == 3
        ),
        what="replacement pod",
    )


def test_rolling_update_replaces_every_pod(k8s: Clients) -> None:
    ns = k8s.namespace
    k8s.apps.create_namespaced_deployment(ns, _deployment("roll", 4))
    _ready_replicas(k8s, "roll", 4)
    k8s.apps.patch_namespaced_deployment(
        "roll", ns, {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "web:2"}]}}}}
    )
    _ready_replicas(k8s, "roll", 4)
    wait_for(
        lambda: (
            {
                p.spec.containers[0].image
                for p in k8s.core.list_namespaced_pod(ns, label_selector="app=roll").items
                if not p.metadata.deletion_timestamp
            }
            == {"web:2"}
        ),
        what="all on web:2",
    )
    sets = k8s.apps.list_namespaced_replica_set(ns).items
    assert sorted(
        (rs.metadata.annotations["deployment.kubernetes.io/revision"], rs.spec.replicas) for rs in sets
    ) == [("1", 0), ("2", 4)]


def test_scale_subresource_of_a_deployment(k8s: Clients) -> None:
    ns = k8s.namespace
    k8s.apps.create_namespaced_deployment(ns, _deployment("sc", 1))
    _ready_replicas(k8s, "sc", 1)
    scale = k8s.apps.read_namespaced_deployment_scale("sc", ns)
    assert scale.spec.replicas == 1 and scale.status.replicas == 1
    k8s.apps.patch_namespaced_deployment_scale("sc", ns, {"spec": {"replicas": 2}})
    _ready_replicas(k8s, "sc", 2)


def test_pdb_status_and_eviction_429(k8s: Clients) -> None:
    ns = k8s.namespace
    for name in ("a", "b"):
        k8s.core.create_namespaced_pod(ns, pod_body(name, labels={"app": "db"}))
    wait_for(lambda: all(is_ready(k8s.core.read_namespaced_pod(n, ns)) for n in ("a", "b")), what="ready")
    # minAvailable, not maxUnavailable: for bare pods Kubernetes counts the pods it finds, so the
    # budget still refuses once the evicted pod is gone (maxUnavailable needs an owner's scale).
    k8s.policy.create_namespaced_pod_disruption_budget(
        ns,
        {
            "metadata": {"name": "db"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}},
        },
    )
    pdb = wait_for(
        lambda: (p := k8s.policy.read_namespaced_pod_disruption_budget("db", ns)).status.expected_pods and p,
        what="pdb status",
    )
    assert (pdb.status.current_healthy, pdb.status.desired_healthy, pdb.status.disruptions_allowed) == (
        2,
        1,
        1,
    )
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "a", "namespace": ns}}
    _, code, _ = k8s.core.create_namespaced_pod_eviction_with_http_info("a", ns, eviction)
    assert code == 201
    evicted = k8s.core.read_namespaced_pod("a", ns)
    assert evicted.metadata.deletion_timestamp is not None
    assert any(c.type == "DisruptionTarget" and c.reason == "EvictionByEvictionAPI" for c in evicted.status.conditions)
    with pytest.raises(ApiException) as err:
        k8s.core.create_namespaced_pod_eviction(
            "b", ns, {**eviction, "metadata": {"name": "b", "namespace": ns}}
        )
    status = json.loads(err.value.body)
    assert err.value.status == 429 and status["reason"] == "TooManyRequests"
    assert status["details"]["causes"][0]["reason"] == "DisruptionBudget"
    assert k8s.core.read_namespaced_pod("b", ns).metadata.deletion_timestamp is None


def test_deleting_a_deployment_cascades_to_replicasets_and_pods(k8s: Clients) -> None:
    ns = k8s.namespace
    k8s.apps.create_namespaced_deployment(ns, _deployment("gone", 2))
    _ready_replicas(k8s, "gone", 2)
    k8s.apps.delete_namespaced_deployment("gone", ns)
    wait_for(lambda: not k8s.apps.list_namespaced_replica_set(ns).items, what="replicasets collected")
    wait_for(lambda: not k8s.core.list_namespaced_pod(ns).items, what="pods collected")


def _pod(*owners: dict) -> dict:
    return {"metadata": {"name": "p", "namespace": "ns", "ownerReferences": list(owners)}}


_RS_OWNER = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "w-1", "uid": "u1", "controller": True}
_OTHER_CONTROLLER = {"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "u2", "controller": True}
_RS_NOT_CONTROLLER = {**_RS_OWNER, "controller": False}


@pytest.mark.parametrize(
    ("change", "wakes"),
    [
        (("ADDED", ("apps", "replicasets"), {"metadata": {"name": "w"}}, None), True),
        (("ADDED", ("", "pods"), _pod(_RS_OWNER), None), True),
        (("DELETED", ("", "pods"), _pod(_RS_OWNER), _pod(_RS_OWNER)), True),
        # Orphaned by the change: its former ReplicaSet counts it no more.
        (("MODIFIED", ("", "pods"), _pod(), _pod(_RS_OWNER)), True),
        (("ADDED", ("", "pods"), _pod(), None), False),
        (("MODIFIED", ("", "pods"), _pod(_OTHER_CONTROLLER), _pod(_OTHER_CONTROLLER)), False),
        (("ADDED", ("", "pods"), _pod(_RS_NOT_CONTROLLER), None), False),
    ],
)
def test_the_replicaset_controller_wakes_for_its_own_pods_only(change: tuple, wakes: bool) -> None:
    """A pass lists every pod: a pod no ReplicaSet controls (an Instance's, thousands of them
    in a fleet) does not bring one, as the real controller enqueues only a pod's controller."""
    from types import SimpleNamespace

    from kubesim.controllers.workloads import ReplicaSets
    from kubesim.store import Change

    kind, type_key, obj, old = change
    controller = ReplicaSets(SimpleNamespace(store=None))  # type: ignore[arg-type]
    assert controller.relevant(Change(1, kind, type_key, obj, old, 0.0)) is wakes
