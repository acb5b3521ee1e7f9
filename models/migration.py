"""A migration request and what becomes of it (spec reference §13).

A request asks to move one Instance of an OMENative component off the node it runs on,
replacement first. OME carries it in the annotation `ome.io/migration-request-v1-<uuid>`
as JSON (`schemaVersion`, `component`, `instance`, `from_node`, `hint_target_nodes`,
`reason`, `requested_at`, `requested_by`); here the same JSON is the input of the
InferenceService's `migrate` signal and Update, and of a `Drain`'s migrations.

Public API:
- `request_problems(raw) -> list[str]`: what is wrong with a request as JSON, each naming
  the field, the value and what it must be; empty when it is well formed. Admission of the
  annotation and the `migrate` Update say the same.
- `parse_request(raw) -> MigrationRequest`: the request, or `ValueError` whose message
  starts `migration request` and lists the problems.
- `MigrationPhase`: `Accepted` -> `SurgePending` -> `SurgeReady` -> `Draining` ->
  `Completed`, or `Failed`; `Relocated` records an automatic relocation.
- `MigrationProgress`: where one migration stands, as the InferenceReplica reports it.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

MAX_HINT_TARGET_NODES = 8
"""`hint_target_nodes` holds at most this many names (OME's CLI cap)."""
REQUEST_SCHEMA_VERSION = "v1"
MIGRATION_COMPONENTS = ("engine", "decoder", "router")


class MigrationPhase(StrEnum):
    ACCEPTED = "Accepted"
    SURGE_PENDING = "SurgePending"
    SURGE_READY = "SurgeReady"
    DRAINING = "Draining"
    COMPLETED = "Completed"
    FAILED = "Failed"
    RELOCATED = "Relocated"

    @property
    def terminal(self) -> bool:
        return self in (MigrationPhase.COMPLETED, MigrationPhase.FAILED, MigrationPhase.RELOCATED)


class MigrationRequest(BaseModel):
    """The request as OME's annotation holds it (its JSON keys, as written)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    schema_version: str = Field(default=REQUEST_SCHEMA_VERSION, alias="schemaVersion")
    component: str
    instance: int
    from_node: str
    hint_target_nodes: list[str] = Field(default_factory=list)
    reason: str = ""
    requested_at: datetime | None = None
    requested_by: str = ""
    uuid: str | None = None
    """Our addition: the request's ID when it arrives without an annotation key (the
    `migrate` Update, a drain). None: one is assigned when it is accepted."""

    def wire(self) -> dict[str, Any]:
        """The request as JSON, keys as OME writes them."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


def request_problems(raw: Any) -> list[str]:
    """What is wrong with `raw` as a request; empty when it is well formed."""
    if not isinstance(raw, dict):
        return [f"must be a JSON object, got {type(raw).__name__}"]
    problems: list[str] = []
    # The keys as OME writes them; `schema_version` (the Python name) is read too.
    known = {field.alias or name for name, field in MigrationRequest.model_fields.items()}
    unknown = sorted(set(raw) - known - {"schema_version"})
    if unknown:
        problems.append(f"unknown field(s) {', '.join(unknown)}; the fields are {', '.join(sorted(known))}")
    version = raw.get("schemaVersion", raw.get("schema_version", REQUEST_SCHEMA_VERSION))
    if version != REQUEST_SCHEMA_VERSION:
        problems.append(f'schemaVersion must be "v1", got {version!r}')
    if raw.get("component") not in MIGRATION_COMPONENTS:
        problems.append(f"component must be router, engine or decoder, got {raw.get('component')!r}")
    instance = raw.get("instance")
    if not isinstance(instance, int) or isinstance(instance, bool) or instance < 0:
        problems.append(f"instance must be a non-negative index, got {instance!r}")
    node = raw.get("from_node")
    if not isinstance(node, str) or not node:
        problems.append(f"from_node must name the node the Instance runs on, got {node!r}")
    hints = raw.get("hint_target_nodes")
    if hints is not None and (
        not isinstance(hints, list)
        or len(hints) > MAX_HINT_TARGET_NODES
        or not all(isinstance(h, str) and h for h in hints)
    ):
        problems.append(
            f"hint_target_nodes must be a list of at most {MAX_HINT_TARGET_NODES} node names, got {hints!r}"
        )
    for text_field in ("reason", "requested_by", "uuid"):
        value = raw.get(text_field)
        if value is not None and not isinstance(value, str):
            problems.append(f"{text_field} must be a string, got {value!r}")
    if raw.get("requested_at") is not None and not _rfc3339(raw["requested_at"]):
        problems.append(f"requested_at must be an RFC 3339 time, got {raw['requested_at']!r}")
    return problems


def _rfc3339(value: Any) -> bool:
    """A time as Go's `time.Time` reads it from JSON: a string with a date, a time and an offset."""
    if not isinstance(value, str):
        return False
    try:
        parsed = MigrationRequest.model_validate(
            {"component": "engine", "instance": 0, "from_node": "n", "requested_at": value}
        ).requested_at
    except ValueError:
        return False
    return parsed is not None and parsed.tzinfo is not None and "T" in value.upper()


def parse_request(raw: Any) -> MigrationRequest:
    """The request in `raw`, or `ValueError('migration request: ...')` naming every problem."""
    problems = request_problems(raw)
    if problems:
        raise ValueError(f"migration request: {'; '.join(problems)}")
    # A null reads as absent, as Go's JSON decoding leaves the field at its zero value.
    return MigrationRequest.model_validate({key: value for key, value in raw.items() if value is not None})


class MigrationAudit(BaseModel):
    """`lifecycle.audit` caps (§13): all three set and above zero, else unconfigured."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_in_flight_migrations: int = Field(default=3, gt=0)
    """Chart 3; OME reads it and it has no effect (one migration per component runs)."""
    max_migrations_per_window: int = Field(default=10, gt=0)
    window_seconds: float = Field(default=3600.0, gt=0)
    """Also how long an ended migration stays listed (and in the audit's window)."""


MIGRATION_SETTINGS = "settings.migration"
"""Activity: the worker's `MigrationSettingsResult` (its configured audit caps)."""
RECORD_MIGRATION_AUDIT = "kube.record_migration_audit"
"""Activity: write one migration's row into `<isvc>-ome-migration-audit` (`history.json`)."""
AUDIT_HISTORY_LIMIT = 200
"""Ended migrations `history.json` keeps (the newest); active ones are always kept."""


class MigrationSettingsResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    audit: MigrationAudit | None = None
    """None: the worker has no audit caps configured; migrations wait in `Accepted`."""


class AuditRowInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    namespace: str
    isvc: str
    isvc_uid: str | None = None
    """Owner of the ConfigMap, so deleting the InferenceService removes it."""
    row: dict[str, Any]
    """The migration's row (`MigrationProgress` as JSON); replaces the row of the same uuid."""


class AuditRowResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    config_map: str
    rows: int
    """Rows `history.json` holds after the write."""


class MigrationProgress(BaseModel):
    """Where one migration stands: the InferenceReplica's report to its `Migration` workflow,
    and that workflow's `status` query and result."""

    model_config = ConfigDict(extra="forbid")

    uuid: str
    component: str
    instance: int
    from_node: str
    phase: MigrationPhase
    message: str = ""
    """The wait in `Accepted`, `migrated to instance=<n>`, or the failure message."""
    reason: str | None = None
    """The failure's reason code (`RateLimited`, `MigrationExpired`, ...); None unless Failed."""
    surge_instance: int | None = None
    surge_nodes: list[str] = Field(default_factory=list)
    revision: str | None = None
    """The ControllerRevision the replacement runs."""
    accepted_at: datetime | None = None
    deadline: datetime | None = None
    ended_at: datetime | None = None


def merge_audit_rows(rows: list[dict[str, Any]], row: dict[str, Any], limit: int = AUDIT_HISTORY_LIMIT) -> list[dict[str, Any]]:
    """`history.json` after writing `row`: it replaces the row of its uuid (else is added);
    the newest `limit` ended rows are kept, and every active one."""
    merged = [existing for existing in rows if existing.get("uuid") != row.get("uuid")] + [row]

    def ended(entry: dict[str, Any]) -> bool:
        return entry.get("phase") in {p.value for p in MigrationPhase if p.terminal}

    finished = [entry for entry in merged if ended(entry)]
    dropped = {id(entry) for entry in finished[: max(0, len(finished) - limit)]}
    return [entry for entry in merged if id(entry) not in dropped]
