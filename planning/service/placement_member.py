"""The member copy of a multi-cluster InferenceService that a home cluster runs (reference §16).

The control-plane InferenceService (the placement source) keeps `spec.placement` and
`spec.routing`; each home gets a copy with the same name, namespace and spec minus those two,
labelled `ome.io/placement-source: <source uid>` and `ome.io/placement-cluster: <home>`.
A Split home's engine runs its share of the floor: its `minReplicas` and `maxReplicas` are both
set to the share. Server-written metadata (uid, resourceVersion, generation, owner
references, finalizers, managed fields, timestamps) and status are not copied, nor are the
control plane's routing and legacy placement annotations.

Public API: `member_manifest(isvc_manifest, home, replicas, source_uid=None)`,
`placement_source(manifest)`, `PLACEMENT_SOURCE_LABEL`, `PLACEMENT_CLUSTER_LABEL`.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from planning.service.placement import ACCELERATOR_REQUIREMENTS_ANNOTATION, CLUSTER_SELECTOR_ANNOTATION

PLACEMENT_SOURCE_LABEL = "ome.io/placement-source"
PLACEMENT_CLUSTER_LABEL = "ome.io/placement-cluster"
CONTROL_PLANE_ANNOTATIONS = frozenset({
    "ome.io/traffic-drain",
    "ome.io/global-host",
    ACCELERATOR_REQUIREMENTS_ANNOTATION,
    CLUSTER_SELECTOR_ANNOTATION,
})
_CONTROL_PLANE_SPEC = ("placement", "routing")


def placement_source(manifest: Mapping[str, Any]) -> str | None:
    """The uid of the placement source a member copy derives from; None for any other object."""
    labels = (manifest.get("metadata") or {}).get("labels") or {}
    source = labels.get(PLACEMENT_SOURCE_LABEL)
    return source if isinstance(source, str) and source else None


def member_manifest(
    isvc_manifest: Mapping[str, Any], home: str, replicas: int | None, source_uid: str | None = None
) -> dict[str, Any]:
    """The InferenceService to apply in `home`. `replicas`: the home's share of a split (None:
    the engine keeps its own minReplicas/maxReplicas). `source_uid` defaults to the manifest's
    `metadata.uid`; a copy cannot be made without one."""
    metadata: Mapping[str, Any] = isvc_manifest.get("metadata") or {}
    uid = source_uid or metadata.get("uid")
    if not uid:
        raise ValueError(f"InferenceService {metadata.get('name')!r} has no metadata.uid to label its member copies with")
    labels = {**(metadata.get("labels") or {}), PLACEMENT_SOURCE_LABEL: uid, PLACEMENT_CLUSTER_LABEL: home}
    annotations = {k: v for k, v in (metadata.get("annotations") or {}).items() if k not in CONTROL_PLANE_ANNOTATIONS}
    member_metadata: dict[str, Any] = {"name": metadata.get("name"), "labels": labels}
    if metadata.get("namespace") is not None:
        member_metadata["namespace"] = metadata["namespace"]
    if annotations:
        member_metadata["annotations"] = annotations
    spec = {k: copy.deepcopy(v) for k, v in (isvc_manifest.get("spec") or {}).items() if k not in _CONTROL_PLANE_SPEC}
    if replicas is not None:
        spec["engine"] = {**(spec.get("engine") or {}), "minReplicas": replicas, "maxReplicas": replicas}
    return {
        "apiVersion": isvc_manifest.get("apiVersion", "ome.io/v1beta1"),
        "kind": isvc_manifest.get("kind", "InferenceService"),
        "metadata": member_metadata,
        "spec": spec,
    }
