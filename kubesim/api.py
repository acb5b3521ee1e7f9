"""The API semantics shared by the HTTP server and the in-process controllers: create, read,
update, patch, apply and delete with the rules a real API server applies (uid, resourceVersion
preconditions, generation, status kept apart, finalizers, graceful deletion, CRDs registering
new kinds). Controllers use these same calls, so they are held to the same rules as clients.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import uuid
from collections.abc import Callable
from typing import Any

import yaml

from kubesim import defaults, errors, fastjson
from kubesim.allocation import ServiceAddresses
from kubesim.apply import server_side_apply, track_update
from kubesim.errors import ApiError
from kubesim.fastjson import clone
from kubesim.patch import apply_patch
from kubesim.quota import QUOTAS, WEBHOOK_PREVIEW, Charges, admit
from kubesim.resources import Registry, ResourceType, resource_type_from_crd
from kubesim.selectors import parse_field_selector, parse_label_selector
from kubesim.store import Object, Store
from kubesim.timing import Timing, now, random_suffix, timestamp
from kubesim.validation import validate, validate_update

CRD_KEY = ("apiextensions.k8s.io", "customresourcedefinitions")
# Kinds whose DELETE answers with the deleted object rather than a Status.
_RETURNS_OBJECT = {("", "pods"), ("", "services"), ("", "resourcequotas")}
# Server-owned metadata a client cannot change through an update.
_SERVER_META = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation",
                "name", "namespace")
_NO_GENERATION = {("", "configmaps"), ("", "secrets"), ("", "events"), ("", "endpoints"), ("", "namespaces"),
                  ("coordination.k8s.io", "leases"), ("discovery.k8s.io", "endpointslices"),
                  ("", "serviceaccounts"), ("", "nodes"), ("", "services")}


def dig(obj: Any, dotted: str) -> Any:
    for part in dotted.strip(".").split("."):
        obj = obj.get(part) if isinstance(obj, dict) else None
    return obj


def _spec_view(obj: Object) -> Object:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


def _comparable(obj: Object) -> Object:
    meta = {k: v for k, v in obj["metadata"].items() if k not in ("resourceVersion", "managedFields")}
    return {**obj, "metadata": meta}


class Api:
    """Stateful API semantics over the store; every method runs on the server's event loop."""

    def __init__(self, store: Store, registry: Registry, timing: Timing) -> None:
        self.store = store
        self.registry = registry
        self.timing = timing
        # Hooks the controllers add for synchronous checks (the PDB check during eviction).
        self.eviction_check: Callable[[Object], None] | None = None
        # Where each recorded Event lives, by (object uid, reason, message, type, component),
        # so a repeat bumps its count instead of creating another.
        self.event_index: dict[tuple[Any, ...], tuple[str, str]] = {}
        # The clusterIPs and nodePorts stored Services hold, kept in step with their changes.
        self.service_addresses = ServiceAddresses(store)

    # ---- lookups ---------------------------------------------------------------------------

    def resource(self, group: str, version: str, plural: str) -> ResourceType:
        rt = self.registry.lookup(group, version, plural)
        if rt is None:
            gv = f"{group}/{version}" if group else version
            raise ApiError(404, f"the server could not find the requested resource ({plural} in {gv})")
        return rt

    def type_of(self, group: str, plural: str) -> ResourceType:
        rt = self.registry.get(group, plural)
        if rt is None:
            raise ApiError(404, f"the server could not find the requested resource ({plural}.{group})")
        return rt

    def get(self, rt: ResourceType, namespace: str, name: str) -> Object:
        obj = self.store.get(rt.key, namespace if rt.namespaced else "", name)
        if obj is None:
            raise errors.not_found(rt.group, rt.plural, name)
        return obj

    def find(self, group: str, plural: str, namespace: str, name: str) -> Object | None:
        return self.store.get((group, plural), namespace, name)

    def list(
        self,
        rt: ResourceType,
        namespace: str | None,
        label_selector: str = "",
        field_selector: str = "",
        limit: int = 0,
        continue_token: str = "",
    ) -> Object:
        scope = namespace if rt.namespaced else None
        if label_selector:
            # The store's label index answers without reading every object of the type.
            items = self.store.select(rt.key, scope, parse_label_selector(label_selector))
        else:
            items = self.store.list(rt.key, scope)
        if field_selector:
            match = parse_field_selector(field_selector, rt.plural, rt.builtin)
            items = [o for o in items if match(o)]
        list_rv = str(self.store.rv)
        if continue_token:
            try:
                token = json.loads(base64.urlsafe_b64decode(continue_token.encode()))
                start, list_rv = tuple(token["start"]), token["rv"]
            except (ValueError, KeyError, TypeError) as exc:
                raise ApiError(400, f"continue token {continue_token!r} is not valid: {exc}") from exc
            if int(list_rv) < self.store.compacted_rv:
                raise ApiError(410, "The provided continue parameter is too old to display a consistent list "
                               "result. You can start a new list without the continue parameter.", reason="Expired")
            items = [o for o in items if (o["metadata"].get("namespace", ""), o["metadata"]["name"]) > start]
        meta: Object = {"resourceVersion": list_rv}
        if limit and len(items) > limit:
            last = items[limit - 1]["metadata"]
            token = {"rv": list_rv, "start": [last.get("namespace", ""), last["name"]]}
            meta["continue"] = base64.urlsafe_b64encode(json.dumps(token).encode()).decode()
            meta["remainingItemCount"] = len(items) - limit
            items = items[:limit]
        return {"kind": rt.list_kind or rt.kind + "List", "apiVersion": rt.api_version, "metadata": meta,
                "items": items}

    # ---- create ----------------------------------------------------------------------------

    def create(self, rt: ResourceType, namespace: str, body: Any, manager: str = "", dry_run: bool = False) -> Object:
        obj, charges = self._admit_create(rt, namespace, body, manager)
        return self._dry_created(rt, obj) if dry_run else self._store_created(rt, obj, charges)

    def _admit_create(
        self, rt: ResourceType, namespace: str, body: Any, manager: str
    ) -> tuple[Object, Charges]:
        """The object a create would store, and the quota charges its admission makes."""
        obj = self._check_body(rt, body, namespace)
        meta = obj["metadata"]
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + random_suffix()
        if rt.namespaced:
            self._check_namespace(namespace)
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        validate(rt, obj)
        if meta.get("resourceVersion"):
            # etcd3's store refuses this with an internal error, which is what clients see.
            raise ApiError(500, "resourceVersion should not be set on objects to be created")
        for key in ("deletionTimestamp", "deletionGracePeriodSeconds", "managedFields"):
            meta.pop(key, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = timestamp()
        if rt.status:
            obj.pop("status", None)
        defaulter = defaults.DEFAULTERS.get(rt.key)
        if defaulter:
            defaulter(obj)
        elif rt.key == ("", "services"):
            defaults.default_service(obj, self.service_addresses.current())
        if rt.key not in _NO_GENERATION:
            meta["generation"] = 1
        track_update(None, obj, manager or "unknown")
        charges: Charges = []
        if rt.namespaced and not WEBHOOK_PREVIEW.get():
            charges = admit(self.store, rt.key, obj)
        return obj, charges

    def _store_created(self, rt: ResourceType, obj: Object, charges: Charges) -> Object:
        """Store an admitted create, charging its quotas first (as the quota admission does: a
        name found taken by storage afterwards leaves the charge until the quota is counted
        again)."""
        for quota, status in charges:
            self.write_status(self.type_of(*QUOTAS), quota, status, "kube-apiserver")
        self._name_free(rt, obj)
        stored = self.store.put(rt.key, obj)
        if rt.key == CRD_KEY:
            self._register_crd(stored)
        return stored

    def _dry_created(self, rt: ResourceType, obj: Object) -> Object:
        """A dryRun create's answer: storage's dry run finds a taken name too (not the webhooks'
        preview, `WEBHOOK_PREVIEW`: the name is judged after them)."""
        if not WEBHOOK_PREVIEW.get():
            self._name_free(rt, obj)
        return obj

    def _name_free(self, rt: ResourceType, obj: Object) -> None:
        meta = obj["metadata"]
        if self.store.get(rt.key, meta.get("namespace", ""), meta["name"]) is not None:
            raise errors.already_exists(rt.group, rt.plural, meta["name"])

    def _check_body(self, rt: ResourceType, body: Any, namespace: str) -> Object:
        if not isinstance(body, dict):
            raise ApiError(400, f"the request body must be a {rt.kind} object in JSON")
        obj: Object = clone(body)
        kind, api_version = obj.get("kind"), obj.get("apiVersion")
        if kind and kind != rt.kind:
            raise ApiError(400, f"the body kind {kind!r} does not match the resource {rt.plural} (kind {rt.kind})")
        if api_version and api_version != rt.api_version:
            raise ApiError(400, f"the body apiVersion {api_version!r} does not match {rt.api_version!r}")
        obj["kind"], obj["apiVersion"] = rt.kind, rt.api_version
        meta = obj.setdefault("metadata", {}) or {}
        obj["metadata"] = meta
        if rt.namespaced and meta.get("namespace") and meta["namespace"] != namespace:
            raise ApiError(400, "the namespace of the provided object does not match the namespace sent on the "
                           f"request (metadata.namespace {meta['namespace']!r}, path namespace {namespace!r})")
        return obj

    def _check_namespace(self, namespace: str) -> None:
        ns = self.store.get(("", "namespaces"), "", namespace)
        if ns is None:
            raise errors.not_found("", "namespaces", namespace)
        if ns["metadata"].get("deletionTimestamp"):
            raise ApiError(403, f"unable to create new content in namespace {namespace} because it is being "
                           "terminated", details={"name": namespace, "kind": "namespaces",
                                                  "causes": [{"reason": "NamespaceTerminating"}]})

    # ---- update / patch / apply ------------------------------------------------------------

    def replace(self, rt: ResourceType, namespace: str, name: str, body: Any, manager: str = "",
                subresource: str = "", dry_run: bool = False) -> Object:
        old = self.get(rt, namespace, name)
        new = self._check_body(rt, body, namespace)
        meta = new["metadata"]
        if meta.get("name") and meta["name"] != name:
            raise ApiError(400, f"the name of the object ({meta['name']}) does not match the name on the URL ({name})")
        meta["name"] = name
        rv = meta.get("resourceVersion")
        if not rv and not rt.builtin:
            raise errors.invalid(rt.kind, rt.group, name, [(
                "metadata.resourceVersion", "FieldValueInvalid",
                "Invalid value: 0x0: must be specified for an update")])
        self._check_preconditions(rt, old, rv, meta.get("uid"))
        return self.commit_update(rt, old, new, manager, subresource, dry_run)

    def patch(self, rt: ResourceType, namespace: str, name: str, content_type: str, raw: bytes,
              manager: str = "", force: bool = False, subresource: str = "", dry_run: bool = False) -> Object:
        media = content_type.split(";")[0].strip().lower()
        if media == "application/apply-patch+yaml":
            return self._apply(rt, namespace, name, raw, manager, force, subresource, dry_run)
        try:
            body = fastjson.loads(raw or b"null")
        except ValueError as exc:
            raise ApiError(400, f"the patch body is not valid JSON: {exc}") from exc
        old = self.get(rt, namespace, name)
        new = apply_patch(content_type, clone(old), body, rt.builtin)
        meta = new.get("metadata") or {}
        # A resourceVersion or uid in the patch body is a precondition; otherwise the patch
        # applies to whatever is current.
        rv = meta.get("resourceVersion")
        self._check_preconditions(rt, old, rv if rv != old["metadata"]["resourceVersion"] else None,
                                  meta.get("uid"))
        new = self._check_body(rt, new, namespace)
        return self.commit_update(rt, old, new, manager, subresource, dry_run)

    def _apply(self, rt: ResourceType, namespace: str, name: str, raw: bytes, manager: str, force: bool,
               subresource: str, dry_run: bool) -> Object:
        try:
            config = yaml.safe_load(raw.decode() if raw else "")
        except yaml.YAMLError as exc:
            raise ApiError(400, f"the apply configuration is not valid YAML: {exc}") from exc
        current = self.find(rt.group, rt.plural, namespace if rt.namespaced else "", name)
        if isinstance(config, dict):
            config.setdefault("metadata", {})["name"] = name
        result = server_side_apply(current, config, manager, force, rt.builtin, subresource)
        if current is None:
            fields = result["metadata"].pop("managedFields")
            result["metadata"].pop("resourceVersion", None)
            created, charges = self._admit_create(rt, namespace, result, manager)
            created["metadata"]["managedFields"] = fields
            return self._dry_created(rt, created) if dry_run else self._store_created(rt, created, charges)
        self._check_preconditions(rt, current, result["metadata"].get("resourceVersion"), None)
        return self.commit_update(rt, current, self._check_body(rt, result, namespace), "", subresource,
                                   dry_run, track=False)

    def _check_preconditions(self, rt: ResourceType, old: Object, rv: str | None, uid: str | None) -> None:
        name = old["metadata"]["name"]
        if rv and rv != old["metadata"]["resourceVersion"]:
            raise errors.conflict(rt.group, rt.plural, name,
                                  "the object has been modified; please apply your changes to the latest version "
                                  "and try again")
        if uid and uid != old["metadata"]["uid"]:
            raise errors.conflict(rt.group, rt.plural, name,
                                  f"Precondition failed: UID in precondition: {uid}, UID in object meta: "
                                  f"{old['metadata']['uid']}")

    def commit_update(self, rt: ResourceType, old: Object, new: Object, manager: str, subresource: str,
                       dry_run: bool = False, track: bool = True, bump_generation: bool = True) -> Object:
        old_meta = old["metadata"]
        if subresource == "status":
            # The status subresource changes status only; everything else comes from storage.
            new = {**old, "status": new.get("status")}
            if new["status"] is None:
                new.pop("status")
            new["metadata"] = dict(old_meta)
            if "managedFields" in old_meta:
                new["metadata"]["managedFields"] = old_meta["managedFields"]
        else:
            if rt.status:
                if "status" in old:
                    new["status"] = old["status"]
                else:
                    new.pop("status", None)
            meta = new["metadata"]
            for key in _SERVER_META:
                if key in old_meta:
                    meta[key] = old_meta[key]
                else:
                    meta.pop(key, None)
            if "managedFields" not in meta and "managedFields" in old_meta:
                meta["managedFields"] = old_meta["managedFields"]
            validate_update(rt, old, new)
            if bump_generation and "generation" in old_meta and _spec_view(old) != _spec_view(new):
                meta["generation"] = old_meta["generation"] + 1
        if track:
            track_update(old, new, manager or "unknown", subresource)
        if _comparable(new) == _comparable(old):
            return old  # a no-op write does not bump the resourceVersion, as in a real server
        if dry_run:
            return new
        if old_meta.get("deletionTimestamp") and not new["metadata"].get("finalizers") and (
            rt.key != ("", "pods") or not old_meta.get("deletionGracePeriodSeconds")
        ):
            return self.store.remove(rt.key, new)
        stored = self.store.put(rt.key, new)
        if rt.key == CRD_KEY:
            self._register_crd(stored)
        return stored

    def write_status(self, rt: ResourceType, obj: Object, status: Object, manager: str) -> Object:
        """Controller helper: replace status when it differs (no resourceVersion precondition)."""
        if obj.get("status") == status:
            return obj
        current = self.find(rt.group, rt.plural, obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
        if current is None:
            return obj
        return self.commit_update(rt, current, {**current, "status": status}, manager, "status")

    def write(self, rt: ResourceType, obj: Object, manager: str, handed_over: bool = False) -> Object:
        """Controller helper: store a modified copy of an object (main resource semantics).

        `handed_over`: the caller gives `obj` up, and every container in it is either its own
        new one or a stored object's, which no one changes in place (stored objects are
        replaced, never edited), so it is stored without the copy: a copy of a 1,000-address
        Endpoints costs more than the write's own work."""
        current = self.get(rt, obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
        return self.commit_update(rt, current, obj if handed_over else clone(obj), manager, "")

    # ---- delete ----------------------------------------------------------------------------

    def delete(self, rt: ResourceType, namespace: str, name: str, options: Object | None = None,
               dry_run: bool = False) -> tuple[Object, bool]:
        """Delete or start deleting; returns (object or Status, whether it is gone)."""
        options = options or {}
        obj = self.get(rt, namespace, name)
        pre = options.get("preconditions") or {}
        self._check_preconditions(rt, obj, pre.get("resourceVersion"), pre.get("uid"))
        meta = obj["metadata"]
        policy = options.get("propagationPolicy")
        if options.get("orphanDependents") is True:
            policy = "Orphan"
        finalizers = list(meta.get("finalizers") or [])
        if policy == "Orphan" and "orphan" not in finalizers:
            finalizers.append("orphan")
        elif policy == "Foreground" and "foregroundDeletion" not in finalizers:
            finalizers.append("foregroundDeletion")
        grace = self._grace_seconds(rt, obj, options)
        if dry_run:
            return obj, False
        if rt.key == ("", "namespaces"):
            finalizers = finalizers or []
            grace = 0
            if not meta.get("deletionTimestamp"):
                updated = clone(obj)
                updated["metadata"]["deletionTimestamp"] = timestamp()
                updated["metadata"]["deletionGracePeriodSeconds"] = 0
                updated["status"] = {"phase": "Terminating"}
                return self.store.put(rt.key, updated), False
            return obj, False
        if not finalizers and grace == 0:
            gone = self.store.remove(rt.key, obj)
            if rt.key == CRD_KEY:
                self._unregister_crd(gone)
            if rt.key in _RETURNS_OBJECT or not rt.builtin:
                return gone, True
            return {**errors.status_object(200, ""), "details": {
                "name": name, "group": rt.group, "kind": rt.plural, "uid": meta["uid"]}}, True
        current_grace = meta.get("deletionGracePeriodSeconds")
        if meta.get("deletionTimestamp") and set(finalizers) == set(meta.get("finalizers") or []) and (
            current_grace is not None and current_grace <= grace
        ):
            return obj, False  # already terminating with a grace at least as short
        updated = clone(obj)
        umeta = updated["metadata"]
        umeta["deletionTimestamp"] = timestamp(now() + dt.timedelta(seconds=grace))
        umeta["deletionGracePeriodSeconds"] = grace
        if finalizers:
            umeta["finalizers"] = finalizers
        if rt.key == ("", "pods") and grace == 0 and not finalizers:
            return self.store.remove(rt.key, updated), True
        return self.store.put(rt.key, updated), False

    def _grace_seconds(self, rt: ResourceType, obj: Object, options: Object) -> int:
        if rt.key != ("", "pods"):
            return 0
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        # Unscheduled pods and finished pods have no kubelet to wait for.
        if not spec.get("nodeName") or status.get("phase") in ("Succeeded", "Failed"):
            return 0
        grace = options.get("gracePeriodSeconds")
        if grace is None:
            grace = spec.get("terminationGracePeriodSeconds", 30)
        grace = int(grace)
        if grace < 0:
            raise ApiError(422, f"gracePeriodSeconds must be >= 0, got {grace}")
        return grace

    def force_remove(self, rt: ResourceType, obj: Object) -> Object:
        """The kubelet's final delete after termination (finalizers still hold the object)."""
        current = self.find(rt.group, rt.plural, obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
        if current is None or current["metadata"]["uid"] != obj["metadata"]["uid"]:
            return obj
        if current["metadata"].get("finalizers"):
            updated = clone(current)
            updated["metadata"]["deletionGracePeriodSeconds"] = 0
            return self.store.put(rt.key, updated)
        return self.store.remove(rt.key, current)

    def delete_collection(self, rt: ResourceType, namespace: str | None, label_selector: str,
                          field_selector: str, options: Object | None) -> Object:
        listed = self.list(rt, namespace, label_selector, field_selector)
        for obj in listed["items"]:
            try:
                self.delete(rt, obj["metadata"].get("namespace", ""), obj["metadata"]["name"], options)
            except ApiError as exc:
                if exc.code != 404:
                    raise
        return listed

    # ---- CRDs ------------------------------------------------------------------------------

    def _register_crd(self, crd: Object) -> None:
        for rt in resource_type_from_crd(crd):
            self.registry.add(rt)

    def _unregister_crd(self, crd: Object) -> None:
        spec = crd.get("spec") or {}
        plural = (spec.get("names") or {}).get("plural", "")
        self.registry.remove(spec.get("group", ""), plural)
        self.store.drop_type((spec.get("group", ""), plural))

    def restore_registry(self) -> None:
        """Re-register every stored CRD and re-index Events (after loading persisted state)."""
        for crd in self.store.list(CRD_KEY):
            self._register_crd(crd)
        for event in self.store.list(("", "events")):
            key = ((event.get("involvedObject") or {}).get("uid"), event.get("reason"), event.get("message"),
                   event.get("type"), (event.get("source") or {}).get("component"))
            self.event_index[key] = (event["metadata"]["namespace"], event["metadata"]["name"])
