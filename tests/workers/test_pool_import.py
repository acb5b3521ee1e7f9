"""The watcher's workload-cluster loop (`workers.watcher.watch_clusters`) against kubesims:
it writes the WorkloadCluster's `Ready` condition and imports the InferencePools the cluster
exports as InferencePoolImports on the control plane (and deletes them when the export goes)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, cast

import kubernetes.client
from kubernetes.client.exceptions import ApiException
from temporalio.client import Client

from kubesim.handle import KubeSim
from planning.clusters.pool_import import CONTROLLER_NAME, EXPORT_ANNOTATION, MANAGED_BY, MANAGED_BY_LABEL
from tests.fixtures.workload import Workload, eventually, register
from workers.config import KubeSettings, Settings
from workers.feature_config import ClustersSettings
from workers.watcher import watch_clusters


def crd(group: str, version: str, kind: str, plural: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind, "listKind": f"{kind}List"},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                    "subresources": {"status": {}},
                }
            ],
        },
    }


def install(api_client: Any, definition: dict[str, Any]) -> None:
    try:
        kubernetes.client.ApiextensionsV1Api(api_client).create_custom_resource_definition(definition)
    except ApiException as error:
        if error.status != 409:  # already there (kubesim may preload it)
            raise


def get_or_none(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except ApiException as error:
        if error.status == 404:
            return None
        raise


@asynccontextmanager
async def watching(control_plane: KubeSim) -> AsyncIterator[None]:
    settings = Settings(
        kube=KubeSettings(kubeconfig=control_plane.kubeconfig_path),
        clusters=ClustersSettings(refresh_interval="0.2s"),
    )
    stop = asyncio.Event()
    # No pods, so the watchers never signal: no Temporal client is needed.
    task = asyncio.create_task(watch_clusters(settings, cast(Client, None), stop))
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


async def test_an_exported_pool_is_imported_and_unimported(kubesim: KubeSim, workload: Workload) -> None:
    control_plane, remote = kubesim.api_client(), workload.sim.api_client()
    install(control_plane, crd("inference.networking.x-k8s.io", "v1alpha1", "InferencePoolImport", "inferencepoolimports"))
    install(remote, crd("inference.networking.k8s.io", "v1", "InferencePool", "inferencepools"))
    kubernetes.client.CoreV1Api(remote).create_namespace({"metadata": {"name": "llm"}})
    remote_objects = kubernetes.client.CustomObjectsApi(remote)
    remote_objects.create_namespaced_custom_object(
        "inference.networking.k8s.io", "v1", "llm", "inferencepools",
        {
            "apiVersion": "inference.networking.k8s.io/v1",
            "kind": "InferencePool",
            "metadata": {"name": "pool-a", "annotations": {EXPORT_ANNOTATION: "ClusterSet"}},
            "spec": {"selector": {"matchLabels": {"app": "a"}}, "targetPorts": [{"number": 8000}]},
        },
    )
    register(control_plane, "worker-a", workload.front.kubeconfig_text())
    objects = kubernetes.client.CustomObjectsApi(control_plane)

    def the_import() -> Any:
        return get_or_none(lambda: objects.get_namespaced_custom_object(
            "inference.networking.x-k8s.io", "v1alpha1", "llm", "inferencepoolimports", "pool-a"
        ))

    async with watching(kubesim):
        imported = await eventually(lambda: (the_import() or {}).get("status") and the_import())
        assert imported["metadata"]["labels"] == {MANAGED_BY_LABEL: MANAGED_BY}
        (controller,) = imported["status"]["controllers"]
        assert controller["name"] == CONTROLLER_NAME
        assert controller["exportingClusters"] == [{"name": "worker-a"}]
        assert [(c["type"], c["status"], c["reason"]) for c in controller["conditions"]] == [
            ("Accepted", "True", "Accepted")
        ]
        pool = await eventually(lambda: (remote_objects.get_namespaced_custom_object(
            "inference.networking.k8s.io", "v1", "llm", "inferencepools", "pool-a"
        ).get("status") or {}).get("conditions"))
        (exported,) = pool
        assert (exported["type"], exported["status"], exported["reason"]) == ("Exported", "True", "Exported")
        assert "InferencePoolImport llm/pool-a" in exported["message"]
        wlc = objects.get_cluster_custom_object("ome.io", "v1beta1", "workloadclusters", "worker-a")
        (ready,) = wlc["status"]["conditions"]
        assert (ready["type"], ready["status"], ready["reason"]) == ("Ready", "True", "Reachable")
        # The export goes: so does the import we created.
        remote_objects.patch_namespaced_custom_object(
            "inference.networking.k8s.io", "v1", "llm", "inferencepools", "pool-a",
            {"metadata": {"annotations": {EXPORT_ANNOTATION: None}}},
        )
        await eventually(lambda: the_import() is None)
        await eventually(lambda: not (remote_objects.get_namespaced_custom_object(
            "inference.networking.k8s.io", "v1", "llm", "inferencepools", "pool-a"
        ).get("status") or {}).get("conditions"))
