"""InferencePool export/import across clusters (Gateway API Inference Extension multi-cluster
proposal): a reconcile pass the watcher runs after each pass over the workload clusters.

It lists the InferencePools (`inference.networking.k8s.io/v1`) of each reachable workload
cluster, and on the control plane the InferencePoolImports
(`inference.networking.x-k8s.io/v1alpha1`); `planning.clusters.pool_import`
decides the writes: create the namespace and the import of each newly exported pool, set our
controller's entry in `status.controllers`, delete imports we created whose last exporter is
gone, and put an `Exported` condition on each exported pool (removed when the export goes). Either CRD may be absent (404):
a cluster without InferencePools exports nothing, a control plane without the import CRD
imports nothing (logged once). A cluster that cannot be listed this pass (unreachable, an API
error) keeps its last listing, so a blip does not delete imports.

Public API: `PoolImporter`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from activities.kube_rest import KubeRest
from planning.clusters.pool_import import (
    ImportPlan,
    Key,
    exported_conditions,
    exporters,
    plan_imports,
)

logger = logging.getLogger("workers.watch.pool_import")

POOLS = "/apis/inference.networking.k8s.io/v1/inferencepools"
IMPORTS_API = "/apis/inference.networking.x-k8s.io/v1alpha1"
IMPORTS = f"{IMPORTS_API}/inferencepoolimports"
MERGE = "application/merge-patch+json"


def _now() -> datetime:
    return datetime.now(UTC)


def _import_path(key: Key) -> str:
    return f"{IMPORTS_API}/namespaces/{key[0]}/inferencepoolimports/{key[1]}"


class PoolImporter:
    """One `reconcile(clients, known)` per pass; blocking I/O, so run it on a thread."""

    def __init__(self, control_plane: ApiClient, clock: Callable[[], datetime] = _now) -> None:
        self._rest = KubeRest(control_plane)
        self._clock = clock
        self._pools: dict[str, list[dict[str, Any]]] = {}
        self._import_crd_missing_logged = False

    def reconcile(self, clients: Mapping[str, ApiClient], known: Iterable[str]) -> ImportPlan | None:
        """`clients`: reachable workload clusters; `known`: every registered one (an unreachable
        cluster keeps its last listing, a removed one exports nothing). None: no import CRD."""
        known_names = set(known) | set(clients)
        for name in list(self._pools):
            if name not in known_names:
                del self._pools[name]
        for name, api_client in sorted(clients.items()):
            pools = self._list_pools(name, api_client)
            if pools is not None:
                self._pools[name] = pools
        imports = self._list_imports()
        if imports is None:
            return None
        now = self._clock()
        # An import's namespace exists; any other is created (409: it was there) before its first
        # import, so the controller needs no right to list namespaces.
        namespaces = {str((obj.get("metadata") or {}).get("namespace")) for obj in imports}
        plan = plan_imports(exporters(self._pools), imports, namespaces, now)
        self._apply(plan)
        for name, api_client in sorted(clients.items()):
            self._mark_exported(name, api_client, now)
        return plan

    def _list_pools(self, cluster: str, api_client: ApiClient) -> list[dict[str, Any]] | None:
        try:
            items = KubeRest(api_client).get(POOLS).get("items") or []
        except ApiException as error:
            if error.status == 404:
                return []  # no InferencePool CRD there: nothing exported
            logger.warning("listing InferencePools of %s failed: %s %s", cluster, error.status, error.reason)
            return None
        except Exception as error:  # unreachable this pass: keep the last listing
            logger.warning("listing InferencePools of %s failed: %s", cluster, str(error)[:300])
            return None
        return [item for item in items if isinstance(item, dict)]

    def _list_imports(self) -> list[dict[str, Any]] | None:
        try:
            items = self._rest.get(IMPORTS).get("items") or []
        except ApiException as error:
            if error.status == 404:
                if not self._import_crd_missing_logged:
                    logger.info("no InferencePoolImport CRD on the control plane (404): pools are not imported")
                    self._import_crd_missing_logged = True
                return None
            raise
        self._import_crd_missing_logged = False
        return [item for item in items if isinstance(item, dict)]

    def _apply(self, plan: ImportPlan) -> None:
        for namespace in plan.namespaces:
            namespace_object = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
            self._send(409, "POST", "/api/v1/namespaces", namespace_object)
        for manifest in plan.creates:
            namespace = manifest["metadata"]["namespace"]
            self._send(409, "POST", f"{IMPORTS_API}/namespaces/{namespace}/inferencepoolimports", manifest)
            logger.info("imported InferencePool %s/%s", namespace, manifest["metadata"]["name"])
        for key, controllers in sorted(plan.statuses.items()):
            _patch_status(self._rest, _import_path(key), {"status": {"controllers": controllers}})
        for key in plan.deletes:
            self._send(404, "DELETE", _import_path(key), None)
            logger.info("deleted InferencePoolImport %s/%s: no cluster exports it any more", *key)

    def _send(self, tolerated: int, method: str, path: str, body: dict[str, Any] | None) -> None:
        """One write; an answer of `tolerated` (409 on create, 404 on delete) is success."""
        try:
            self._rest.request(method, path, body=body)
        except ApiException as error:
            if error.status != tolerated:
                raise

    def _mark_exported(self, cluster: str, api_client: ApiClient, now: datetime) -> None:
        rest = KubeRest(api_client)
        for pool in self._pools.get(cluster, []):
            conditions = exported_conditions(pool, now)
            if conditions is None:
                continue
            metadata = pool.get("metadata") or {}
            path = f"/apis/inference.networking.k8s.io/v1/namespaces/{metadata.get('namespace')}/inferencepools/{metadata.get('name')}"
            try:
                _patch_status(rest, path, {"status": {"conditions": conditions}})
            except Exception as error:  # retried next pass
                logger.warning("marking InferencePool %s exported in %s failed: %s", path, cluster, str(error)[:300])


def _patch_status(rest: KubeRest, path: str, body: dict[str, Any]) -> None:
    """Merge-patch `body` on the status subresource (the object itself where there is none)."""
    try:
        rest.request("PATCH", f"{path}/status", body=body, content_type=MERGE)
    except ApiException as error:
        if error.status != 404:
            raise
        rest.request("PATCH", path, body=body, content_type=MERGE)

