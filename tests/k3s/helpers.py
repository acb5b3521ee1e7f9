"""Helpers of the k3s tests: clients on the cluster, a fresh namespace, tiny Instance pods.

The pods run `registry.k8s.io/pause` (a few hundred kilobytes, ready as soon as it starts, exits
on SIGTERM), so what a test sees is the API server's and kubelet's behaviour, not an engine's.
Every wait polls with a generous deadline: a first image pull on a cold k3s takes seconds.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar
from uuid import uuid4

from kubernetes.client import ApiClient, CoreV1Api
from kubernetes.client.exceptions import ApiException
from temporalio.testing import ActivityEnvironment

from activities.kube import KubeActivities
from models.instance import InstanceSpec
from models.kube_ops import ApplyObjectInput, CrdExistsInput, DeleteObjectInput, ObjectRef
from workers.config import KubeSettings, kube_api_client

T = TypeVar("T")

PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
WAIT_SECONDS = 180.0
"""Long enough for a cold image pull and a busy CI machine; waits end as soon as they hold."""

PRODUCT_CRDS = (
    "inferenceservices.ome.io",
    "inferencereplicas.ome.io",
    "servingruntimes.ome.io",
    "clusterservingruntimes.ome.io",
    "trafficmaps.ome.io",
    "workloadclusters.ome.io",
)


def api_client(kubeconfig: Path) -> ApiClient:
    """A client built the way the worker builds its own (workers/config.py)."""
    return kube_api_client(KubeSettings(kubeconfig=kubeconfig))


def run(fn: Callable[[Any], T], arg: Any) -> T:
    """Run one activity as Temporal would, outside a worker."""
    return ActivityEnvironment().run(fn, arg)


def wait_for(check: Callable[[], T | None], what: str, within: float = WAIT_SECONDS) -> T:
    deadline = time.monotonic() + within
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within:.0f}s waiting for {what}")
        time.sleep(0.25)


def wait_crds_established(kube: KubeActivities, names: tuple[str, ...] = PRODUCT_CRDS) -> None:
    """Custom resources can be created only once their CRD is Established."""
    for name in names:
        wait_for(
            lambda name=name: run(kube.crd_exists, CrdExistsInput(name=name)).established,  # type: ignore[misc]
            f"CRD {name} to be Established",
        )


@contextmanager
def fresh_namespace(client: ApiClient, prefix: str) -> Iterator[str]:
    """A namespace for one test, removed afterwards (with everything in it)."""
    kube = KubeActivities(client)
    name = f"{prefix}-{uuid4().hex[:8]}"
    manifest = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    run(kube.apply_object, ApplyObjectInput(manifest=manifest))
    core = CoreV1Api(client)

    def default_account() -> bool:
        # Pods are refused until the service account controller has created `default`.
        try:
            core.read_namespaced_service_account("default", name)
        except ApiException as error:
            if error.status == 404:
                return False
            raise
        return True

    wait_for(default_account, f"service account default in namespace {name}")
    try:
        yield name
    finally:
        run(
            kube.delete_object,
            DeleteObjectInput(ref=ObjectRef(api_version="v1", kind="Namespace", name=name)),
        )


def pause_pod_spec() -> dict[str, Any]:
    return {
        "containers": [{"name": "engine", "image": PAUSE_IMAGE, "imagePullPolicy": "IfNotPresent"}],
        "terminationGracePeriodSeconds": 5,
    }


def instance_spec(namespace: str, isvc: str = "chat", index: int = 0, **overrides: Any) -> InstanceSpec:
    """A single-pod Instance of component `engine` running the pause image."""
    values: dict[str, Any] = {
        "namespace": namespace,
        "isvc": isvc,
        "component": "engine",
        "index": index,
        "revision": "rev-pause",
        "leader_pod_spec": pause_pod_spec(),
        "drain_seconds": 1.0,
    }
    values.update(overrides)
    return InstanceSpec(**values)


def conditions(pod: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in (pod.get("status") or {}).get("conditions") or []}


def read_pod(client: ApiClient, namespace: str, name: str) -> dict[str, Any] | None:
    """The pod as JSON (the API's field names), or None when it does not exist."""
    try:
        # Raw JSON, not the client's model objects: conditions keep their API field names.
        response: Any = CoreV1Api(client).read_namespaced_pod(name, namespace, _preload_content=False)
    except ApiException as error:
        if error.status == 404:
            return None
        raise
    pod: dict[str, Any] = json.loads(response.data)
    return pod
