"""Validating admission webhooks, called on kubesim's write path as kube-apiserver calls them.

For a CREATE, UPDATE (PUT, every PATCH kind, server-side apply) or DELETE, every webhook of every
stored ValidatingWebhookConfiguration (read at request time, configurations by name) is matched
against the request: its rules (operations, apiGroups, apiVersions, resources with subresource
forms such as `pods/status`, `*/*`, and scope), its `namespaceSelector` against the labels of the
object's Namespace, and its `objectSelector` against the object's or the old object's labels.
Each webhook that matches gets an `admission.k8s.io/v1` AdmissionReview (`kubesim.webhook_call`
posts it); the matched webhooks are called concurrently, so the event loop never waits on one.

The verdict mirrors the API server's: a denial becomes the webhook's Status run through
`webhookerrors.ToStatusErr` (`admission webhook "<name>" denied the request: <message>`, code at
least 400, the webhook's reason kept); a failed call is a 500 `Internal error occurred: failed
calling webhook ...` under `failurePolicy: Fail` and is passed over under `Ignore`; a dry run
refuses webhooks that have side effects; every webhook's `warnings` come back as Warning headers.
When several webhooks refuse, the first in configuration order is answered.

kubesim serves one version of each resource, so `matchPolicy: Equivalent` matches what `Exact`
does; the request kind and resource are the ones served (a subresource with a kind of its own,
`scale`, `pods/eviction`, `pods/binding`, sends that kind: Scale, Eviction, Binding).

`kubesim.server` computes the would-be object first (the API call in dry-run mode: defaulted and
validated, nothing committed), admits it here, then commits; see `Server._admitted`.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any

from kubesim import webhook_config
from kubesim.errors import ApiError, not_found
from kubesim.resources import ResourceType
from kubesim.selectors import selector_matches
from kubesim.store import Store
from kubesim.webhook_call import CallFailed, post_review

log = logging.getLogger("kubesim.admission")
Object = dict[str, Any]
_NAMESPACES = ("", "namespaces")
_DRY_RUN_SAFE = ("None", "NoneOnDryRun")
_REVIEW_KIND = "AdmissionReview"


@dataclass(frozen=True)
class Attributes:
    """What one write asks, as the admission chain sees it (`namespace` is the Namespace's own
    name for a Namespace object, as in the API server)."""

    rt: ResourceType
    operation: str  # CREATE, UPDATE or DELETE
    namespace: str
    name: str
    subresource: str
    obj: Object | None
    old: Object | None
    dry_run: bool
    options: Object
    user: Object
    # (group, version, kind) of a subresource's own kind (Scale, Eviction, Binding); None: the resource's.
    kind: tuple[str, str, str] | None = None


# The kinds of the subresources whose objects are not the resource's own.
SUBRESOURCE_KINDS = {"scale": ("autoscaling", "v1", "Scale"), "eviction": ("policy", "v1", "Eviction"),
                     "binding": ("", "v1", "Binding")}


@dataclass(frozen=True)
class Hook:
    """One webhook of a configuration, its defaults filled in."""

    configuration: str
    spec: Object

    @property
    def name(self) -> str:
        return str(self.spec.get("name", ""))


@dataclass
class Verdict:
    """What the webhooks answered: warnings for the response headers, and the error to answer
    instead of committing (None: the write goes on)."""

    warnings: list[str] = field(default_factory=list)
    error: ApiError | None = None


class StatusError(ApiError):
    """An error answered with a Status built elsewhere (a webhook's), kept as it is: its reason
    may be empty, as the API server passes a webhook's Status on without filling one in."""

    def __init__(self, status: Object) -> None:
        super().__init__(int(status["code"]), str(status.get("message", "")), status.get("reason") or None,
                         status.get("details"))
        self._status = status

    def status(self) -> Object:
        return dict(self._status)


def to_status_error(webhook: str, result: Object | None) -> StatusError:
    """kube-apiserver's `webhookerrors.ToStatusErr` for a webhook's denial."""
    status: Object = dict(result or {})
    status.update(kind="Status", apiVersion="v1")
    status.setdefault("metadata", {})
    if not isinstance(status.get("code"), int) or status["code"] < 400:
        status["code"] = 400
    if status.get("status") in (None, "", "Success"):
        status["status"] = "Failure"
    denied = f'admission webhook "{webhook}" denied the request'
    if status.get("message"):
        status["message"] = f"{denied}: {status['message']}"
    elif status.get("reason"):
        status["message"] = f"{denied}: {status['reason']}"
    else:
        status["message"] = f"{denied} without explanation"
    if not status.get("reason"):
        status.pop("reason", None)  # omitempty: an empty reason is not sent
    return StatusError(status)


def call_failure(webhook: str, reason: str) -> ApiError:
    """`apierrors.NewInternalError` of `ErrCallingWebhook`: what failurePolicy Fail answers."""
    text = f'failed calling webhook "{webhook}": {reason}'
    return ApiError(500, f"Internal error occurred: {text}", "InternalError", {"causes": [{"message": text}]})


def dry_run_unsupported(webhook: str) -> ApiError:
    return ApiError(400, f'admission webhook "{webhook}" does not support dry run')


# ---- matching -------------------------------------------------------------------------------


def _listed(values: Any, value: str) -> bool:
    return isinstance(values, list) and ("*" in values or value in values)


def _resource_listed(resources: Any, plural: str, subresource: str) -> bool:
    for entry in resources or []:
        res, _, sub = str(entry).partition("/")
        if (res == "*" or res == plural) and (sub == "*" or sub == subresource):
            return True
    return False


def _scope_matches(scope: str, attrs: Attributes) -> bool:
    is_namespace = attrs.rt.key == _NAMESPACES
    if scope == "Namespaced":
        return not is_namespace and bool(attrs.namespace)
    if scope == "Cluster":
        return is_namespace or not attrs.namespace
    return True


def rule_matches(rule: Object, attrs: Attributes) -> bool:
    """rules.Matcher: scope, operation, group, version and resource/subresource all match."""
    return (_scope_matches(rule.get("scope") or "*", attrs)
            and _listed(rule.get("operations"), attrs.operation)
            and _listed(rule.get("apiGroups"), attrs.rt.group)
            and _listed(rule.get("apiVersions"), attrs.rt.version)
            and _resource_listed(rule.get("resources"), attrs.rt.plural, attrs.subresource))


def exempt(rt: ResourceType) -> bool:
    """Writes to webhook configurations themselves never go to webhooks."""
    return rt.group == webhook_config.GROUP and rt.plural in webhook_config.EXEMPT_PLURALS


def _labels(obj: Object | None) -> dict[str, str] | None:
    return ((obj or {}).get("metadata") or {}).get("labels") if obj is not None else None


class ValidatingWebhooks:
    """Finds the webhooks a write goes to and calls them."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def configured(self, rt: ResourceType) -> bool:
        """Whether any webhook could see a write of `rt` (the fast path skips admission)."""
        return not exempt(rt) and bool(self.store.list(webhook_config.KEY))

    def hooks(self, attrs: Attributes) -> list[Hook]:
        """The webhooks whose rules match the request (selectors not yet applied)."""
        if exempt(attrs.rt):
            return []
        found: list[Hook] = []
        for configuration in self.store.list(webhook_config.KEY):  # sorted by name, as the API server's lister
            for spec in webhook_config.webhooks(configuration):
                if any(rule_matches(rule, attrs) for rule in spec.get("rules") or []):
                    found.append(Hook(configuration["metadata"]["name"], spec))
        return found

    def _namespace_labels(self, attrs: Attributes) -> dict[str, str] | None:
        if attrs.rt.key == _NAMESPACES and not attrs.subresource and attrs.operation in ("CREATE", "UPDATE"):
            return _labels(attrs.obj) or {}
        namespace = self.store.get(_NAMESPACES, "", attrs.namespace)
        if namespace is None:
            raise not_found("", "namespaces", attrs.namespace)
        return _labels(namespace) or {}

    def selected(self, hook: Hook, attrs: Attributes) -> bool:
        """namespaceSelector (namespaced objects and Namespaces) and objectSelector both match."""
        ns_selector = hook.spec.get("namespaceSelector") or {}
        if ns_selector and (attrs.namespace or attrs.rt.key == _NAMESPACES):
            if not selector_matches(ns_selector, self._namespace_labels(attrs)):
                return False
        obj_selector = hook.spec.get("objectSelector") or {}
        if not obj_selector:
            return True
        return any(obj is not None and selector_matches(obj_selector, _labels(obj))
                   for obj in (attrs.obj, attrs.old))

    # ---- calling ----------------------------------------------------------------------------

    async def admit(self, attrs: Attributes, hooks: list[Hook]) -> Verdict:
        """Call every selected webhook concurrently; the first refusal (in order) is the error."""
        chosen = [hook for hook in hooks if self.selected(hook, attrs)]
        if not chosen:
            return Verdict()
        answers = await asyncio.gather(*(self._call(hook, attrs) for hook in chosen))
        verdict = Verdict()
        for warnings, error in answers:
            verdict.warnings += [w for w in warnings if w not in verdict.warnings]
            if error is not None and verdict.error is None:
                verdict.error = error
        return verdict

    async def _call(self, hook: Hook, attrs: Attributes) -> tuple[list[str], ApiError | None]:
        spec = hook.spec
        if attrs.dry_run:
            effects = spec.get("sideEffects")
            if effects is None:
                return [], self._failed(hook, "Webhook SideEffects is nil")
            if effects not in _DRY_RUN_SAFE:
                return [], dry_run_unsupported(hook.name)
        versions = spec.get("admissionReviewVersions") or []
        api_version = next((f"admission.k8s.io/{v}" for v in ("v1", "v1beta1") if v in versions), None)
        if api_version is None:
            return [], self._failed(hook, "webhook does not accept known AdmissionReview versions")
        uid = str(uuid.uuid4())
        review = {"apiVersion": api_version, "kind": _REVIEW_KIND, "request": review_request(attrs, uid)}
        try:
            answer = await post_review(spec.get("clientConfig") or {}, int(spec.get("timeoutSeconds") or 10), review)
            response = _verified(answer, uid, api_version)
        except CallFailed as exc:
            return [], self._failed(hook, str(exc))
        warnings = [str(w) for w in response.get("warnings") or []]
        if response.get("allowed") is True:
            return warnings, None
        return warnings, to_status_error(hook.name, response.get("status"))

    @staticmethod
    def _failed(hook: Hook, reason: str) -> ApiError | None:
        if hook.spec.get("failurePolicy") == "Ignore":
            log.warning("Failed calling webhook, failing open %s: %s", hook.name, reason)
            return None
        log.warning("Failed calling webhook, failing closed %s: %s", hook.name, reason)
        return call_failure(hook.name, reason)


def review_request(attrs: Attributes, uid: str) -> Object:
    """The AdmissionRequest for `attrs` (no conversion: the request kind is the kind served)."""
    rt = attrs.rt
    group, version, kind_name = attrs.kind or (rt.group, rt.version, rt.kind)
    kind = {"group": group, "version": version, "kind": kind_name}
    resource = {"group": rt.group, "version": rt.version, "resource": rt.plural}
    request: Object = {
        "uid": uid, "kind": kind, "resource": resource, "requestKind": kind, "requestResource": resource,
        "name": attrs.name, "namespace": attrs.namespace, "operation": attrs.operation, "userInfo": attrs.user,
        "object": attrs.obj, "oldObject": attrs.old, "dryRun": attrs.dry_run, "options": attrs.options,
    }
    if attrs.subresource:
        request["subResource"] = request["requestSubResource"] = attrs.subresource
    for key in ("name", "namespace"):
        if not request[key]:
            del request[key]  # omitempty, as the API server marshals them
    return request


def _verified(answer: Object, uid: str, api_version: str) -> Object:
    """webhookrequest.VerifyAdmissionResponse: the response is present, for this request, and of
    the AdmissionReview version sent."""
    invalid = "received invalid webhook response: "
    response = answer.get("response")
    if not isinstance(response, dict):
        raise CallFailed(invalid + "webhook response was absent")
    if response.get("uid") != uid:
        raise CallFailed(f'{invalid}expected response.uid="{uid}", got "{response.get("uid") or ""}"')
    if answer.get("apiVersion") != api_version or answer.get("kind") != _REVIEW_KIND:
        raise CallFailed(f"{invalid}expected webhook response of {api_version}, Kind={_REVIEW_KIND}, got "
                         f"{answer.get('apiVersion') or '/'}, Kind={answer.get('kind') or ''}")
    return response
