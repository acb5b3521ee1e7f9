"""`omectl get migrations`: spec reference §13, `kubectl ome migration status`:
`SUBJECT/COMP STATUS DETAIL`, STATUS `<phase>/<Active|Terminal|Invalid>/<Current|Stale|Unobserved>`.

The rows are the InferenceReplica workflows' `status.migrations` (requests, and automatic
relocations as `Relocated`); SUBJECT is the request's uuid."""

from __future__ import annotations

from collections.abc import Sequence

from models.inferencereplica import MigrationRecord
from workers.omectl.views.irep import ACTIVE_MIGRATION_PHASES
from workers.omectl.views.table import NONE, Table, table

HEADERS = ("SUBJECT/COMP", "STATUS", "DETAIL")
TERMINAL_PHASES = frozenset({"Completed", "Failed", "Relocated"})
EMPTY_ROW = (NONE, "EMPTY", NONE)


def lifecycle(phase: str) -> str:
    if phase in ACTIVE_MIGRATION_PHASES:
        return "Active"
    if phase in TERMINAL_PHASES:
        return "Terminal"
    return "Invalid"


def detail(record: MigrationRecord) -> str:
    moved = f"instance={record.instance}"
    if record.surge_instance is not None:
        moved += f"->{record.surge_instance}"
    parts = [moved]
    if record.from_node:
        parts.append(f"from={record.from_node}")
    if record.message:
        parts.append(record.message)
    return " ".join(parts)


def rows(component: str, records: Sequence[MigrationRecord], freshness: str) -> list[tuple[str, ...]]:
    return [
        (f"{record.uuid}/{component}", f"{record.phase}/{lifecycle(record.phase)}/{freshness}", detail(record))
        for record in records
    ]


def migrations_table(components: Sequence[tuple[str, Sequence[MigrationRecord], str]]) -> Table:
    """`components`: (component, its records, `Current` / `Stale` / `Unobserved`)."""
    found = [row for component, records, freshness in components for row in rows(component, records, freshness)]
    return table(HEADERS, found or [EMPTY_ROW])
