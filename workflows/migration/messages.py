"""The `Migration` workflow's contract: its input, its messages, and what it answers.

Started by the InferenceService's `migrate` Update or signal, or by a `Drain`, with the ID
`migration/{ns}/{isvc}-{component}-{index}/{uuid}`. It hands the request to the component's
InferenceReplica (`irep/{ns}/{isvc}-{component}`, signal `migrate`), which carries it out
replacement first and reports each phase back (`migration_changed`); the run ends with the
last report, `Completed` or `Failed`, as its result.

Workflows import this module inside `workflow.unsafe.imports_passed_through()`.
"""

from __future__ import annotations

from models.base import MessageModel
from models.migration import MigrationProgress, MigrationRequest

# --- message names (`temporal workflow signal --workflow-id migration/... --name ...`) ----
SIGNAL_CANCEL = "cancel"
"""Stop the migration: the replacement goes, the source stays (ends `Failed`, `MigrationCancelled`)."""
SIGNAL_MIGRATION_CHANGED = "migration_changed"
"""From the InferenceReplica: a `MigrationProgress`."""
QUERY_STATUS = "status"


class MigrationInput(MessageModel):
    """What a `Migration` run starts from."""

    namespace: str
    isvc: str
    isvc_uid: str | None = None
    """Owner of the audit ConfigMap it writes."""
    request: MigrationRequest
    """The request, its `uuid` set."""
    home: str | None = None
    """The workload cluster of a multi-cluster home (its InferenceReplica's ID ends in `@{home}`)."""

    @property
    def uuid(self) -> str:
        assert self.request.uuid is not None
        return self.request.uuid


__all__ = ["MigrationInput", "MigrationProgress", "MigrationRequest"]
