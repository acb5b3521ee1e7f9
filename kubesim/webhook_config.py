"""The `admissionregistration.k8s.io/v1` ValidatingWebhookConfiguration kind: the defaults the API server fills in, the validation it answers 422 with, and each webhook read
back with those defaults (a configuration stored before a default existed still reads whole).

Messages follow kube-apiserver's `pkg/apis/admissionregistration/validation` so that
`kubectl apply` of a bad configuration prints what a real cluster prints.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

Object = dict[str, Any]
Cause = tuple[str, str, str]

GROUP = "admissionregistration.k8s.io"
KEY = (GROUP, "validatingwebhookconfigurations")  # served as a built-in type (kubesim.resources)
# Webhooks are never called for writes to the configurations that register webhooks (a bad one
# could otherwise lock itself in place).
EXEMPT_PLURALS = ("validatingwebhookconfigurations", "mutatingwebhookconfigurations",
                  "validatingadmissionpolicies", "validatingadmissionpolicybindings")

_FAILURE_POLICIES = ("Fail", "Ignore")
_MATCH_POLICIES = ("Equivalent", "Exact")
_NO_SIDE_EFFECTS = ("None", "NoneOnDryRun")
_ALL_SIDE_EFFECTS = ("None", "NoneOnDryRun", "Some", "Unknown")
_OPERATIONS = ("*", "CONNECT", "CREATE", "DELETE", "UPDATE")
_SCOPES = ("*", "Cluster", "Namespaced")
_REVIEW_VERSIONS = ("v1", "v1beta1")
_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def default_webhook(hook: Object) -> Object:
    """One webhook with the v1 defaults set (in place; returned for convenience)."""
    hook.setdefault("failurePolicy", "Fail")
    hook.setdefault("matchPolicy", "Equivalent")
    hook.setdefault("timeoutSeconds", 10)
    if hook.get("namespaceSelector") is None:
        hook["namespaceSelector"] = {}
    if hook.get("objectSelector") is None:
        hook["objectSelector"] = {}
    for rule in hook.get("rules") or []:
        rule.setdefault("scope", "*")
    service = (hook.get("clientConfig") or {}).get("service")
    if isinstance(service, dict):
        service.setdefault("port", 443)
    return hook


def default_configuration(obj: Object) -> None:
    """The defaulter run on create (registered in `kubesim.defaults.DEFAULTERS`)."""
    for hook in obj.get("webhooks") or []:
        if isinstance(hook, dict):
            default_webhook(hook)


def webhooks(obj: Object) -> list[Object]:
    """The configuration's webhooks, each a defaulted copy."""
    return [default_webhook(dict(hook)) for hook in obj.get("webhooks") or [] if isinstance(hook, dict)]


def _quoted(values: tuple[str, ...]) -> str:
    return ", ".join(f'"{v}"' for v in values)


def _not_supported(path: str, value: Any, allowed: tuple[str, ...]) -> Cause:
    return (path, "FieldValueNotSupported", f'Unsupported value: "{value}": supported values: {_quoted(allowed)}')


def _go_list(values: list[Any]) -> str:
    return "[]string{" + ", ".join(f'"{v}"' for v in values) + "}"


def _wildcard_mixed(values: list[Any]) -> bool:
    return len(values) > 1 and "*" in values


def _rule_causes(rule: Object, path: str) -> list[Cause]:
    causes: list[Cause] = []
    operations = rule.get("operations") or []
    if not operations:
        causes.append((f"{path}.operations", "FieldValueRequired", "Required value"))
    if _wildcard_mixed(operations):
        causes.append((f"{path}.operations", "FieldValueInvalid", f"Invalid value: {_go_list(operations)}: "
                       "if '*' is present, must not specify other operations"))
    causes += [_not_supported(f"{path}.operations[{i}]", op, _OPERATIONS)
               for i, op in enumerate(operations) if op not in _OPERATIONS]
    for field, what in (("apiGroups", "API groups"), ("apiVersions", "API versions")):
        values = rule.get(field)
        if not values:
            causes.append((f"{path}.{field}", "FieldValueRequired", "Required value"))
        if _wildcard_mixed(values or []):
            causes.append((f"{path}.{field}", "FieldValueInvalid", f"Invalid value: {_go_list(values or [])}: "
                           f"if '*' is present, must not specify other {what}"))
    resources = rule.get("resources") or []
    if not resources:
        causes.append((f"{path}.resources", "FieldValueRequired", "Required value"))
    if len(resources) > 1 and "*/*" in resources:
        causes.append((f"{path}.resources", "FieldValueInvalid", f"Invalid value: {_go_list(resources)}: "
                       "if '*/*' is present, must not specify other resources"))
    if "*" in resources and any(r != "*" and "/" not in r for r in resources):
        causes.append((f"{path}.resources", "FieldValueInvalid", f"Invalid value: {_go_list(resources)}: "
                       "if '*' is present, must not specify other resources without subresources"))
    if rule.get("scope") is not None and rule["scope"] not in _SCOPES:
        causes.append(_not_supported(f"{path}.scope", rule["scope"], _SCOPES))
    return causes


def _client_causes(config: Object, path: str) -> list[Cause]:
    url, service = config.get("url"), config.get("service")
    if (url is None) == (service is None):
        return [(path, "FieldValueRequired", "Required value: exactly one of url or service is required")]
    if url is not None:
        parts = urlsplit(url)
        if parts.scheme != "https":
            return [(f"{path}.url", "FieldValueInvalid", f'Invalid value: "{url}": \'https\' is the only allowed '
                     "URL scheme")]
        if not parts.hostname:
            return [(f"{path}.url", "FieldValueInvalid", f'Invalid value: "{url}": host must be specified')]
        return []
    causes: list[Cause] = []
    for field in ("name", "namespace"):
        if not (service or {}).get(field):
            causes.append((f"{path}.service.{field}", "FieldValueRequired", f"Required value: service {field} is "
                           "required"))
    port = (service or {}).get("port", 443)
    if not isinstance(port, int) or not 1 <= port <= 65535:
        causes.append((f"{path}.service.port", "FieldValueInvalid", f"Invalid value: {port}: port is not valid: "
                       "must be between 1 and 65535, inclusive"))
    return causes


def _selector_causes(selector: Any, path: str) -> list[Cause]:
    causes: list[Cause] = []
    for i, expr in enumerate((selector or {}).get("matchExpressions") or []):
        op = expr.get("operator")
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            causes.append(_not_supported(f"{path}.matchExpressions[{i}].operator", op,
                                         ("DoesNotExist", "Exists", "In", "NotIn")))
        elif op in ("In", "NotIn") and not expr.get("values"):
            causes.append((f"{path}.matchExpressions[{i}].values", "FieldValueRequired", "Required value: must be "
                           "specified when `operator` is 'In' or 'NotIn'"))
    return causes


def _webhook_causes(hook: Object, path: str, side_effects: tuple[str, ...]) -> list[Cause]:
    causes: list[Cause] = []
    name = hook.get("name") or ""
    if not name:
        causes.append((f"{path}.name", "FieldValueRequired", "Required value"))
    elif not _DNS_SUBDOMAIN.match(name) or name.count(".") < 2:
        causes.append((f"{path}.name", "FieldValueInvalid", f'Invalid value: "{name}": should be a domain with at '
                       "least three segments separated by dots"))
    for i, rule in enumerate(hook.get("rules") or []):
        causes += _rule_causes(rule, f"{path}.rules[{i}]")
    for field, allowed in (("failurePolicy", _FAILURE_POLICIES), ("matchPolicy", _MATCH_POLICIES)):
        if hook.get(field) is not None and hook[field] not in allowed:
            causes.append(_not_supported(f"{path}.{field}", hook[field], allowed))
    effects = hook.get("sideEffects")
    if effects is None:
        causes.append((f"{path}.sideEffects", "FieldValueRequired",
                       f"Required value: must specify one of {', '.join(side_effects)}"))
    elif effects not in side_effects:
        causes.append(_not_supported(f"{path}.sideEffects", effects, side_effects))
    timeout = hook.get("timeoutSeconds")
    if timeout is not None and (not isinstance(timeout, int) or not 1 <= timeout <= 30):
        causes.append((f"{path}.timeoutSeconds", "FieldValueInvalid", f"Invalid value: {timeout}: the timeout value "
                       "must be between 1 and 30 seconds"))
    for field in ("namespaceSelector", "objectSelector"):
        causes += _selector_causes(hook.get(field), f"{path}.{field}")
    causes += _client_causes(hook.get("clientConfig") or {}, f"{path}.clientConfig")
    return causes


def _review_version_causes(versions: Any, path: str) -> list[Cause]:
    if not versions:
        return [(path, "FieldValueRequired", f"Required value: must specify one of {', '.join(_REVIEW_VERSIONS)}")]
    causes: list[Cause] = []
    seen: set[str] = set()
    for i, version in enumerate(versions):
        if version in seen:
            causes.append((f"{path}[{i}]", "FieldValueInvalid", f'Invalid value: "{version}": duplicate version'))
            continue
        seen.add(version)
        if not isinstance(version, str) or not _DNS1035.match(version):
            causes.append((f"{path}[{i}]", "FieldValueInvalid", f'Invalid value: "{version}": a DNS-1035 label '
                           "must consist of lower case alphanumeric characters or '-', start with an alphabetic "
                           "character, and end with an alphanumeric character"))
    if not seen.intersection(_REVIEW_VERSIONS):
        causes.append((path, "FieldValueInvalid", f"Invalid value: {_go_list(list(versions))}: must include at "
                       f"least one of {', '.join(_REVIEW_VERSIONS)}"))
    return causes


def configuration_causes(obj: Object, old: Object | None = None) -> list[Cause]:
    """Validation of a configuration on create, or on update against `old`: an update may keep a
    side-effect class a legacy configuration already had, as the API server allows."""
    strict = old is None or all((h or {}).get("sideEffects") in _NO_SIDE_EFFECTS for h in old.get("webhooks") or [])
    side_effects = _NO_SIDE_EFFECTS if strict else _ALL_SIDE_EFFECTS
    causes: list[Cause] = []
    names: set[str] = set()
    for i, hook in enumerate(obj.get("webhooks") or []):
        path = f"webhooks[{i}]"
        if not isinstance(hook, dict):
            causes.append((path, "FieldValueInvalid", "Invalid value: must be an object"))
            continue
        causes += _webhook_causes(hook, path, side_effects)
        causes += _review_version_causes(hook.get("admissionReviewVersions"), f"{path}.admissionReviewVersions")
        name = hook.get("name")
        if name and name in names:
            causes.append((f"{path}.name", "FieldValueDuplicate", f'Duplicate value: "{name}"'))
        names.add(name or "")
    return causes
