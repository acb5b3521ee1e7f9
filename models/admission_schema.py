"""Turns a raw manifest into an InferenceService, or into denials with field paths.

What a user passes to `temporal workflow start --input` is a JSON object; anything wrong
with its shape (an unknown or removed field, a wrong type, a bad enum value, a duration
without units) becomes a denial naming the wire path (`spec.engine.minReplicas`), never an
exception.

Public API: `parse_manifest(raw) -> tuple[InferenceService | None, Findings]`,
`wire_path(loc) -> str`.
"""

from __future__ import annotations

import copy
import types
import typing
from typing import Any, Union

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from models.admission_result import Findings
from models.inferenceservice import InferenceService

REMOVED_FIELDS: dict[tuple[str, ...], str] = {
    ("spec", "placement", "capacityFactors"): "spec.routing.capacityFactors",
}


def _unwrap(annotation: Any) -> Any:
    """Strip `Annotated` and `X | None` so the walk sees the container or model type."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
            continue
        if origin in (Union, types.UnionType):
            members = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(members) == 1:
                annotation = members[0]
                continue
        return annotation


def wire_path(loc: tuple[int | str, ...], root: type[BaseModel] = InferenceService) -> str:
    """`('spec', 'routing', 'capacityFactors', 'worker-b')` -> `spec.routing.capacityFactors["worker-b"]`."""
    text = ""
    current: Any = root
    for item in loc:
        current = _unwrap(current)
        origin = typing.get_origin(current)
        if isinstance(current, type) and issubclass(current, BaseModel) and isinstance(item, str):
            field = next(
                (f for name, f in current.model_fields.items() if item in (name, f.alias)), None
            )
            alias = (field.alias or item) if field is not None else item
            text += f".{alias}" if text else alias
            current = field.annotation if field is not None else None
        elif origin is dict:
            text += f'["{item}"]'
            current = typing.get_args(current)[1]
        elif origin is list and isinstance(item, int):
            text += f"[{item}]"
            current = typing.get_args(current)[0]
        elif isinstance(item, int):
            text += f"[{item}]"
        elif current is None:
            text += f".{item}" if text else str(item)
        # Anything else is a pydantic union tag ("int", "str"), not part of the user's path.
    return text


def _reason_for(error_type: str, path: str) -> str:
    if error_type == "invalid_duration":
        return "InvalidDuration"
    if error_type == "extra_forbidden":
        return "UnknownField"
    if ".analysis" in path:
        return "AnalysisInvalid"
    if ".canary" in path:
        return "CanaryInvalid"
    if "capacityFactors" in path or path.startswith("spec.routing"):
        return "InvalidRoutingPolicy"
    if error_type == "invalid_quantity":
        return "InvalidQuantity"
    if error_type == "missing":
        return "FieldRequired"
    return "FieldValueInvalid"


def _describe(error: ErrorDetails, path: str) -> str:
    error_type = error["type"]
    if error_type == "extra_forbidden":
        return (
            f'unknown field "{path}": the InferenceService API has no such field; '
            "remove it or correct its name"
        )
    if error_type == "missing":
        return f"{path} is required; set it"
    if error_type in ("invalid_duration", "invalid_quantity"):
        return f"{path}: {error['msg']}"
    loc = tuple(error.get("loc", ()))
    if loc and loc[-1] in ("int", "str"):
        # A count-or-percentage field: pydantic reports each union member; say what fits.
        return f'{path} must be a count such as 1 or a percentage such as "25%", got {error.get("input")!r}'
    hint = ""
    if path == "spec.deploymentMode" and error.get("input") == "MultiNode":
        hint = '; MultiNode is set only per engine or decoder, with its "ome.io/deploymentMode" annotation'
    return f"{path}: {error['msg']}, got {error.get('input')!r}{hint}"


def _pop_removed_fields(raw: dict[str, Any], findings: Findings) -> None:
    for path, replacement in REMOVED_FIELDS.items():
        parent: Any = raw
        for key in path[:-1]:
            parent = parent.get(key) if isinstance(parent, dict) else None
        if isinstance(parent, dict) and path[-1] in parent:
            del parent[path[-1]]
            dotted = ".".join(path)
            findings.deny(
                "UnknownField",
                dotted,
                f'unknown field "{dotted}": the field was removed; move the map to '
                f"{replacement}, with the same keys and values",
            )


def parse_manifest(raw: Any) -> tuple[InferenceService | None, Findings]:
    """The parsed InferenceService, or None with a denial for every shape error."""
    findings = Findings()
    if isinstance(raw, InferenceService):
        return raw, findings
    if not isinstance(raw, dict):
        findings.deny(
            "InvalidObject", "", f"an InferenceService must be a JSON object, got {type(raw).__name__}"
        )
        return None, findings
    manifest = copy.deepcopy(raw)
    _pop_removed_fields(manifest, findings)
    try:
        isvc = InferenceService.model_validate(manifest)
    except ValidationError as error:
        seen: set[str] = set()
        for item in error.errors():
            path = wire_path(tuple(item["loc"]))
            # A union (count or percentage) reports once per member; one denial is enough.
            if path in seen:
                continue
            seen.add(path)
            findings.deny(_reason_for(item["type"], path), path, _describe(item, path))
        return None, findings
    if findings.denials:
        return None, findings
    return isvc, findings
