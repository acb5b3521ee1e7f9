"""Server-side apply and field ownership (`metadata.managedFields`, FieldsV1).

Every write records which manager set which fields. An apply (`application/apply-patch+yaml`)
merges the manager's configuration into the object, removes fields the manager applied before
and no longer applies (unless someone else owns them too), and answers 409 with
FieldManagerConflict causes when it would change a field another manager owns, unless `force`.
"""

from __future__ import annotations

import json
from typing import Any

from kubesim.errors import ApiError
from kubesim.patch import _merge_key, merge_patch, strategic_merge_patch
from kubesim.timing import timestamp

Path = tuple[str, ...]
Object = dict[str, Any]
_TRACKED_META = ("labels", "annotations", "finalizers", "ownerReferences")
_MISSING = object()


def _flatten(value: Any, parent: str, field: str, prefix: Path, out: dict[Path, Any]) -> None:
    if isinstance(value, dict) and value:
        for key, child in value.items():
            _flatten(child, field, key, prefix + (f"f:{key}",), out)
        return
    if isinstance(value, list) and value:
        if field == "finalizers":
            for item in value:
                out[prefix + (f"v:{json.dumps(item)}",)] = item
            return
        key = _merge_key(parent, field, value)
        if key and all(isinstance(i, dict) and key in i for i in value):
            for item in value:
                item_prefix = prefix + (f"k:{json.dumps({key: item[key]}, separators=(',', ':'))}",)
                out[item_prefix + (".",)] = None
                for k, child in item.items():
                    _flatten(child, field, k, item_prefix + (f"f:{k}",), out)
            return
    out[prefix] = value


def field_values(obj: Object, subresource: str = "") -> dict[Path, Any]:
    """Leaf paths of the fields a manager can own, with their values."""
    out: dict[Path, Any] = {}
    meta = obj.get("metadata") or {}
    for key in _TRACKED_META:
        if key in meta:
            _flatten(meta[key], "metadata", key, ("f:metadata", f"f:{key}"), out)
    for key, value in obj.items():
        if key in ("apiVersion", "kind", "metadata"):
            continue
        if (key == "status") != (subresource == "status"):
            continue
        _flatten(value, "", key, (f"f:{key}",), out)
    return out


def to_fields_v1(paths: set[Path]) -> dict[str, Any]:
    root: dict[str, Any] = {}
    for path in sorted(paths):
        node = root
        for part in path:
            node = node.setdefault(part, {})
    return root


def from_fields_v1(fields: dict[str, Any], prefix: Path = ()) -> set[Path]:
    out: set[Path] = set()
    for key, child in fields.items():
        if child:
            out |= from_fields_v1(child, prefix + (key,))
        else:
            out.add(prefix + (key,))
    return out


def _entries(obj: Object) -> list[Object]:
    return list((obj.get("metadata") or {}).get("managedFields") or [])


def _set_entry(entries: list[Object], manager: str, operation: str, api_version: str,
               subresource: str, paths: set[Path], fields: dict[str, Any] | None = None) -> list[Object]:
    """`entries` with the manager's entry for (operation, subresource) set to `paths`, last;
    `fields` is their FieldsV1 when the caller already has it (the entry's own, unchanged)."""
    kept = [e for e in entries if not (e.get("manager") == manager and e.get("operation") == operation
                                       and e.get("subresource", "") == subresource)]
    if paths:
        entry: Object = {"manager": manager, "operation": operation, "apiVersion": api_version,
                         "time": timestamp(), "fieldsType": "FieldsV1",
                         "fieldsV1": fields if fields is not None else to_fields_v1(paths)}
        if subresource:
            entry["subresource"] = subresource
        kept.append(entry)
    return kept


def _strip(entries: list[Object], paths: set[Path], keep_manager: tuple[str, str] | None = None) -> list[Object]:
    out = []
    for e in entries:
        if keep_manager and (e.get("manager"), e.get("operation")) == keep_manager:
            out.append(e)
            continue
        had = from_fields_v1(e.get("fieldsV1") or {})
        owned = had - paths
        if not owned:
            continue  # it owns nothing any more: the entry goes
        out.append(e if owned == had else {**e, "fieldsV1": to_fields_v1(owned)})
    return out


def track_update(old: Object | None, new: Object, manager: str, subresource: str = "") -> None:
    """Give `manager` (operation Update) the fields this write changed, taking them from others."""
    old_values = field_values(old, subresource) if old else {}
    new_values = field_values(new, subresource)
    changed = {p for p, v in new_values.items() if old_values.get(p, _MISSING) != v}
    removed = set(old_values) - set(new_values)
    entries = _entries(old) if old else []
    entries = _strip(entries, changed | removed)
    mine = next((e for e in entries if e.get("manager") == manager and e.get("operation") == "Update"
                 and e.get("subresource", "") == subresource), None)
    had = from_fields_v1(mine.get("fieldsV1") or {}) if mine else set()
    owned = (had | changed) & set(new_values)
    same = mine.get("fieldsV1") if mine is not None and owned == had else None
    entries = _set_entry(entries, manager, "Update", new.get("apiVersion", ""), subresource, owned, same)
    new["metadata"]["managedFields"] = entries


def _remove_path(obj: Any, path: Path) -> None:
    node = obj
    for i, part in enumerate(path):
        last = i == len(path) - 1
        if part.startswith("f:") and isinstance(node, dict):
            name = part[2:]
            if last:
                node.pop(name, None)
                return
            node = node.get(name)
        elif part.startswith("k:") and isinstance(node, list):
            key = json.loads(part[2:])
            match = next((item for item in node if all(item.get(k) == v for k, v in key.items())), None)
            if match is None:
                return
            if i + 1 < len(path) and path[i + 1] == ".":
                node.remove(match)
                return
            node = match
        elif part.startswith("v:") and isinstance(node, list):
            value = json.loads(part[2:])
            if value in node:
                node.remove(value)
            return
        else:
            return
        if node is None:
            return


def _manager_label(entry: Object) -> str:
    """A conflicting manager as the API server names it: quoted, plus "using <apiVersion>" for
    managers that wrote through updates (as kubectl's client-side apply does)."""
    label = f'"{entry.get("manager", "")}"'
    if entry.get("subresource"):
        label += f' with subresource "{entry["subresource"]}"'
    if entry.get("operation") == "Update":
        label += f" using {entry.get('apiVersion', '')}"
    return label


def server_side_apply(current: Object | None, config: Object, manager: str, force: bool,
                      builtin: bool, subresource: str = "") -> Object:
    """The object after `manager` applies `config`; 409 on conflicts unless forced."""
    if not manager:
        raise ApiError(400, "PATCH with application/apply-patch+yaml requires the fieldManager query parameter")
    if not isinstance(config, dict) or not config.get("apiVersion") or not config.get("kind"):
        raise ApiError(400, "an apply configuration must set apiVersion and kind")
    applied = field_values(config, subresource)
    if current is None:
        obj: Object = json.loads(json.dumps(config))
        obj.setdefault("metadata", {})["managedFields"] = _set_entry(
            [], manager, "Apply", config["apiVersion"], subresource, set(applied))
        return obj
    current_values = field_values(current, subresource)
    entries = _entries(current)
    conflicts: list[tuple[str, Path]] = []
    for e in entries:
        if e.get("manager") == manager or e.get("subresource", "") != subresource:
            continue
        for path in from_fields_v1(e.get("fieldsV1") or {}):
            if path in applied and current_values.get(path, _MISSING) != applied[path]:
                conflicts.append((_manager_label(e), path))
    if conflicts and not force:
        causes = [{"type": "FieldManagerConflict", "message": f"conflict with {m}",
                   "field": "." + ".".join(p[2:] if p.startswith("f:") else p for p in path)} for m, path in conflicts]
        plural = "" if len(conflicts) == 1 else "s"
        raise ApiError(409, f"Apply failed with {len(conflicts)} conflict{plural}: "
                       + "\n".join(f'{c["message"]}: {c["field"]}' for c in causes),
                       details={"causes": causes})
    previous = next((e for e in entries if e.get("manager") == manager and e.get("operation") == "Apply"
                     and e.get("subresource", "") == subresource), None)
    previously_applied = from_fields_v1(previous.get("fieldsV1") or {}) if previous else set()
    patch_body = {k: v for k, v in config.items() if k not in ("apiVersion", "kind")}
    merged: Object = (strategic_merge_patch(current, patch_body) if builtin
                      else merge_patch(current, patch_body))
    entries = _strip(entries, {p for _, p in conflicts} if force else set())
    others: set[Path] = set()
    for e in entries:
        if e.get("manager") != manager:
            others |= from_fields_v1(e.get("fieldsV1") or {})
    # Whole list items first (their "." path), then fields deepest first: removing an item's
    # key field before the item would leave the item unfindable.
    for path in sorted(previously_applied - set(applied) - others, key=lambda p: (p[-1] != ".", -len(p), p)):
        _remove_path(merged, path)
    merged["metadata"]["managedFields"] = _set_entry(
        entries, manager, "Apply", config["apiVersion"], subresource, set(applied))
    return merged
