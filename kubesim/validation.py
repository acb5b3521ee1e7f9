"""Validation on create and update: object names, the fields each kind requires, and the
immutability rules (pod spec, selectors, CRD names) a real API server enforces with 422 Invalid.
"""

from __future__ import annotations

import re
from typing import Any

from kubesim.errors import ApiError, invalid
from kubesim.quota import QUOTAS, hard_causes
from kubesim.resources import ResourceType
from kubesim.webhook_config import KEY as WEBHOOK_CONFIG_KEY
from kubesim.webhook_config import configuration_causes

Object = dict[str, Any]
Cause = tuple[str, str, str]

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
# Kinds whose names must be DNS labels rather than DNS subdomains.
_LABEL_NAMED = {("", "namespaces"), ("", "services")}


def _name_causes(rt: ResourceType, name: str) -> list[Cause]:
    if not name:
        return [("metadata.name", "FieldValueRequired", "Required value: name or generateName is required")]
    if (rt.group, rt.plural) in _LABEL_NAMED:
        if len(name) > 63 or not _DNS_LABEL.match(name):
            return [("metadata.name", "FieldValueInvalid",
                     f"Invalid value: \"{name}\": a lowercase RFC 1123 label must consist of lower case "
                     "alphanumeric characters or '-', and must start and end with an alphanumeric character")]
    elif rt.plural != "events" and (len(name) > 253 or not _DNS_SUBDOMAIN.match(name)):
        return [("metadata.name", "FieldValueInvalid",
                 f"Invalid value: \"{name}\": a lowercase RFC 1123 subdomain must consist of lower case "
                 "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character")]
    return []


def _label_causes(meta: Object) -> list[Cause]:
    causes: list[Cause] = []
    for key, value in (meta.get("labels") or {}).items():
        name = key.rsplit("/", 1)[-1]
        if not _LABEL_NAME.match(name) or len(name) > 63:
            causes.append(("metadata.labels", "FieldValueInvalid", f"Invalid value: \"{key}\": name part must be "
                           "63 characters or less, alphanumeric, '-', '_' or '.'"))
        if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
            causes.append(("metadata.labels", "FieldValueInvalid", f"Invalid value: \"{value}\": a valid label "
                           "value must be 63 characters or less and consist of alphanumerics, '-', '_' or '.'"))
    return causes


def _pod_spec_causes(spec: Object, prefix: str) -> list[Cause]:
    causes: list[Cause] = []
    containers = spec.get("containers") or []
    if not containers:
        causes.append((f"{prefix}.containers", "FieldValueRequired", "Required value"))
    seen: set[str] = set()
    for kind in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(kind) or []):
            path = f"{prefix}.{kind}[{i}]"
            if not c.get("name"):
                causes.append((f"{path}.name", "FieldValueRequired", "Required value"))
            elif c["name"] in seen:
                causes.append((f"{path}.name", "FieldValueDuplicate", f'Duplicate value: "{c["name"]}"'))
            seen.add(c.get("name", ""))
            if not c.get("image"):
                causes.append((f"{path}.image", "FieldValueRequired", "Required value"))
    if spec.get("restartPolicy") not in (None, "Always", "OnFailure", "Never"):
        causes.append((f"{prefix}.restartPolicy", "FieldValueNotSupported",
                       f'Unsupported value: "{spec["restartPolicy"]}": supported values: "Always", "OnFailure", "Never"'))
    return causes


def _workload_causes(obj: Object) -> list[Cause]:
    spec = obj.get("spec") or {}
    causes: list[Cause] = []
    selector = spec.get("selector")
    if not selector:
        return [("spec.selector", "FieldValueRequired", "Required value")]
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        causes.append(("spec.template.metadata.labels", "FieldValueInvalid",
                       f"Invalid value: {labels!r}: `selector` does not match template `labels`"))
    if (spec.get("replicas") or 0) < 0:
        causes.append(("spec.replicas", "FieldValueInvalid", "Invalid value: must be greater than or equal to 0"))
    return causes + _pod_spec_causes((spec.get("template") or {}).get("spec") or {}, "spec.template.spec")


def _kind_causes(rt: ResourceType, obj: Object, old: Object | None = None) -> list[Cause]:
    key = (rt.group, rt.plural)
    if key == WEBHOOK_CONFIG_KEY:
        return configuration_causes(obj, old)
    if key == ("", "pods"):
        return _pod_spec_causes(obj.get("spec") or {}, "spec")
    if key in (("apps", "deployments"), ("apps", "replicasets")):
        return _workload_causes(obj)
    if key == QUOTAS:
        return hard_causes(obj)
    if key == ("", "events") and not obj.get("involvedObject"):
        return [("involvedObject", "FieldValueRequired", "Required value")]
    if key == ("policy", "poddisruptionbudgets"):
        spec = obj.get("spec") or {}
        if "minAvailable" in spec and "maxUnavailable" in spec:
            return [("spec", "FieldValueInvalid", "Invalid value: minAvailable and maxUnavailable cannot be both set")]
    if key == ("", "services"):
        return [(f"spec.ports[{i}].port", "FieldValueRequired", "Required value")
                for i, p in enumerate((obj.get("spec") or {}).get("ports") or []) if not p.get("port")]
    if key == ("apiextensions.k8s.io", "customresourcedefinitions"):
        spec = obj.get("spec") or {}
        names = spec.get("names") or {}
        causes: list[Cause] = []
        for field in ("plural", "kind"):
            if not names.get(field):
                causes.append((f"spec.names.{field}", "FieldValueRequired", "Required value"))
        expected = f'{names.get("plural")}.{spec.get("group")}'
        if obj["metadata"]["name"] != expected:
            causes.append(("metadata.name", "FieldValueInvalid",
                           f'Invalid value: "{obj["metadata"]["name"]}": must be spec.names.plural+"."+spec.group'))
        if not spec.get("versions"):
            causes.append(("spec.versions", "FieldValueRequired", "Required value: must have exactly one version marked as storage version"))
        return causes
    return []


def validate(rt: ResourceType, obj: Object) -> None:
    meta = obj.get("metadata") or {}
    causes = _name_causes(rt, meta.get("name", "")) + _label_causes(meta) + _kind_causes(rt, obj)
    if causes:
        raise invalid(rt.kind, rt.group, meta.get("name", ""), causes)


# ---- update rules -----------------------------------------------------------------------------

_POD_UPDATE_MESSAGE = (
    "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` "
    "(only additions to existing tolerations),`spec.terminationGracePeriodSeconds` "
    "(allow it to be set to 1 if it was previously negative)"
)


def _mutable_pod_view(spec: Object) -> Object:
    view = {k: v for k, v in spec.items() if k not in ("activeDeadlineSeconds", "tolerations", "schedulingGates",
                                                         "terminationGracePeriodSeconds")}
    for kind in ("containers", "initContainers"):
        if kind in view:
            view[kind] = [{k: v for k, v in c.items() if k != "image"} for c in view[kind]]
    return view


def validate_update(rt: ResourceType, old: Object, new: Object) -> None:
    key = (rt.group, rt.plural)
    name = old["metadata"]["name"]
    causes: list[Cause] = []
    if key == ("", "pods"):
        old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
        # nodeName is set once, through binding, and never changed afterwards.
        if old_spec.get("nodeName") and new_spec.get("nodeName") != old_spec.get("nodeName"):
            causes.append(("spec.nodeName", "FieldValueForbidden", _POD_UPDATE_MESSAGE))
        elif _mutable_pod_view({**old_spec, "nodeName": None}) != _mutable_pod_view({**new_spec, "nodeName": None}):
            causes.append(("spec", "FieldValueForbidden", _POD_UPDATE_MESSAGE))
        old_tolerations = old_spec.get("tolerations") or []
        if any(t not in (new_spec.get("tolerations") or []) for t in old_tolerations):
            causes.append(("spec.tolerations", "FieldValueForbidden", _POD_UPDATE_MESSAGE))
    elif key in (("apps", "deployments"), ("apps", "replicasets")):
        if (old.get("spec") or {}).get("selector") != (new.get("spec") or {}).get("selector"):
            causes.append(("spec.selector", "FieldValueInvalid",
                           f"Invalid value: {new.get('spec', {}).get('selector')!r}: field is immutable"))
    elif key == ("", "services"):
        old_ip, new_ip = (old.get("spec") or {}).get("clusterIP"), (new.get("spec") or {}).get("clusterIP")
        if new_ip and new_ip != old_ip:
            causes.append(("spec.clusterIP", "FieldValueInvalid", f'Invalid value: "{new_ip}": field is immutable'))
    elif key == ("", "resourcequotas"):
        old_scopes, new_scopes = ((obj.get("spec") or {}).get("scopes") for obj in (old, new))
        if set(map(str, old_scopes or [])) != set(map(str, new_scopes or [])):
            # Go's %#v of the new slice: nil when the field is absent, {} when it is empty.
            shown = "(nil)" if new_scopes is None else "{" + ", ".join(f'"{scope}"' for scope in new_scopes) + "}"
            causes.append(("spec.scopes", "FieldValueInvalid",
                           f"Invalid value: []core.ResourceQuotaScope{shown}: field is immutable"))
    elif key == ("apiextensions.k8s.io", "customresourcedefinitions"):
        old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
        if old_spec.get("group") != new_spec.get("group") or old_spec.get("scope") != new_spec.get("scope"):
            causes.append(("spec", "FieldValueInvalid", "Invalid value: group and scope are immutable"))
    if rt.plural in ("configmaps", "secrets") and old.get("immutable") and (
        old.get("data") != new.get("data") or old.get("binaryData") != new.get("binaryData")
    ):
        causes.append(("data", "FieldValueForbidden", "Forbidden: field is immutable when `immutable` is set"))
    old_meta, new_meta = old["metadata"], new["metadata"]
    if old_meta.get("deletionTimestamp"):
        added = set(new_meta.get("finalizers") or []) - set(old_meta.get("finalizers") or [])
        if added:
            raise ApiError(
                422,
                f'{rt.kind} "{name}" is invalid: metadata.finalizers: Forbidden: no new finalizers can be added '
                f"if the object is being deleted, found new finalizers {sorted(added)!r}",
                details={"name": name, "group": rt.group, "kind": rt.kind, "causes": [
                    {"reason": "FieldValueForbidden", "field": "metadata.finalizers",
                     "message": "no new finalizers can be added if the object is being deleted"}]},
            )
    causes += _label_causes(new_meta) + _kind_causes(rt, new, old)
    if causes:
        raise invalid(rt.kind, rt.group, name, causes)
