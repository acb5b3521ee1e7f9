"""What the kubectl way in and the `temporal` way in agree on about an InferenceService object.

The controller (`workers.controller`) relays the object a user applied with `kubectl` to the
InferenceService workflow's `apply` Update, and turns OME's steering annotations into the
signals and Updates the `temporal` CLI sends. Both sides use these rules, so they agree on
what is the user's spec, what is a request, and when there is nothing new to apply:

- `relayed_manifest`: the part of the object that is the user's manifest (apiVersion, kind,
  name, namespace, labels, annotations, spec), without the control annotations, which are
  requests rather than spec, and without what the API server and kubectl add;
- `manifest_digest`: equal digests mean nothing new to apply (the workflow answers such an
  `apply` with `changed=False`, and the controller does not send it);
- `ISVC_FINALIZER`: the product's finalizer, held until the workflow has drained and removed
  everything the InferenceService owns.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

ISVC_FINALIZER = "ome.io/isvc-teardown"
"""Held on every InferenceService the product runs until its workflow has torn it down."""

RELAYED_ANNOTATION = "ome.io/relayed-annotations"
"""The controller's record (JSON map key -> value) of the level annotations it has relayed
(`ome.io/rollout-paused`, `ome.io/rollout-rollback`), so a restart sends nothing twice and a
removal made while it was down is still seen."""

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
"""What `kubectl apply` keeps to compute its next patch; the workflow writes it too when the
spec came through the `temporal` CLI, so a later `kubectl apply` removes what it should."""

PAUSED = "ome.io/rollout-paused"
PROMOTE = "ome.io/rollout-promote"
ROLLBACK = "ome.io/rollout-rollback"
RESUME = "ome.io/rollout-resume"
REPIN = "ome.io/rollout-repin"
MIGRATION_REQUEST_PREFIX = "ome.io/migration-request-v1-"
RELEASE_HELD = "ome.io/release-held-revision"
"""On the InferenceReplica."""
RESET_INSTANCES = "ome.io/reset-instances"
"""On the InferenceReplica."""

CONTROL_ANNOTATIONS = frozenset({PAUSED, PROMOTE, ROLLBACK, RESUME, REPIN, LAST_APPLIED, RELAYED_ANNOTATION})
"""Annotations that are requests (or bookkeeping), not spec: never part of the relayed manifest.
`ome.io/traffic-drain` and `ome.io/global-host` are spec: the workflow reads them."""


def is_control_annotation(key: str) -> bool:
    return key in CONTROL_ANNOTATIONS or key.startswith(MIGRATION_REQUEST_PREFIX)


def spec_annotations(annotations: dict[str, Any] | None) -> dict[str, str]:
    """The annotations that belong to the manifest (control ones removed)."""
    return {key: str(value) for key, value in (annotations or {}).items() if not is_control_annotation(key)}


def relayed_manifest(obj: dict[str, Any]) -> dict[str, Any]:
    """The user's manifest inside an InferenceService object read from the cluster."""
    metadata = obj.get("metadata") or {}
    shown: dict[str, Any] = {"name": metadata.get("name"), "namespace": metadata.get("namespace") or "default"}
    if metadata.get("labels"):
        shown["labels"] = dict(metadata["labels"])
    annotations = spec_annotations(metadata.get("annotations"))
    if annotations:
        shown["annotations"] = annotations
    return {
        "apiVersion": obj.get("apiVersion") or "ome.io/v1beta1",
        "kind": obj.get("kind") or "InferenceService",
        "metadata": shown,
        "spec": obj.get("spec") or {},
    }


def manifest_digest(manifest: dict[str, Any]) -> str:
    """16 hex digits over what a manifest asks for: spec, labels, non-control annotations."""
    metadata = manifest.get("metadata") or {}
    essence = [manifest.get("spec") or {}, metadata.get("labels") or {}, spec_annotations(metadata.get("annotations"))]
    return hashlib.sha256(json.dumps(essence, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]
