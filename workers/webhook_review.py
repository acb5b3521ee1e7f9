"""One AdmissionReview in, its answer out: the admission webhook's decision, without HTTP.

The API server sends an `admission.k8s.io/v1` AdmissionReview for every CREATE and UPDATE of
an `ome.io` InferenceService (deploy/webhook.yaml's rules). `review(body, read_runtime)` runs
the same admission as the InferenceService workflow's `apply` Update
(`models.admission.admit(new, old, runtime)`) and answers:

- allowed, with the admission warnings as `response.warnings` (kubectl prints them);
- refused, with `status.code` 403 and every denial message (each ends with `(<Reason>)`) one a
  line, which kubectl prints as `admission webhook "inferenceservice.ome-webhook-server.validator"
  denied the request: <message>`;
- allowed without admission for anything else: DELETE and CONNECT, other resources, an UPDATE
  of an object being deleted, and an UPDATE that changes neither the spec, nor a non-control
  annotation, nor a migration request (finalizers, status, the controller's bookkeeping, OME's
  other steering annotations, which the controller relays and refuses as Warning Events).

Migration requests (`ome.io/migration-request-v1-<uuid>`) are checked when they are written, as
OME's webhook does: on CREATE all of them, on UPDATE only those new or changed since the old
object, so a refused one left on the object (the controller records it) does not block every
later edit of the spec.

`read_runtime(namespace, name)` is the ServingRuntime named by `spec.runtime.name` (the
namespace's, else the ClusterServingRuntime), or None when there is none: admission without a
runtime counts only the components the InferenceService declares, as the workflow does. It
may block (the server runs `review` in a thread). A body that is no AdmissionReview raises
`MalformedReview`, which the server answers with HTTP 400.

Public API: `review`, `MalformedReview`, `ReadRuntime`, `admitted_manifest`, `WEBHOOK_PATH`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from models.admission import admit
from models.runtime import ServingRuntimeSpec
from planning.service.relay import MIGRATION_REQUEST_PREFIX, relayed_manifest, spec_annotations

WEBHOOK_PATH = "/validate-ome-io-v1beta1-inferenceservice"
REVIEW_API_VERSIONS = ("admission.k8s.io/v1", "admission.k8s.io/v1beta1")
"""v1 is what deploy/webhook.yaml asks for; v1beta1 has the same shape and is answered in kind."""
GROUP = "ome.io"
RESOURCE = "inferenceservices"
MESSAGE_LIMIT = 4000
"""Denial text cap, as the workflow's refusal: the API server puts it in an error response and an Event."""

ReadRuntime = Callable[[str, str], ServingRuntimeSpec | None]


class MalformedReview(ValueError):
    """The request body is not an AdmissionReview this webhook can answer; the message says why."""


def review(body: Any, read_runtime: ReadRuntime) -> dict[str, Any]:
    """The AdmissionReview answering `body` (a parsed JSON document)."""
    request = _request_of(body)
    response: dict[str, Any] = {"uid": request["uid"], "allowed": True}
    answer = {"apiVersion": body["apiVersion"], "kind": "AdmissionReview", "response": response}
    if not _is_inference_service_write(request):
        # Deletes and other kinds are no business of the spec's admission.
        return answer
    new = _object(request, "object")
    old = _object(request, "oldObject") if request["operation"] == "UPDATE" else None
    if old is not None and _skips_admission(new, old):
        # Finalizers and bookkeeping must go through even on an object admission would now refuse.
        return answer
    namespace = request.get("namespace")
    manifest = admitted_manifest(new, namespace, old)
    previous = admitted_manifest(old, namespace, old) if old is not None else None
    admission = admit(manifest, previous, _runtime_for(manifest, read_runtime))
    if admission.warnings:
        response["warnings"] = [finding.message for finding in admission.warnings]
    if not admission.allowed:
        response["allowed"] = False
        response["status"] = {
            "code": 403,
            "reason": "Forbidden",
            "message": "\n".join(finding.message for finding in admission.denials)[:MESSAGE_LIMIT],
        }
    return answer


def admitted_manifest(
    obj: dict[str, Any], namespace: str | None = None, old: dict[str, Any] | None = None
) -> dict[str, Any]:
    """What admission sees of an object the API server sends: the manifest the controller relays
    to the workflow (`relayed_manifest`: no server fields, no control annotations), plus the
    migration-request annotations, which OME's webhook checks when they are written: all of them,
    or with `old` (the object an UPDATE replaces) those new or changed since `old`."""
    manifest = relayed_manifest(obj)
    if not (obj.get("metadata") or {}).get("namespace") and namespace:
        manifest["metadata"]["namespace"] = namespace
    earlier = _migration_requests(old) if old is not None else {}
    requests = {key: value for key, value in _migration_requests(obj).items() if earlier.get(key) != value}
    if requests:
        manifest["metadata"]["annotations"] = {**manifest["metadata"].get("annotations", {}), **requests}
    return manifest


def _migration_requests(obj: dict[str, Any]) -> dict[str, Any]:
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return {key: value for key, value in annotations.items() if str(key).startswith(MIGRATION_REQUEST_PREFIX)}


def _request_of(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise MalformedReview(f"an AdmissionReview must be a JSON object, got {type(body).__name__}")
    if body.get("kind") != "AdmissionReview" or body.get("apiVersion") not in REVIEW_API_VERSIONS:
        raise MalformedReview(
            f"expected kind AdmissionReview of apiVersion {' or '.join(REVIEW_API_VERSIONS)}, got kind "
            f"{body.get('kind')!r} of apiVersion {body.get('apiVersion')!r}"
        )
    request = body.get("request")
    if not isinstance(request, dict):
        raise MalformedReview("the AdmissionReview has no request object")
    if not isinstance(request.get("uid"), str) or not request["uid"]:
        raise MalformedReview("request.uid is missing: the answer must carry it")
    if not isinstance(request.get("operation"), str):
        raise MalformedReview("request.operation is missing")
    return request


def _is_inference_service_write(request: dict[str, Any]) -> bool:
    resource = request.get("resource") or {}
    return (
        request["operation"] in ("CREATE", "UPDATE")
        and isinstance(resource, dict)
        and resource.get("group") == GROUP
        and resource.get("resource") == RESOURCE
        # A status or scale write is the product's, not a user's spec.
        and not request.get("subResource")
    )


def _object(request: dict[str, Any], field: str) -> dict[str, Any]:
    found = request.get(field)
    if not isinstance(found, dict):
        raise MalformedReview(f"request.{field} must be the InferenceService object for {request['operation']}")
    return found


def _skips_admission(new: dict[str, Any], old: dict[str, Any]) -> bool:
    """Whether an UPDATE leaves the user's manifest alone, or comes too late to matter."""
    metadata, old_metadata = new.get("metadata") or {}, old.get("metadata") or {}
    if metadata.get("deletionTimestamp"):
        # Removing finalizers and the last status writes must never be blocked.
        return True
    return (
        new.get("spec") == old.get("spec")
        and spec_annotations(metadata.get("annotations")) == spec_annotations(old_metadata.get("annotations"))
        # `spec_annotations` leaves migration requests out (they are control annotations), but
        # a new or changed one is admitted as OME's webhook does.
        and _migration_requests(new) == _migration_requests(old)
    )


def _runtime_for(manifest: dict[str, Any], read_runtime: ReadRuntime) -> ServingRuntimeSpec | None:
    spec = manifest.get("spec")
    runtime = spec.get("runtime") if isinstance(spec, dict) else None
    name = runtime.get("name") if isinstance(runtime, dict) else None
    if not isinstance(name, str) or not name:
        # No runtime named (or a malformed reference, which admission refuses with its path).
        return None
    return read_runtime(manifest["metadata"]["namespace"], name)
