"""Label selectors (equality- and set-based, string and structured forms) and field selectors.

The string grammar follows k8s.io/apimachinery/pkg/labels: `a=b`, `a==b`, `a!=b`,
`a in (x,y)`, `a notin (x)`, `a`, `!a`; field selectors accept `=`, `==` and `!=` on the field
labels the real API server supports for each kind, and answer 400 for any other label.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from kubesim.errors import ApiError

Requirement = tuple[str, str, frozenset[str]]  # (key, operator, values)
Matcher = Callable[[dict[str, Any]], bool]

_TOKEN = re.compile(r"\s*(!=|==|=|!|\(|\)|,|[^\s!=(),]+)")


def parse_label_selector(text: str) -> list[Requirement]:
    """Parse the string form into requirements; a malformed selector is a 400."""
    tokens = [t for t in _TOKEN.findall(text or "") if t]
    reqs: list[Requirement] = []
    i = 0

    def bad(why: str) -> ApiError:
        return ApiError(400, f"unable to parse requirement: labelSelector {text!r}: {why}")

    while i < len(tokens):
        tok = tokens[i]
        if tok == ",":
            i += 1
            continue
        if tok == "!":
            if i + 1 >= len(tokens):
                raise bad("'!' must be followed by a key")
            reqs.append((tokens[i + 1], "DoesNotExist", frozenset()))
            i += 2
            continue
        key = tok
        op = tokens[i + 1] if i + 1 < len(tokens) else ","
        if op in ("=", "==", "!="):
            if i + 2 >= len(tokens) or tokens[i + 2] in (",", "(", ")"):
                value = ""
                i += 2
            else:
                value = tokens[i + 2]
                i += 3
            reqs.append((key, "NotIn" if op == "!=" else "In", frozenset([value])))
        elif op.lower() in ("in", "notin"):
            if i + 2 >= len(tokens) or tokens[i + 2] != "(":
                raise bad(f"expected '(' after {op}")
            j = i + 3
            values: set[str] = set()
            while j < len(tokens) and tokens[j] != ")":
                if tokens[j] != ",":
                    values.add(tokens[j])
                j += 1
            if j >= len(tokens):
                raise bad("missing ')'")
            reqs.append((key, "In" if op.lower() == "in" else "NotIn", frozenset(values)))
            i = j + 1
        elif op == ",":
            reqs.append((key, "Exists", frozenset()))
            i += 1
        else:
            raise bad(f"unexpected {op!r} after key {key!r}")
    return reqs


def requirements_from_selector(selector: dict[str, Any] | None) -> list[Requirement]:
    """Structured LabelSelector (matchLabels + matchExpressions) as requirements."""
    if not selector:
        return []
    reqs: list[Requirement] = [(k, "In", frozenset([v])) for k, v in (selector.get("matchLabels") or {}).items()]
    for expr in selector.get("matchExpressions") or []:
        reqs.append((expr["key"], expr["operator"], frozenset(expr.get("values") or [])))
    return reqs


def labels_match(reqs: list[Requirement], labels: dict[str, str] | None) -> bool:
    labels = labels or {}
    for key, op, values in reqs:
        present = key in labels
        if op == "In" and not (present and labels[key] in values):
            return False
        if op == "NotIn" and present and labels[key] in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
    return True


def selector_matches(selector: dict[str, Any] | None, labels: dict[str, str] | None) -> bool:
    """Structured selector match; an empty selector matches everything (as for PDBs)."""
    return labels_match(requirements_from_selector(selector), labels)


def selector_to_string(selector: dict[str, Any] | None) -> str:
    """The string form a Scale's status.selector and a kubectl user would see."""
    parts = [f"{k}={v}" for k, v in sorted((selector or {}).get("matchLabels", {}).items())]
    for expr in (selector or {}).get("matchExpressions") or []:
        op, key, values = expr["operator"], expr["key"], ",".join(sorted(expr.get("values") or []))
        parts.append({"In": f"{key} in ({values})", "NotIn": f"{key} notin ({values})",
                      "Exists": key, "DoesNotExist": f"!{key}"}[op])
    return ",".join(parts)


# ---- field selectors --------------------------------------------------------------------------

_COMMON_FIELDS = ("metadata.name", "metadata.namespace")
_FIELDS_BY_PLURAL: dict[str, tuple[str, ...]] = {
    "pods": (
        "spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
        "spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName",
    ),
    "events": (
        "involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
        "involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath",
        "reason", "reportingComponent", "source", "type",
    ),
    "secrets": ("type",),
    "nodes": ("spec.unschedulable",),
    "namespaces": ("status.phase",),
    "replicasets": ("status.replicas",),
}


def _field_value(obj: dict[str, Any], path: str) -> str:
    if path == "source":
        return str(obj.get("source", {}).get("component", ""))
    node: Any = obj
    for part in path.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    if node is None:
        return ""
    if isinstance(node, bool):
        return "true" if node else "false"
    return str(node)


def parse_field_selector(text: str, plural: str, builtin: bool = True) -> Matcher:
    """A predicate for the field selector, or 400 naming the unsupported label."""
    terms: list[tuple[str, bool, str]] = []
    for raw in filter(None, (t.strip() for t in (text or "").split(","))):
        m = re.fullmatch(r"([^!=]+)(!=|==|=)(.*)", raw)
        if not m:
            raise ApiError(400, f"invalid field selector {raw!r}: expected field=value or field!=value")
        field, op, value = m.group(1).strip(), m.group(2), m.group(3).strip()
        allowed = _COMMON_FIELDS + (_FIELDS_BY_PLURAL.get(plural, ()) if builtin else ())
        if field not in allowed:
            raise ApiError(400, f'field label not supported: {field} (supported for {plural}: {", ".join(allowed)})')
        terms.append((field, op != "!=", value))

    def match(obj: dict[str, Any]) -> bool:
        return all((_field_value(obj, f) == v) == eq for f, eq, v in terms)

    return match
