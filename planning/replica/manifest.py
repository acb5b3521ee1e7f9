"""The InferenceReplica object of an OMENative component, as `kubectl get irep` shows it.

The InferenceReplica workflow writes the object's spec with this manifest and patches its
status separately; the object is owned by the InferenceService, like every other object.
"""

from __future__ import annotations

from typing import Any

from models.inferencereplica import InferenceReplica, InferenceReplicaSpec, inference_replica_name
from models.inferenceservice import ObjectMeta
from planning.objects import component_labels, owner_reference


def render_inference_replica(
    spec: InferenceReplicaSpec, isvc: str, namespace: str, uid: str | None
) -> dict[str, Any]:
    """The InferenceReplica object without status (the workflow patches status separately)."""
    name = inference_replica_name(isvc, spec.component)
    owners = owner_reference(isvc, uid)
    metadata = ObjectMeta(
        name=name,
        namespace=namespace,
        labels=component_labels(isvc, spec.component),
    )
    manifest = InferenceReplica(metadata=metadata, spec=spec).to_manifest()
    manifest.pop("status", None)
    if owners:
        manifest["metadata"]["ownerReferences"] = owners
    return manifest
