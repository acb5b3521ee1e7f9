"""Reading InferenceService and InferenceReplica objects as the controller sees them in a watch,
and the pieces of RFC 6902 JSON patch it writes them with."""

from __future__ import annotations

from typing import Any

from planning.service.placement_member import PLACEMENT_SOURCE_LABEL

Op = dict[str, Any]
"""One JSON patch operation."""


def metadata_of(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("metadata") or {}


def identity(obj: dict[str, Any]) -> tuple[str, str]:
    """(namespace, name); a namespaced object read without a namespace is in `default`."""
    metadata = metadata_of(obj)
    return str(metadata.get("namespace") or "default"), str(metadata.get("name") or "")


def uid_of(obj: dict[str, Any]) -> str:
    return str(metadata_of(obj).get("uid") or "")


def generation_of(obj: dict[str, Any]) -> int:
    return int(metadata_of(obj).get("generation") or 0)


def annotations_of(obj: dict[str, Any]) -> dict[str, str]:
    return {str(key): str(value) for key, value in (metadata_of(obj).get("annotations") or {}).items()}


def labels_of(obj: dict[str, Any]) -> dict[str, str]:
    return {str(key): str(value) for key, value in (metadata_of(obj).get("labels") or {}).items()}


def is_placement_copy(obj: dict[str, Any]) -> bool:
    """A member copy the product writes into a home cluster for a placement source: its
    workflow (`isvc/{ns}/{name}@{home}`) takes its spec from the source, never from kubectl."""
    return PLACEMENT_SOURCE_LABEL in labels_of(obj)


def is_deleting(obj: dict[str, Any]) -> bool:
    return bool(metadata_of(obj).get("deletionTimestamp"))


def pointer(*parts: str) -> str:
    """A JSON pointer (RFC 6901): `pointer("metadata", "annotations", "ome.io/x")` ->
    `/metadata/annotations/ome.io~1x`."""
    return "".join("/" + part.replace("~", "~0").replace("/", "~1") for part in parts)


def annotation_path(key: str) -> str:
    return pointer("metadata", "annotations", key)


def uid_guard(obj: dict[str, Any]) -> Op:
    """Guards every patch: a newer object of the same name is someone else's."""
    return {"op": "test", "path": pointer("metadata", "uid"), "value": uid_of(obj)}
