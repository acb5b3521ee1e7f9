"""What every workflow's objects share: the owner reference to the InferenceService, the
labels of a component, object metadata, and the names of per-component objects.

Every object the product writes is owned by its InferenceService object, so deleting that
object cleans up (the garbage collector follows `ownerReferences`).
"""

from __future__ import annotations

from typing import Any

from models.pods import LABEL_COMPONENT, LABEL_ISVC

OME_API_VERSION = "ome.io/v1beta1"
"""The API group and version of every OME kind (InferenceService, InferenceReplica, ...)."""


def component_labels(isvc: str, component: str) -> dict[str, str]:
    return {LABEL_ISVC: isvc, LABEL_COMPONENT: component}


def owner_reference(isvc: str, uid: str | None) -> list[dict[str, Any]]:
    """The InferenceService as controlling owner; none while its uid is unknown."""
    if not uid:
        return []
    return [
        {
            "apiVersion": OME_API_VERSION,
            "kind": "InferenceService",
            "name": isvc,
            "uid": uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]


def object_metadata(
    name: str,
    namespace: str,
    labels: dict[str, str],
    isvc: str,
    uid: str | None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """`metadata` of an object the InferenceService `isvc` (uid `uid`) owns."""
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels}
    if annotations:
        metadata["annotations"] = dict(annotations)
    owners = owner_reference(isvc, uid)
    if owners:
        metadata["ownerReferences"] = owners
    return metadata


def service_name(isvc: str, component: str) -> str:
    """The component's Service, PodDisruptionBudget and Deployment: `{isvc}-{component}`."""
    return f"{isvc}-{component}"


def finalizer_release_patch(obj: dict[str, Any], finalizer: str) -> list[dict[str, Any]]:
    """The JSON patch that takes `finalizer` off this very object (its uid) at the index where it
    was seen, so a concurrent change fails the patch rather than removing the wrong entry; []
    when the object does not hold it."""
    metadata = obj.get("metadata") or {}
    finalizers = list(metadata.get("finalizers") or [])
    if finalizer not in finalizers:
        return []
    path = f"/metadata/finalizers/{finalizers.index(finalizer)}"
    return [
        {"op": "test", "path": "/metadata/uid", "value": metadata.get("uid")},
        {"op": "test", "path": path, "value": finalizer},
        {"op": "remove", "path": path},
    ]
