"""The three PATCH formats: JSON patch (RFC 6902), JSON merge patch (RFC 7386) and Kubernetes
strategic merge patch, whose list merge keys come from the Kubernetes API schema
(`patchMergeKey` / `patchStrategy` tags in k8s.io/api).
"""

from __future__ import annotations

import copy
from typing import Any

from kubesim.errors import ApiError
from kubesim.fastjson import clone

# (parent field, list field) -> merge key. A parent of "*" matches any parent. Lists not listed
# here are atomic: the patch replaces them, as `+listType=atomic` fields do.
_MERGE_KEYS: dict[tuple[str, str], str] = {
    ("*", "containers"): "name",
    ("*", "initContainers"): "name",
    ("*", "ephemeralContainers"): "name",
    ("*", "env"): "name",
    ("*", "volumes"): "name",
    ("*", "volumeMounts"): "mountPath",
    ("*", "volumeDevices"): "devicePath",
    ("*", "imagePullSecrets"): "name",
    ("*", "conditions"): "type",
    ("*", "ownerReferences"): "uid",
    ("*", "hostAliases"): "ip",
    ("*", "resourceClaims"): "name",
    ("*", "topologySpreadConstraints"): "topologyKey",
    ("*", "schedulingGates"): "name",
    ("status", "addresses"): "type",
    ("spec", "ports"): "port",  # Service ports
}
# Primitive lists merged as sets (patchStrategy=merge on a []string).
_MERGED_PRIMITIVE_LISTS = {"finalizers"}


def _merge_key(parent: str, field: str, items: list[Any]) -> str | None:
    if field == "ports":
        # Container ports merge on containerPort, Service ports on port.
        if any(isinstance(i, dict) and "containerPort" in i for i in items):
            return "containerPort"
    return _MERGE_KEYS.get((parent, field)) or _MERGE_KEYS.get(("*", field))


# ---- JSON merge patch -------------------------------------------------------------------------


def _copied(value: Any) -> Any:
    """A patch's value as the result keeps it: a list copied by a JSON round trip (an
    InferenceReplica's status rows are thousands of objects; `copy.deepcopy` took three times
    as long), a scalar as it is (immutable)."""
    return clone(value) if isinstance(value, list) else value


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return _copied(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


# ---- JSON patch -------------------------------------------------------------------------------


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ApiError(422, f"json patch path {path!r} must start with '/'")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _walk(doc: Any, parts: list[str], path: str) -> Any:
    for part in parts:
        if isinstance(doc, dict) and part in doc:
            doc = doc[part]
        elif isinstance(doc, list) and part.isdigit() and int(part) < len(doc):
            doc = doc[int(part)]
        else:
            raise ApiError(422, f"json patch: path {path!r} does not exist (missing {part!r})")
    return doc


def json_patch(doc: Any, operations: Any) -> Any:
    if not isinstance(operations, list):
        raise ApiError(400, "json patch body must be a list of operations")
    doc = copy.deepcopy(doc)
    for op in operations:
        kind, path = op.get("op"), op.get("path", "")
        parts = _pointer(path)
        if kind == "test":
            if _walk(doc, parts, path) != op.get("value"):
                raise ApiError(422, f"json patch test failed at {path!r}: value differs from {op.get('value')!r}")
            continue
        if kind in ("move", "copy"):
            from_parts = _pointer(op.get("from", ""))
            value = copy.deepcopy(_walk(doc, from_parts, op.get("from", "")))
            if kind == "move":
                doc = _remove(doc, from_parts, op.get("from", ""))
            doc = _add(doc, parts, value, path)
        elif kind == "add":
            doc = _add(doc, parts, copy.deepcopy(op.get("value")), path)
        elif kind == "remove":
            doc = _remove(doc, parts, path)
        elif kind == "replace":
            _walk(doc, parts, path)
            doc = _remove(doc, parts, path)
            doc = _add(doc, parts, copy.deepcopy(op.get("value")), path)
        else:
            raise ApiError(400, f"json patch: unknown op {kind!r} (use add, remove, replace, move, copy or test)")
    return doc


def _add(doc: Any, parts: list[str], value: Any, path: str) -> Any:
    if not parts:
        return value
    parent = _walk(doc, parts[:-1], path)
    last = parts[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        elif last.isdigit() and int(last) <= len(parent):
            parent.insert(int(last), value)
        else:
            raise ApiError(422, f"json patch: index {last!r} out of range at {path!r}")
    else:
        raise ApiError(422, f"json patch: {path!r} has no container to add to")
    return doc


def _remove(doc: Any, parts: list[str], path: str) -> Any:
    if not parts:
        return None
    parent = _walk(doc, parts[:-1], path)
    last = parts[-1]
    if isinstance(parent, dict) and last in parent:
        del parent[last]
    elif isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        del parent[int(last)]
    else:
        raise ApiError(422, f"json patch: path {path!r} does not exist")
    return doc


# ---- strategic merge patch --------------------------------------------------------------------


def strategic_merge_patch(target: Any, patch: Any, parent: str = "") -> Any:
    if not isinstance(patch, dict):
        return _copied(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$setElementOrder/") or key == "$retainKeys":
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            result[field] = [v for v in result.get(field) or [] if v not in value]
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list):
            result[key] = _merge_list(result.get(key), value, parent, key)
        elif isinstance(value, dict):
            merged = strategic_merge_patch(result.get(key), value, key)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        else:
            result[key] = value
    return result


def _merge_list(existing: Any, patch: list[Any], parent: str, field: str) -> list[Any]:
    current: list[Any] = list(existing) if isinstance(existing, list) else []
    if field in _MERGED_PRIMITIVE_LISTS:
        return current + [v for v in patch if v not in current]
    if any(isinstance(i, dict) and i.get("$patch") == "replace" for i in patch):
        return [copy.deepcopy(i) for i in patch if not (isinstance(i, dict) and "$patch" in i)]
    key = _merge_key(parent, field, patch + current)
    if key is None or not all(isinstance(i, dict) for i in patch):
        return copy.deepcopy(patch)
    result = list(current)
    for item in patch:
        if key not in item:
            raise ApiError(422, f"strategic merge patch: an item of {field} lacks its merge key {key!r}")
        index = next((n for n, cur in enumerate(result) if isinstance(cur, dict) and cur.get(key) == item[key]), None)
        if item.get("$patch") == "delete":
            if index is not None:
                del result[index]
            continue
        if index is None:
            result.append(strategic_merge_patch({}, item, field))
        else:
            result[index] = strategic_merge_patch(result[index], item, field)
    return result


def apply_patch(content_type: str, target: dict[str, Any], body: Any, builtin: bool) -> dict[str, Any]:
    """Dispatch on the PATCH Content-Type; 415 for unknown types or SMP on custom resources."""
    media = content_type.split(";")[0].strip().lower()
    if media == "application/json-patch+json":
        result = json_patch(target, body)
    elif media == "application/merge-patch+json":
        result = merge_patch(target, body)
    elif media == "application/strategic-merge-patch+json":
        if not builtin:
            raise ApiError(
                415,
                "the body of the request was in an unknown format - accepted media types include: "
                "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
            )
        result = strategic_merge_patch(target, body)
    else:
        raise ApiError(
            415,
            f"the body of the request was in an unknown format {media!r} - accepted media types include: "
            "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, "
            "application/strategic-merge-patch+json",
        )
    if not isinstance(result, dict):
        raise ApiError(422, "the patch did not produce an object")
    return result
