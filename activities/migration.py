"""Migration activities: the worker's audit caps, and the audit ConfigMap of an InferenceService.

`<isvc>-ome-migration-audit` holds `history.json`, one row per migration (spec reference
§13): written when a migration is accepted and again when it ends; the newest 200 ended rows
are kept (`models.migration.merge_audit_rows`). Concurrent migrations of one InferenceService
write it with optimistic concurrency: a 409 reads it again.

The ConfigMap is owned by its InferenceService (an ownerReference), so deleting the
InferenceService removes it. A request without the InferenceService's uid (a migration a
node drain started) reads the InferenceService for it; a ConfigMap written before without
an owner gets one on the next write.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException
from temporalio import activity

from activities.kube_errors import api_errors, is_already_exists, is_conflict
from activities.kube_objects import CONFLICT_ATTEMPTS, heartbeat
from activities.kube_rest import KubeRest
from models.migration import (
    MIGRATION_SETTINGS,
    RECORD_MIGRATION_AUDIT,
    AuditRowInput,
    AuditRowResult,
    MigrationAudit,
    MigrationSettingsResult,
    merge_audit_rows,
)

HISTORY_KEY = "history.json"
ISVC_API_VERSION = "ome.io/v1beta1"


def audit_config_map_name(isvc: str) -> str:
    return f"{isvc}-ome-migration-audit"


class MigrationActivities:
    def __init__(self, api_client: ApiClient, audit: MigrationAudit | None = MigrationAudit()) -> None:
        self.rest = KubeRest(api_client)
        self.audit = audit

    def activities(self) -> list[Callable[..., Any]]:
        return [self.migration_settings, self.record_audit]

    @activity.defn(name=MIGRATION_SETTINGS)
    def migration_settings(self) -> MigrationSettingsResult:
        return MigrationSettingsResult(audit=self.audit)

    @activity.defn(name=RECORD_MIGRATION_AUDIT)
    def record_audit(self, request: AuditRowInput) -> AuditRowResult:
        name = audit_config_map_name(request.isvc)
        path = f"/api/v1/namespaces/{request.namespace}/configmaps/{name}"
        owner = _Owner(self.rest, request)
        for attempt in range(CONFLICT_ATTEMPTS):
            heartbeat(attempt)
            with api_errors(f"record migration audit in ConfigMap {request.namespace}/{name}"):
                existing = self.rest.get_or_none(path)
                rows = _rows(existing)
                merged = merge_audit_rows(rows, request.row)
                data = {HISTORY_KEY: json.dumps(merged, indent=1, sort_keys=True)}
                try:
                    if existing is None:
                        body = _new_config_map(request, name, data, owner.reference())
                        self.rest.request("POST", f"/api/v1/namespaces/{request.namespace}/configmaps", body=body)
                    else:
                        existing["data"] = {**(existing.get("data") or {}), **data}
                        if not _owned(existing, request.isvc):
                            reference = owner.reference()
                            if reference is not None:
                                metadata = existing.setdefault("metadata", {})
                                metadata["ownerReferences"] = [*(metadata.get("ownerReferences") or []), reference]
                        self.rest.request("PUT", path, body=existing)
                except ApiException as error:
                    # Another migration wrote it between our read and write: read again.
                    if (is_conflict(error) or is_already_exists(error)) and attempt + 1 < CONFLICT_ATTEMPTS:
                        continue
                    raise
                return AuditRowResult(config_map=name, rows=len(merged))
        raise AssertionError("unreachable: the last attempt returns or raises")


def _rows(config_map: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The rows `history.json` holds; a missing or unreadable one counts as empty."""
    if config_map is None:
        return []
    try:
        rows = json.loads((config_map.get("data") or {}).get(HISTORY_KEY) or "[]")
    except ValueError:
        return []
    return [row for row in rows if isinstance(row, dict)] if isinstance(rows, list) else []


class _Owner:
    """The InferenceService's ownerReference: from the request's uid, else read once from the
    InferenceService itself (None when it is gone)."""

    def __init__(self, rest: KubeRest, request: AuditRowInput) -> None:
        self.rest = rest
        self.request = request
        self.uid = request.isvc_uid
        self.looked = bool(request.isvc_uid)

    def reference(self) -> dict[str, Any] | None:
        if not self.looked:
            self.looked = True
            request = self.request
            isvc = self.rest.get_or_none(
                f"/apis/{ISVC_API_VERSION}/namespaces/{request.namespace}/inferenceservices/{request.isvc}"
            )
            self.uid = ((isvc or {}).get("metadata") or {}).get("uid") or None
        if not self.uid:
            return None
        return {"apiVersion": ISVC_API_VERSION, "kind": "InferenceService", "name": self.request.isvc, "uid": self.uid}


def _owned(config_map: dict[str, Any], isvc: str) -> bool:
    """Whether the ConfigMap already names the InferenceService `isvc` as an owner."""
    references = (config_map.get("metadata") or {}).get("ownerReferences") or []
    return any(ref.get("kind") == "InferenceService" and ref.get("name") == isvc for ref in references)


def _new_config_map(
    request: AuditRowInput, name: str, data: dict[str, str], owner: dict[str, Any] | None
) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": request.namespace,
        "labels": {"ome.io/inferenceservice": request.isvc, "app.kubernetes.io/part-of": "omeflow"},
    }
    if owner is not None:
        metadata["ownerReferences"] = [owner]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data}
