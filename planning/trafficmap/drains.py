"""Drains of a workload cluster's traffic (spec reference §20): overrides that hold a home at
weight 0 whatever its capacity, by ID.

Two sources, merged: the control-plane InferenceService's `ome.io/traffic-drain` annotation
(a JSON map `{"<id>": {"cluster": "<wlc>", "reason": "<text>"}}`), and the workflow's own
`drain_cluster` / `undrain_cluster` messages (our `kubectl ome traffic drain`). IDs are
lowercase letters, digits and hyphens. A drain naming no current home is pending and applies
when that cluster serves. A malformed annotation stops the map (§17): `parse_annotation`
raises with the `parse ome.io/traffic-drain: ...` text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict

from planning.trafficmap import texts

ID_PATTERN = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
MAX_ID_LENGTH = 63


class Drain(BaseModel):
    """One override: the home it holds at 0 and why."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    cluster: str
    reason: str = ""


class DrainRow(BaseModel):
    """One result row of a drain or undrain: `override-id  cluster  overrides` (`0 -> 1`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    override_id: str
    cluster: str
    overrides: str


def id_problem(override_id: str) -> str | None:
    """Why an override ID is unusable, or None."""
    if not override_id or len(override_id) > MAX_ID_LENGTH or not ID_PATTERN.match(override_id):
        return (
            f'traffic drain refused: override ID "{override_id}" must be 1-{MAX_ID_LENGTH} lowercase letters, '
            "digits and hyphens, starting and ending with a letter or digit"
        )
    return None


def parse_annotation(text: str | None) -> dict[str, Drain]:
    """The annotation's drains; `ValueError` with the `parse ome.io/traffic-drain: ...` text."""
    if text is None or not text.strip():
        return {}
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"{texts.PARSE_DRAIN_PREFIX}{error.msg} at line {error.lineno} column {error.colno}") from error
    if not isinstance(raw, dict):
        raise ValueError(f"{texts.PARSE_DRAIN_PREFIX}want a JSON object of override IDs, got {type(raw).__name__}")
    drains: dict[str, Drain] = {}
    for override_id, body in raw.items():
        if id_problem(override_id) is not None:
            raise ValueError(
                f'{texts.PARSE_DRAIN_PREFIX}override ID "{override_id}" must be lowercase letters, digits and hyphens'
            )
        if not isinstance(body, dict) or not isinstance(body.get("cluster"), str) or not body["cluster"]:
            raise ValueError(f'{texts.PARSE_DRAIN_PREFIX}override "{override_id}" must name a "cluster"')
        reason = body.get("reason", "")
        unknown = sorted(set(body) - {"cluster", "reason"})
        if not isinstance(reason, str) or unknown:
            raise ValueError(
                f'{texts.PARSE_DRAIN_PREFIX}override "{override_id}" allows only "cluster" and a string "reason"'
            )
        drains[override_id] = Drain(cluster=body["cluster"], reason=reason)
    return drains


def merged(signalled: Mapping[str, Drain], annotated: Mapping[str, Drain]) -> dict[str, Drain]:
    """Every drain in force, by ID (an ID is in one source only: a second is refused)."""
    return {**dict(annotated), **dict(signalled)}


def count_on(drains: Mapping[str, Drain], cluster: str) -> int:
    return sum(1 for drain in drains.values() if drain.cluster == cluster)


def drain_refusal(in_force: Mapping[str, Drain], override_id: str, cluster: str, eligible: bool,
                  malformed: bool = False) -> str | None:
    """Why `drain_cluster` is refused (§20's texts), or None. `malformed`: the service's
    `ome.io/traffic-drain` annotation does not parse (the map is stopped on it)."""
    if not eligible:
        return texts.NOT_ELIGIBLE
    if not cluster:
        return texts.DRAIN_NEEDS_CLUSTER
    if malformed:
        return texts.ANNOTATION_MALFORMED
    problem = id_problem(override_id)
    if problem is not None:
        return problem
    if override_id in in_force:
        return texts.DRAIN_ID_EXISTS
    return None


def undrain_refusal(signalled: Mapping[str, Drain], annotated: Mapping[str, Drain], override_id: str,
                    eligible: bool, malformed: bool = False) -> str | None:
    """Why `undrain_cluster` is refused, or None. A drain set by the annotation is removed by
    editing the annotation: this workflow never writes the InferenceService. `malformed`: as
    for `drain_refusal`."""
    if not eligible:
        return texts.NOT_ELIGIBLE
    if malformed:
        return texts.ANNOTATION_MALFORMED
    if override_id not in signalled:
        if override_id in annotated:
            return (
                f'traffic undrain refused: override ID "{override_id}" is set by the {texts.TRAFFIC_DRAIN_ANNOTATION} '
                "annotation; remove it there"
            )
        return texts.UNDRAIN_ID_MISSING
    return None


def add(signalled: Mapping[str, Drain], in_force: Mapping[str, Drain], override_id: str,
        drain: Drain) -> tuple[dict[str, Drain], DrainRow]:
    """The signalled drains with this one added, and its result row (`0 -> 1`)."""
    before = count_on(in_force, drain.cluster)
    row = DrainRow(override_id=override_id, cluster=drain.cluster, overrides=f"{before} -> {before + 1}")
    return {**dict(signalled), override_id: drain}, row


def remove(signalled: Mapping[str, Drain], in_force: Mapping[str, Drain],
           override_id: str) -> tuple[dict[str, Drain], DrainRow]:
    """The signalled drains without this one, and its result row (`1 -> 0`)."""
    drain = signalled[override_id]
    before = count_on(in_force, drain.cluster)
    row = DrainRow(override_id=override_id, cluster=drain.cluster, overrides=f"{before} -> {before - 1}")
    return {k: v for k, v in signalled.items() if k != override_id}, row


def override_condition(in_force: Mapping[str, Drain], homes: set[str]) -> tuple[Literal["True", "False"], str, str]:
    """`OverrideActive` (status, reason, message): pending while a drain names no current home."""
    if not in_force:
        return "False", texts.NO_OVERRIDES, "no traffic drain is set"
    pending = sorted(f"{i} ({d.cluster})" for i, d in in_force.items() if d.cluster not in homes)
    if pending:
        return (
            "False",
            texts.OVERRIDES_PENDING,
            f"{len(pending)} drain(s) name no current home and apply when that cluster serves: {', '.join(pending)}",
        )
    clusters = sorted({d.cluster for d in in_force.values()})
    return (
        "True",
        texts.OVERRIDES_APPLIED,
        f"{len(in_force)} drain(s) hold {', '.join(clusters)} at weight 0",
    )
