"""`omectl get irep`: spec reference §8, `kubectl get irep` (`NAME COMPONENT DESIRED CURRENT
READY AVAILABLE AGE`) with `kubectl ome get ir`'s PARENT and LIFECYCLE, and its wide columns."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from models.inferencereplica import Condition, InferenceReplicaStatus
from workers.omectl.views.table import NONE, Table, age, count, table

HEADERS = ("NAME", "COMPONENT", "DESIRED", "CURRENT", "READY", "AVAILABLE", "PARENT", "LIFECYCLE", "AGE")
WIDE_HEADERS = (
    "REASON",
    "SERVING",
    "UPDATED",
    "ENCODING",
    "CURRENT-REVISION",
    "UPDATE-REVISION",
    "MIGRATIONS",
    "PAUSED",
    "COORDINATION",
    "LIFECYCLE-FRESHNESS",
)
ACTIVE_MIGRATION_PHASES = frozenset({"Accepted", "SurgePending", "SurgeReady", "Draining"})
"""Migration phases still moving an Instance (§13); `Completed`, `Failed`, `Relocated` have ended."""


@dataclass(frozen=True)
class Replica:
    """One InferenceReplica as its workflow answers: the `status` query, and the `spec` query's
    desired count and pause (None when the workflow did not say)."""

    name: str
    parent: str
    component: str
    status: InferenceReplicaStatus
    desired: int | None = None
    paused: bool | None = None
    started: datetime | None = None
    generation: int | None = None
    """The object generation the workflow last wrote (its spec), to judge `observedGeneration`."""


def condition(conditions: Sequence[Condition], kind: str) -> Condition | None:
    return next((c for c in conditions if c.type == kind), None)


def lifecycle(status: InferenceReplicaStatus) -> str:
    """`RolloutStalled=True` while that holds, else `Ready=<status>` (§8), `-` before either."""
    stalled = condition(status.conditions, "RolloutStalled")
    if stalled is not None and stalled.status == "True":
        return "RolloutStalled=True"
    ready = condition(status.conditions, "Ready")
    return f"Ready={ready.status}" if ready is not None else NONE


def freshness(replica: Replica) -> str:
    """`Current` when the status is of the spec in force, `Stale:<observed>/<generation>` when
    older, `Unobserved` before the first status."""
    observed = replica.status.observed_generation
    if observed is None:
        return "Unobserved"
    if replica.generation is not None and observed < replica.generation:
        return f"Stale:{observed}/{replica.generation}"
    return "Current"


def active_migrations(status: InferenceReplicaStatus) -> int:
    return sum(1 for record in status.migrations if record.phase in ACTIVE_MIGRATION_PHASES)


def row(replica: Replica, now: datetime, wide: bool = False) -> tuple[str, ...]:
    status = replica.status
    cells = (
        replica.name,
        replica.component,
        count(replica.desired),
        str(status.replicas),
        str(status.ready_replicas),
        str(status.available_replicas),
        replica.parent,
        lifecycle(status),
        age(replica.started, now),
    )
    if not wide:
        return cells
    ready = condition(status.conditions, "Ready")
    paused = NONE if replica.paused is None else str(replica.paused).lower()
    return (
        *cells,
        (ready.reason or NONE) if ready is not None else NONE,
        str(status.serving_replicas),
        str(status.updated_replicas),
        "DenseV1",  # the workflow answers one row per Instance (`instanceStatuses`)
        status.current_revision or NONE,
        status.update_revision or NONE,
        str(active_migrations(status)),
        paused,
        NONE,  # COORDINATION: always `-` in OME's CLI (§8)
        freshness(replica),
    )


def irep_table(replicas: Sequence[Replica], now: datetime, wide: bool = False) -> Table:
    headers = HEADERS + WIDE_HEADERS if wide else HEADERS
    return table(headers, [row(replica, now, wide) for replica in replicas])
