"""A migration's row in the audit ConfigMap `<isvc>-ome-migration-audit` (`history.json`)."""

from __future__ import annotations

from typing import Any

from models.migration import MigrationProgress, MigrationRequest


def audit_row(progress: MigrationProgress, request: MigrationRequest) -> dict[str, Any]:
    """Where the migration stands, with who asked for it and why (OME's `history` EVID AUDIT)."""
    row = progress.model_dump(mode="json", exclude_none=True)
    row["requested_by"] = request.requested_by
    row["requested_reason"] = request.reason
    if request.hint_target_nodes:
        row["hint_target_nodes"] = list(request.hint_target_nodes)
    return row
