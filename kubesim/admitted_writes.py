"""The admission step of kubesim's HTTP write path: a write runs first as a dry run, which gives
the validating webhooks (`kubesim.admission_webhooks`) the object it would store, and then, if
they allow it, for real; their warnings go out as the response's Warning headers. The quota
judges the write after the webhooks, as the API server's last validating admission.

The server hands each write over as a function `write(dry_run) -> result` (the same API call,
dry or not), so defaulting, validation and preconditions stay where they are and are applied once
more to the committed write. With no configuration that could match, the write runs at once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from aiohttp import web

from kubesim.admission_webhooks import SUBRESOURCE_KINDS, Attributes, Hook, ValidatingWebhooks
from kubesim.api import Api
from kubesim.errors import conflict
from kubesim.quota import WEBHOOK_PREVIEW
from kubesim.resources import ResourceType
from kubesim.subresources import get_scale

Object = dict[str, Any]
# Warnings (unknown fields under fieldValidation=Warn, webhooks' warnings) for the response headers.
WARNINGS = web.RequestKey("warnings", list)
# How often a write is admitted again when its object changed while the webhooks were asked
# (the API server's storage update retries the same way).
ATTEMPTS = 5
_OPTIONS_KIND = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "PATCH": "PatchOptions",
                 "DELETE": "DeleteOptions"}


def add_warnings(request: web.Request, warnings: list[str]) -> None:
    """Warnings for the response's Warning headers (a repeated text is sent once)."""
    known = request.setdefault(WARNINGS, [])
    known += [w for w in warnings if w not in known]


def warning_header(text: str) -> str:
    """RFC 7234 warn-code 299, how the API server passes warnings; kubectl prints them."""
    return '299 - "{}"'.format(text.replace("\\", "\\\\").replace('"', '\\"'))


def user_info(request: web.Request) -> Object:
    """Who the request is from, for an AdmissionReview: kubesim's one bearer token stands for its
    one administrator; a request without a token is anonymous."""
    scheme, _, credential = (request.headers.get("Authorization") or "").strip().partition(" ")
    if scheme.lower() == "bearer" and credential.strip():
        return {"username": "kubesim-admin", "uid": "kubesim-admin",
                "groups": ["system:masters", "system:authenticated"]}
    return {"username": "system:anonymous", "groups": ["system:unauthenticated"]}


def _options(request: web.Request, operation: str, patch: bool, extra: Object | None) -> Object:
    """The Create/Update/Patch/DeleteOptions an AdmissionRequest carries."""
    options: Object = {k: v for k, v in (extra or {}).items() if k not in ("kind", "apiVersion")}
    options.update(kind=_OPTIONS_KIND["PATCH" if patch and operation == "UPDATE" else operation],
                   apiVersion="meta.k8s.io/v1")
    if request.query.get("dryRun"):
        options["dryRun"] = request.query.getall("dryRun")
    if operation != "DELETE" and request.query.get("fieldManager"):
        options["fieldManager"] = request.query["fieldManager"]
    return options


def preview(write: Callable[[bool], Any]) -> Any:
    """What `write` would do, for the webhooks to judge: a dry run not yet judged on the quota,
    which is admitted after them (`kubesim.quota.WEBHOOK_PREVIEW`)."""
    token = WEBHOOK_PREVIEW.set(True)
    try:
        return write(True)
    finally:
        WEBHOOK_PREVIEW.reset(token)


def _rv(obj: Object | None) -> str | None:
    return obj["metadata"].get("resourceVersion") if obj is not None else None


class AdmittedWrites:
    """Runs the server's writes through the validating webhooks."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self.webhooks = ValidatingWebhooks(api.store)

    async def write(self, request: web.Request, rt: ResourceType, namespace: str, name: str, sub: str,
                    operation: str | None, write: Callable[[bool], Any], options: Object | None = None,
                    patch: bool = False) -> Any:
        """`write(dry_run)` once the webhooks that match have allowed what it would do.

        If they allow it and the stored object is still the one they saw, the write runs for
        real (or not at all for a dryRun request); an object changed meanwhile is admitted again.
        `operation` None (a PATCH, apply included): CREATE when the object does not exist yet,
        else UPDATE. `patch`: the options are PatchOptions. A scale write is admitted as the
        Scales it changes. A create's `name` is "" (the dry run tells it)."""
        dry_run = bool(request.query.get("dryRun"))
        if not self.webhooks.configured(rt):
            return write(dry_run)
        api = self.api
        scope = namespace if rt.namespaced else ""
        for _ in range(ATTEMPTS):
            old = api.find(rt.group, rt.plural, scope, name) if name else None
            op = operation or ("UPDATE" if old is not None else "CREATE")
            asked = Attributes(rt, op, name if rt.key == ("", "namespaces") else namespace, name, sub, None, None,
                               dry_run, _options(request, op, patch, options), user_info(request),
                               SUBRESOURCE_KINDS.get(sub))
            hooks = self.webhooks.hooks(asked)
            if not hooks:
                return write(dry_run)
            outcome = preview(write)
            new: Object | None = None if op == "DELETE" else outcome
            obj_name = name or (new or {})["metadata"]["name"]
            if op != "CREATE":
                old_seen = get_scale(api, rt, namespace, name) if sub == "scale" else old
                asked = dataclasses.replace(asked, old=old_seen)
            if not name:
                asked = dataclasses.replace(asked, name=obj_name,
                                            namespace=obj_name if rt.key == ("", "namespaces") else namespace)
            await self._admit(request, dataclasses.replace(asked, obj=new), hooks)
            if dry_run:
                return write(True)  # judged on the quota now, as it would be stored
            if _rv(api.find(rt.group, rt.plural, scope, obj_name)) == _rv(old):
                return write(False)
        raise conflict(rt.group, rt.plural, name, "the object kept changing while admission webhooks were called; "
                       "please try again")

    async def create_subresource(self, request: web.Request, rt: ResourceType, namespace: str, name: str, sub: str,
                                 body: Any) -> None:
        """Admit a CREATE of a subresource whose object is the request body (an Eviction, a Binding)."""
        if not self.webhooks.configured(rt):
            return
        group, version, kind = SUBRESOURCE_KINDS[sub]
        obj = dict(body) if isinstance(body, dict) else {}
        obj.update(apiVersion=f"{group}/{version}" if group else version, kind=kind,
                   metadata={**(obj.get("metadata") or {}), "name": name, "namespace": namespace})
        attrs = Attributes(rt, "CREATE", namespace, name, sub, obj, None, bool(request.query.get("dryRun")),
                           _options(request, "CREATE", False, None), user_info(request), SUBRESOURCE_KINDS[sub])
        hooks = self.webhooks.hooks(attrs)
        if hooks:
            await self._admit(request, attrs, hooks)

    async def _admit(self, request: web.Request, attrs: Attributes, hooks: list[Hook]) -> None:
        verdict = await self.webhooks.admit(attrs, hooks)
        add_warnings(request, verdict.warnings)
        if verdict.error is not None:
            raise verdict.error
