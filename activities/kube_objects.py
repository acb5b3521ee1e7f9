"""Kubernetes activities on arbitrary objects: apply, patch, status, delete, read, events, CRDs.

Services, PDBs, PodGroups, Deployments and the product's custom resources (InferenceService,
InferenceReplica, TrafficMap, ...) all go through these, as manifest dicts. Every write is
idempotent: apply leaves an object that already matches untouched (no new
resourceVersion, no generation bump, no watch event), delete of a missing object succeeds,
and a repeated Event bumps the existing Event's count instead of adding another.

Optimistic concurrency: replace and event updates carry the resourceVersion they read and
re-read on 409, a few times, before giving up with a retryable `Conflict`.
"""

from __future__ import annotations

import hashlib
import json
import socket
from datetime import UTC, datetime
from typing import Any, Literal

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException
from temporalio import activity

from activities.kube_errors import api_errors, cap, is_already_exists, is_conflict, translate
from activities.kube_rest import CONTENT_TYPES, KubeRest, collection_path, object_path, plural_for, ref_of
from models.kube_ops import (
    EVENT_OCCURRENCE_ANNOTATION,
    FIELD_MANAGER,
    KUBE_APPLY_OBJECT,
    KUBE_CRD_EXISTS,
    KUBE_DELETE_OBJECT,
    KUBE_LIST_OBJECTS,
    KUBE_PATCH_OBJECT,
    KUBE_PATCH_STATUS,
    KUBE_READ_OBJECT,
    KUBE_RECORD_EVENT,
    ApplyObjectInput,
    ApplyObjectResult,
    CrdExistsInput,
    CrdExistsResult,
    DeleteObjectInput,
    DeleteObjectResult,
    ListObjectsInput,
    ListObjectsResult,
    ObjectRef,
    PatchObjectInput,
    PatchObjectResult,
    PatchStatusInput,
    ReadObjectInput,
    ReadObjectResult,
    RecordEventInput,
    RecordEventResult,
)
from planning.objects import finalizer_release_patch
from planning.service.relay import LAST_APPLIED

# Read-modify-write attempts inside one activity before the 409 goes to Temporal's retry.
CONFLICT_ATTEMPTS = 4
EVENT_MESSAGE_LIMIT = 1024


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def describe(ref: ObjectRef) -> str:
    where = f"{ref.namespace}/" if ref.namespace else ""
    return f"{ref.kind} {where}{ref.name}"


def is_subset(desired: Any, actual: Any) -> bool:
    """Does `actual` already say everything `desired` says? Server defaults may add more."""
    if isinstance(desired, dict):
        return isinstance(actual, dict) and all(
            key in actual and is_subset(value, actual[key]) for key, value in desired.items()
        )
    if isinstance(desired, list):
        return (
            isinstance(actual, list)
            and len(desired) == len(actual)
            and all(is_subset(want, have) for want, have in zip(desired, actual, strict=True))
        )
    return bool(desired == actual)


# Fields the API server owns: a manifest read back from the cluster and applied again must
# not carry them into a create (rejected) or a replace (a stale resourceVersion is a 409).
SERVER_METADATA = ("resourceVersion", "uid", "creationTimestamp", "generation", "managedFields", "selfLink")


def without_server_fields(manifest: dict[str, Any]) -> dict[str, Any]:
    metadata = {k: v for k, v in (manifest.get("metadata") or {}).items() if k not in SERVER_METADATA}
    return {**{k: v for k, v in manifest.items() if k != "status"}, "metadata": metadata}


def already_applied(manifest: dict[str, Any], existing: dict[str, Any]) -> bool:
    """Does `existing` already carry everything the manifest asks for?"""
    wanted = {k: v for k, v in manifest.items() if k not in ("metadata", "status")}
    metadata = manifest.get("metadata") or {}
    have = existing.get("metadata") or {}
    meta_wanted = {k: v for k, v in metadata.items() if k in ("labels", "annotations", "ownerReferences")}
    # Finalizers are a set others add to: ours being present is enough.
    finalizers_present = set(metadata.get("finalizers") or ()) <= set(have.get("finalizers") or ())
    return is_subset(wanted, existing) and is_subset(meta_wanted, have) and finalizers_present


def deep_merge(base: Any, overlay: Any) -> Any:
    """`overlay` onto `base`: maps merge key by key, anything else is replaced by `overlay`."""
    if isinstance(base, dict) and isinstance(overlay, dict):
        merged = dict(base)
        for key, value in overlay.items():
            merged[key] = deep_merge(base.get(key), value)
        return merged
    return overlay


def last_applied_configuration(manifest: dict[str, Any]) -> str:
    """The annotation `kubectl apply` keeps: the applied manifest as compact JSON."""
    metadata = dict(manifest.get("metadata") or {})
    annotations = {k: v for k, v in (metadata.get("annotations") or {}).items() if k != LAST_APPLIED}
    if annotations:
        metadata["annotations"] = annotations
    else:
        metadata.pop("annotations", None)
    metadata.pop("finalizers", None)
    shown = {k: v for k, v in manifest.items() if k not in ("metadata", "status")}
    return json.dumps({**shown, "metadata": metadata}, sort_keys=True, separators=(",", ":")) + "\n"


def _previously_applied(existing: dict[str, Any]) -> dict[str, Any]:
    """Labels and annotations the last `kubectl apply`-style write named (empty without one)."""
    text = ((existing.get("metadata") or {}).get("annotations") or {}).get(LAST_APPLIED)
    try:
        previous = json.loads(text) if text else {}
    except ValueError:
        return {}
    return (previous.get("metadata") or {}) if isinstance(previous, dict) else {}


def _replacement(
    existing: dict[str, Any], manifest: dict[str, Any], request: ApplyObjectInput
) -> dict[str, Any]:
    """The body that brings `existing` to `manifest` while keeping what others own.

    Server-set fields (clusterIP, defaults) survive because maps merge, except `spec` when
    `replace_spec` (the user's own fields: one the manifest drops goes); labels and annotations
    others added survive (with `last_applied`, those the previous apply named and this one drops
    go, as `kubectl apply` computes it); finalizers are united; status is the server's.
    """
    old_meta = existing.get("metadata") or {}
    new_meta = manifest.get("metadata") or {}
    body: dict[str, Any] = deep_merge(
        {k: v for k, v in existing.items() if k not in ("metadata", "status")},
        {k: v for k, v in manifest.items() if k not in ("metadata", "status")},
    )
    if request.replace_spec and "spec" in manifest:
        body["spec"] = manifest["spec"]
    dropped: dict[str, set[str]] = {"labels": set(), "annotations": set()}
    if request.last_applied:
        previous = _previously_applied(existing)
        for key in dropped:
            dropped[key] = set(previous.get(key) or {}) - set(new_meta.get(key) or {})
    metadata = dict(old_meta)
    for key in ("labels", "annotations"):
        kept = {k: v for k, v in (old_meta.get(key) or {}).items() if k not in dropped[key]}
        metadata[key] = {**kept, **(new_meta.get(key) or {})}
    if request.last_applied:
        metadata["annotations"][LAST_APPLIED] = last_applied_configuration(manifest)
    if "ownerReferences" in new_meta:
        metadata["ownerReferences"] = new_meta["ownerReferences"]
    finalizers = list(old_meta.get("finalizers") or [])
    finalizers += [item for item in new_meta.get("finalizers") or [] if item not in finalizers]
    metadata["finalizers"] = finalizers
    metadata.pop("managedFields", None)
    body["metadata"] = metadata
    if "status" in existing:
        body["status"] = existing["status"]
    return body


def _superseded(existing: dict[str, Any], manifest: dict[str, Any], request: ApplyObjectInput) -> bool:
    """Someone wrote another spec after the generation the writer last knew."""
    if request.expect_generation is None:
        return False
    generation = int((existing.get("metadata") or {}).get("generation") or 0)
    return generation > request.expect_generation and existing.get("spec") != manifest.get("spec")


def _unchanged(existing: dict[str, Any], manifest: dict[str, Any], request: ApplyObjectInput) -> bool:
    if not already_applied(manifest, existing):
        return False
    if request.replace_spec and existing.get("spec") != manifest.get("spec"):
        return False
    if request.last_applied:
        annotations = (existing.get("metadata") or {}).get("annotations") or {}
        return bool(annotations.get(LAST_APPLIED) == last_applied_configuration(manifest))
    return True


def _with_last_applied(manifest: dict[str, Any]) -> dict[str, Any]:
    metadata = dict(manifest.get("metadata") or {})
    metadata["annotations"] = {
        **(metadata.get("annotations") or {}),
        LAST_APPLIED: last_applied_configuration(manifest),
    }
    return {**manifest, "metadata": metadata}


def heartbeat(*details: Any) -> None:
    """Heartbeat a regular activity; a local one cannot (its start-to-close bounds it)."""
    if activity.in_activity() and not activity.info().is_local:
        activity.heartbeat(*details)


class ObjectActivities:
    """Generic object activities; `KubeActivities` adds the pod-specific ones."""

    def __init__(self, api_client: ApiClient, cluster: str = "") -> None:
        self.rest = KubeRest(api_client)
        self.cluster = cluster

    def _write_query(self) -> list[tuple[str, Any]]:
        return [("fieldManager", FIELD_MANAGER)]

    @activity.defn(name=KUBE_APPLY_OBJECT)
    def apply_object(self, request: ApplyObjectInput) -> ApplyObjectResult:
        manifest = without_server_fields(request.manifest)
        try:
            ref = ref_of(manifest, request.plural)
        except ValueError as error:
            raise translate(ApiException(status=422, reason=str(error)), "apply object") from error
        action = f"apply {describe(ref)}"
        for attempt in range(CONFLICT_ATTEMPTS):
            heartbeat(attempt)
            with api_errors(action):
                # An AlreadyExists answer to the blind create reads it on the next attempt.
                blind = request.create_first and attempt == 0
                existing = None if blind else self.rest.get_or_none(object_path(ref))
                try:
                    if existing is None:
                        if request.last_applied:
                            manifest = _with_last_applied(manifest)
                        created = self.rest.request(
                            "POST",
                            collection_path(
                                ref.api_version, ref.plural or plural_for(ref.kind), ref.namespace
                            ),
                            query=self._write_query(),
                            body=manifest,
                        )
                        return self._applied(ref, created, "created")
                    if _superseded(existing, manifest, request):
                        # A newer spec is the user's: keep it, only make sure of our finalizers.
                        return self._applied(
                            ref, self._ensure_finalizers(ref, existing, manifest), "superseded"
                        )
                    if _unchanged(existing, manifest, request):
                        return self._applied(ref, existing, "unchanged")
                    replaced = self.rest.request(
                        "PUT",
                        object_path(ref),
                        query=self._write_query(),
                        body=_replacement(existing, manifest, request),
                    )
                    return self._applied(ref, replaced, "updated")
                except ApiException as error:
                    # Someone created or changed it between our read and write: read again.
                    if (is_already_exists(error) or is_conflict(error)) and attempt + 1 < CONFLICT_ATTEMPTS:
                        continue
                    # Admission (a full ResourceQuota: 403 "exceeded quota") can refuse the blind
                    # create of an object that already exists: read it, once, before failing.
                    if blind and error.status == 403:
                        continue
                    raise
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _ensure_finalizers(
        self, ref: ObjectRef, existing: dict[str, Any], manifest: dict[str, Any]
    ) -> dict[str, Any]:
        """`existing` with the manifest's finalizers too (one conditional PUT when any is missing)."""
        have = list((existing.get("metadata") or {}).get("finalizers") or [])
        missing = [
            item for item in (manifest.get("metadata") or {}).get("finalizers") or [] if item not in have
        ]
        if not missing:
            return existing
        body = {**existing, "metadata": {**existing["metadata"], "finalizers": have + missing}}
        return dict(self.rest.request("PUT", object_path(ref), query=self._write_query(), body=body))

    def _applied(
        self, ref: ObjectRef, obj: dict[str, Any], action: Literal["created", "updated", "unchanged", "superseded"]
    ) -> ApplyObjectResult:
        metadata = obj.get("metadata") or {}
        generation = metadata.get("generation")
        return ApplyObjectResult(
            ref=ref.model_copy(update={"uid": metadata.get("uid") or None}),
            action=action,
            resource_version=str(metadata.get("resourceVersion") or ""),
            generation=int(generation) if generation is not None else None,
        )

    def _patch(
        self,
        ref: ObjectRef,
        body: Any,
        content_type: str,
        resource_version: str | None,
        missing_ok: bool,
        action: str,
        subresource: str | None = None,
    ) -> PatchObjectResult:
        if resource_version:
            if isinstance(body, list):
                body = [{"op": "test", "path": "/metadata/resourceVersion", "value": resource_version}, *body]
            else:
                body = deep_merge(body, {"metadata": {"resourceVersion": resource_version}})
        with api_errors(action):
            try:
                patched = self.rest.request(
                    "PATCH",
                    object_path(ref, subresource),
                    query=self._write_query(),
                    body=body,
                    content_type=content_type,
                )
            except ApiException as error:
                if error.status == 404 and missing_ok:
                    return PatchObjectResult(found=False)
                raise
        metadata = patched.get("metadata") or {}
        generation = metadata.get("generation")
        return PatchObjectResult(
            found=True,
            resource_version=str(metadata.get("resourceVersion") or ""),
            generation=int(generation) if generation is not None else None,
        )

    @activity.defn(name=KUBE_PATCH_OBJECT)
    def patch_object(self, request: PatchObjectInput) -> PatchObjectResult:
        return self._patch(
            request.ref,
            request.patch,
            CONTENT_TYPES[request.patch_type],
            request.resource_version,
            request.missing_ok,
            f"patch {describe(request.ref)}",
        )

    @activity.defn(name=KUBE_PATCH_STATUS)
    def patch_status(self, request: PatchStatusInput) -> PatchObjectResult:
        return self._patch(
            request.ref,
            {"status": request.status},
            CONTENT_TYPES["merge"],
            request.resource_version,
            request.missing_ok,
            f"patch status of {describe(request.ref)}",
            subresource="status",
        )

    @activity.defn(name=KUBE_DELETE_OBJECT)
    def delete_object(self, request: DeleteObjectInput) -> DeleteObjectResult:
        ref = request.ref
        options: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "propagationPolicy": request.propagation_policy,
        }
        if request.grace_period_seconds is not None:
            options["gracePeriodSeconds"] = request.grace_period_seconds
        if ref.uid:
            options["preconditions"] = {"uid": ref.uid}
        released = request.release_finalizer is not None and self._release_finalizer(
            ref, request.release_finalizer
        )
        with api_errors(f"delete {describe(ref)}"):
            try:
                self.rest.request("DELETE", object_path(ref), body=options)
            except ApiException as error:
                # Gone already, or the name now belongs to a newer object we must not touch.
                if error.status == 404 or (error.status == 409 and ref.uid):
                    return DeleteObjectResult(deleted=released)
                raise
        return DeleteObjectResult(deleted=True)

    def _release_finalizer(self, ref: ObjectRef, finalizer: str) -> bool:
        """Take our finalizer off (a JSON patch testing the uid and the entry); True when that
        removed an object already being deleted."""
        for attempt in range(CONFLICT_ATTEMPTS):
            heartbeat(attempt)
            with api_errors(f"release finalizer {finalizer} of {describe(ref)}"):
                existing = self.rest.get_or_none(object_path(ref))
                metadata = (existing or {}).get("metadata") or {}
                if existing is None or (ref.uid and metadata.get("uid") != ref.uid):
                    return False
                patch = finalizer_release_patch(existing, finalizer)
                if not patch:
                    return False
                try:
                    patched = self.rest.request(
                        "PATCH",
                        object_path(ref),
                        query=self._write_query(),
                        body=patch,
                        content_type=CONTENT_TYPES["json"],
                    )
                except ApiException as error:
                    if error.status == 404:
                        return False
                    if error.status in (409, 422) and attempt + 1 < CONFLICT_ATTEMPTS:
                        continue
                    raise
                deleting = bool(metadata.get("deletionTimestamp"))
                return deleting and not ((patched or {}).get("metadata") or {}).get("finalizers")
        return False

    @activity.defn(name=KUBE_READ_OBJECT)
    def read_object(self, request: ReadObjectInput) -> ReadObjectResult:
        with api_errors(f"read {describe(request.ref)}"):
            if request.missing_ok:
                obj = self.rest.get_or_none(object_path(request.ref))
            else:
                obj = self.rest.get(object_path(request.ref))
        return ReadObjectResult(found=obj is not None, object=obj)

    @activity.defn(name=KUBE_LIST_OBJECTS)
    def list_objects(self, request: ListObjectsInput) -> ListObjectsResult:
        path = collection_path(
            request.api_version, request.plural or plural_for(request.kind), request.namespace
        )
        query = [("labelSelector", request.label_selector)] if request.label_selector else []
        with api_errors(f"list {request.kind} in {request.namespace or 'all namespaces'}"):
            listed = self.rest.get(path, query)
        return ListObjectsResult(
            items=list(listed.get("items") or []),
            resource_version=str((listed.get("metadata") or {}).get("resourceVersion") or ""),
        )

    @activity.defn(name=KUBE_RECORD_EVENT)
    def record_event(self, request: RecordEventInput) -> RecordEventResult:
        involved = request.involved
        namespace = involved.namespace or "default"
        message = cap(request.message, EVENT_MESSAGE_LIMIT)
        # Same object, type, reason and message -> same Event, like client-go's aggregation key.
        key = "|".join(
            (
                involved.api_version,
                involved.kind,
                namespace,
                involved.name,
                involved.uid or "",
                request.type,
                request.reason,
                message,
            )
        )
        name = f"{involved.name}.{hashlib.sha256(key.encode()).hexdigest()[:16]}"
        ref = ObjectRef(api_version="v1", kind="Event", name=name, namespace=namespace)
        action = f"record {request.type} event {request.reason} on {describe(involved)}"
        for attempt in range(CONFLICT_ATTEMPTS):
            heartbeat(attempt)
            with api_errors(action):
                existing = self.rest.get_or_none(object_path(ref))
                stamp = now_rfc3339()
                try:
                    if existing is None:
                        self.rest.request(
                            "POST",
                            collection_path("v1", "events", namespace),
                            body=self._event(request, involved, name, namespace, message, stamp),
                        )
                        return RecordEventResult(name=name, count=1)
                    metadata = existing.get("metadata") or {}
                    if request.occurrence and (metadata.get("annotations") or {}).get(
                        EVENT_OCCURRENCE_ANNOTATION
                    ) == request.occurrence:
                        # This recording wrote it already (an attempt repeated): counted once.
                        return RecordEventResult(name=name, count=int(existing.get("count") or 1))
                    count = int(existing.get("count") or 1) + 1
                    patched: dict[str, Any] = {"resourceVersion": metadata.get("resourceVersion")}
                    if request.occurrence:
                        patched["annotations"] = {EVENT_OCCURRENCE_ANNOTATION: request.occurrence}
                    self.rest.request(
                        "PATCH",
                        object_path(ref),
                        body={"metadata": patched, "count": count, "lastTimestamp": stamp},
                        content_type=CONTENT_TYPES["merge"],
                    )
                    return RecordEventResult(name=name, count=count)
                except ApiException as error:
                    if (is_already_exists(error) or is_conflict(error)) and attempt + 1 < CONFLICT_ATTEMPTS:
                        continue
                    raise
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _event(
        self,
        request: RecordEventInput,
        involved: ObjectRef,
        name: str,
        namespace: str,
        message: str,
        stamp: str,
    ) -> dict[str, Any]:
        involved_object = {
            "apiVersion": involved.api_version,
            "kind": involved.kind,
            "name": involved.name,
            "namespace": involved.namespace or "",
        }
        if involved.uid:
            involved_object["uid"] = involved.uid
        metadata: dict[str, Any] = {"name": name, "namespace": namespace}
        if request.occurrence:
            metadata["annotations"] = {EVENT_OCCURRENCE_ANNOTATION: request.occurrence}
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": metadata,
            "involvedObject": involved_object,
            "reason": request.reason,
            "message": message,
            "type": request.type,
            "action": request.action or request.reason,
            "count": 1,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "source": {"component": FIELD_MANAGER},
            "reportingComponent": FIELD_MANAGER,
            "reportingInstance": socket.gethostname(),
        }

    @activity.defn(name=KUBE_CRD_EXISTS)
    def crd_exists(self, request: CrdExistsInput) -> CrdExistsResult:
        ref = ObjectRef(
            api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition", name=request.name
        )
        with api_errors(f"read CustomResourceDefinition {request.name}"):
            crd = self.rest.get_or_none(object_path(ref))
        if crd is None:
            return CrdExistsResult(exists=False)
        conditions = (crd.get("status") or {}).get("conditions") or []
        established = any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)
        versions = [v["name"] for v in (crd.get("spec") or {}).get("versions") or [] if v.get("served")]
        return CrdExistsResult(exists=True, established=established, served_versions=versions)
