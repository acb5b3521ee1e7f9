"""InferencePool export and import across clusters (Gateway API Inference Extension,
multi-cluster proposal): what the control plane's InferencePoolImports should be.

An InferencePool in a workload cluster annotated `inference.networking.x-k8s.io/export:
ClusterSet` is exported. For every exported namespace/name the control plane holds an
`InferencePoolImport` of the same namespace and name, whose `status.controllers[]` carries one
entry for this controller listing the exporting clusters (sorted) with an `Accepted`
condition. Entries of other controllers are kept as they are. An import whose last exporter
is gone loses our entry, and is deleted when this controller created it (label
`ome.io/managed-by: ome-multicluster`). Each exported pool gets an `Exported` condition, which
goes again when the pool stops being exported.

Public API: `EXPORT_ANNOTATION`, `EXPORT_CLUSTERSET`, `CONTROLLER_NAME`, `MANAGED_BY_LABEL`,
`MANAGED_BY`, `is_exported`, `exporters`, `ImportPlan`, `plan_imports`, `exported_conditions`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from planning.clusters.reachability import rfc3339

EXPORT_ANNOTATION = "inference.networking.x-k8s.io/export"
EXPORT_CLUSTERSET = "ClusterSet"
CONTROLLER_NAME = "ome.io/multicluster-controller"
MANAGED_BY_LABEL = "ome.io/managed-by"
MANAGED_BY = "ome-multicluster"
IMPORT_API_VERSION = "inference.networking.x-k8s.io/v1alpha1"
IMPORT_KIND = "InferencePoolImport"
EXPORTED = "Exported"
ACCEPTED = "Accepted"

Key = tuple[str, str]
"""(namespace, name) of a pool and of its import."""


def is_exported(pool: Mapping[str, Any]) -> bool:
    annotations = (pool.get("metadata") or {}).get("annotations") or {}
    return annotations.get(EXPORT_ANNOTATION) == EXPORT_CLUSTERSET


def _key(obj: Mapping[str, Any]) -> Key:
    metadata = obj.get("metadata") or {}
    return (str(metadata.get("namespace") or ""), str(metadata.get("name") or ""))


def exporters(pools_by_cluster: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[Key, list[str]]:
    """Exported pools' keys and the clusters exporting each, sorted."""
    found: dict[Key, set[str]] = {}
    for cluster, pools in pools_by_cluster.items():
        for pool in pools:
            if is_exported(pool):
                found.setdefault(_key(pool), set()).add(cluster)
    return {key: sorted(clusters) for key, clusters in sorted(found.items())}


@dataclass
class ImportPlan:
    """What to write on the control plane in one pass."""

    namespaces: list[str] = field(default_factory=list)
    """Namespaces to create (when missing) before the imports in them."""
    creates: list[dict[str, Any]] = field(default_factory=list)
    """New InferencePoolImport manifests (their status follows in `statuses`)."""
    statuses: dict[Key, list[dict[str, Any]]] = field(default_factory=dict)
    """`status.controllers` to write, for imports whose list changes."""
    deletes: list[Key] = field(default_factory=list)
    """Imports this controller created whose last exporter is gone."""


def _condition(type_: str, reason: str, message: str, now: datetime, previous: Any) -> dict[str, Any]:
    kept = (
        isinstance(previous, Mapping)
        and previous.get("status") == "True"
        and previous.get("lastTransitionTime")
    )
    return {
        "type": type_,
        "status": "True",
        "reason": reason,
        "message": message,
        "lastTransitionTime": previous["lastTransitionTime"] if kept else rfc3339(now),
    }


def _find(items: Any, key: str, value: str) -> Any:
    for item in items or []:
        if isinstance(item, Mapping) and item.get(key) == value:
            return item
    return None


def _controllers(existing: Mapping[str, Any] | None, clusters: Sequence[str], now: datetime) -> list[dict[str, Any]]:
    """`status.controllers` with ours set to `clusters` (removed when empty), others kept."""
    current = list(((existing or {}).get("status") or {}).get("controllers") or [])
    others = [c for c in current if not (isinstance(c, Mapping) and c.get("name") == CONTROLLER_NAME)]
    if not clusters:
        return others
    ours = _find(current, "name", CONTROLLER_NAME) or {}
    accepted = _condition(
        ACCEPTED,
        ACCEPTED,
        f"exported by {', '.join(clusters)}",
        now,
        _find(ours.get("conditions"), "type", ACCEPTED),
    )
    entry = {
        "name": CONTROLLER_NAME,
        "exportingClusters": [{"name": cluster} for cluster in clusters],
        "conditions": [accepted],
    }
    return [*others, entry]


def _managed(obj: Mapping[str, Any]) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return labels.get(MANAGED_BY_LABEL) == MANAGED_BY


def plan_imports(
    exported: Mapping[Key, Sequence[str]],
    imports: Sequence[Mapping[str, Any]],
    namespaces: set[str],
    now: datetime,
) -> ImportPlan:
    """From the exporters of each key, the control plane's imports and namespaces, the writes."""
    plan = ImportPlan()
    by_key = {_key(obj): obj for obj in imports}
    for key, clusters in sorted(exported.items()):
        existing = by_key.get(key)
        if existing is None:
            if key[0] not in namespaces and key[0] not in plan.namespaces:
                plan.namespaces.append(key[0])
            plan.creates.append(
                {
                    "apiVersion": IMPORT_API_VERSION,
                    "kind": IMPORT_KIND,
                    "metadata": {"namespace": key[0], "name": key[1], "labels": {MANAGED_BY_LABEL: MANAGED_BY}},
                }
            )
        controllers = _controllers(existing, clusters, now)
        if existing is None or controllers != ((existing.get("status") or {}).get("controllers") or []):
            plan.statuses[key] = controllers
    for key, existing in sorted(by_key.items()):
        if key in exported:
            continue
        if _managed(existing):
            plan.deletes.append(key)
            continue
        controllers = _controllers(existing, [], now)
        if controllers != ((existing.get("status") or {}).get("controllers") or []):
            plan.statuses[key] = controllers
    return plan


def exported_conditions(pool: Mapping[str, Any], now: datetime) -> list[dict[str, Any]] | None:
    """The pool's `status.conditions` with `Exported` set (removed once the pool is no longer
    exported), or None when they are already so."""
    current = list((pool.get("status") or {}).get("conditions") or [])
    namespace, name = _key(pool)
    previous = _find(current, "type", EXPORTED)
    others = [c for c in current if not (isinstance(c, Mapping) and c.get("type") == EXPORTED)]
    if not is_exported(pool):
        return None if previous is None else others
    wanted = _condition(
        EXPORTED,
        EXPORTED,
        f"imported on the control plane as InferencePoolImport {namespace}/{name}",
        now,
        previous,
    )
    if previous == wanted:
        return None
    return [*others, wanted]
