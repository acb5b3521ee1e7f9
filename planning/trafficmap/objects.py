"""The TrafficMap object the workflow writes (spec reference §17): same namespace and name as
the InferenceService, owned by it, held by the publisher's finalizer until the route is gone.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from models.inferencereplica import Condition
from models.inferenceservice import ObjectMeta
from models.trafficmap import GatewayRef, TrafficMap, TrafficMapSpec, TrafficMapStatus
from planning.trafficmap import texts
from planning.trafficmap.state import Publication

API_VERSION = "ome.io/v1beta1"
PLURAL = "trafficmaps"


def map_manifest(namespace: str, isvc: str, isvc_uid: str, spec: TrafficMapSpec) -> dict[str, Any]:
    """The object without status (the status subresource is written apart)."""
    owners = (
        [{"apiVersion": API_VERSION, "kind": "InferenceService", "name": isvc, "uid": isvc_uid,
          "controller": True, "blockOwnerDeletion": True}]
        if isvc_uid else None
    )
    metadata = ObjectMeta.model_validate({
        "name": isvc, "namespace": namespace, "finalizers": [texts.FINALIZER],
        "labels": {texts.ENDPOINT_ISVC_LABEL: isvc}, **({"ownerReferences": owners} if owners else {}),
    })
    manifest = TrafficMap(metadata=metadata, spec=spec).to_manifest()
    manifest.pop("status", None)
    return manifest


def owner_problem(existing: dict[str, Any] | None, namespace: str, isvc: str, isvc_uid: str) -> str | None:
    """The §17 error when a TrafficMap of this name exists under another controller."""
    if existing is None or not isvc_uid:
        return None
    owners = (existing.get("metadata") or {}).get("ownerReferences") or []
    controller = next((o for o in owners if o.get("controller")), None)
    if controller is None or controller.get("uid") == isvc_uid:
        return None
    return f"TrafficMap {namespace}/{isvc} exists but is not controlled by InferenceService UID {isvc_uid}"


def published_condition(publication: Publication, frozen: list[str]) -> tuple[Literal["True", "False"], str, str]:
    """`Published` (status, reason, message): `InvalidOwner` while an error stops the map."""
    if frozen:
        return "False", texts.INVALID_OWNER, frozen[0]
    return ("True" if publication.reason == texts.REASON_PUBLISHED else "False"), publication.reason, publication.message


def publication_fallback_condition(publication: Publication) -> tuple[Literal["False", "Unknown"], str, str]:
    """`PublicationFallback`: the built-in publisher has none; Unknown until it has published."""
    if publication.reason == texts.REASON_PUBLISHED:
        return "False", "Unsupported", f'publisher "{texts.PUBLISHER}" has no fallback publication'
    return "Unknown", publication.reason, publication.message


def map_status(isvc_uid: str, publication: Publication, conditions: list[Condition]) -> dict[str, Any]:
    gateway = (
        GatewayRef(namespace=publication.gateway_namespace, name=publication.gateway_name)
        if publication.gateway_name else None
    )
    status = TrafficMapStatus(
        source_uid=isvc_uid or None, published=publication.published,
        observed_traffic_map_generation=publication.observed_generation, gateway_ref=gateway,
        publisher=texts.PUBLISHER, conditions=conditions,
    )
    return status.to_manifest()


def change_key(manifest: dict[str, Any]) -> str:
    """What makes a map worth writing: everything but the probes' `lastProbeTime`, which the
    publisher's resync refreshes (a write per probe period would only say "still probing")."""
    entries = [
        {**entry, "probe": {k: v for k, v in entry["probe"].items() if k != "lastProbeTime"}} if "probe" in entry
        else entry
        for entry in manifest.get("spec", {}).get("entries", [])
    ]
    return canonical({**manifest, "spec": {**manifest.get("spec", {}), "entries": entries}})


def canonical(value: Any) -> str:
    """A stable text of a manifest, to write only what changed."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
