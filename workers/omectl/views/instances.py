"""`omectl get instances`: spec reference §9, `kubectl ome instance list`:
`COMP IDX/INC PHASE PODS REVS AOF EVIDENCE`.

PODS is `serving/available/total`; REVS `running>target` while an Instance moves, `>target`
before it runs anything, `running` at rest, each revision cut to its first and last 4
characters when long; AOF the flags A (admitted: it runs a revision), O (an operation is in
flight), F (a failure is recorded), `-` where a flag is off; EVIDENCE `OK`, or why a row is
not to be trusted."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from models.inferencereplica import InferenceReplicaStatus, InstanceRow
from workers.omectl.views.table import NONE, Table, table

HEADERS = ("COMP", "IDX/INC", "PHASE", "PODS", "REVS", "AOF", "EVIDENCE")
SHORT_REVISION = 10
"""A revision longer than this shows as its first and last 4 characters."""
EMPTY_ROW = (NONE, NONE, NONE, NONE, NONE, NONE, "EMPTY")


def short(revision: str) -> str:
    if len(revision) <= SHORT_REVISION:
        return revision
    return f"{revision[:4]}..{revision[-4:]}"


def revisions(instance: InstanceRow) -> str:
    running, target = instance.running_revision, instance.target_revision
    if running is None and target is None:
        return NONE
    if running is None:
        return f">{short(target or '')}"
    if target is None or target == running:
        return short(running)
    return f"{short(running)}>{short(target)}"


def flags(instance: InstanceRow) -> str:
    return "".join(
        (
            "A" if instance.running_revision is not None else "-",
            "O" if instance.operation is not None else "-",
            "F" if instance.last_failure is not None else "-",
        )
    )


def pods(instance: InstanceRow) -> str:
    counts = instance.pods
    return f"{counts.serving}/{counts.available}/{counts.total}"


def evidence(status: InferenceReplicaStatus, instance: InstanceRow, generation: int | None) -> str:
    """`BAD:DUP-IDX` for an index reported twice, `STALE:<observed>/<generation>` for a status
    older than the spec in force, `NOT-OBSERVED` before the first status, else `OK`."""
    duplicates = Counter(row.index for row in status.instance_statuses)
    if duplicates[instance.index] > 1:
        return "BAD:DUP-IDX"
    observed = status.observed_generation
    if observed is None:
        return "NOT-OBSERVED"
    if generation is not None and observed < generation:
        return f"STALE:{observed}/{generation}"
    return "OK"


def instance_rows(
    component: str, status: InferenceReplicaStatus, generation: int | None = None
) -> list[tuple[str, ...]]:
    return [
        (
            component,
            f"{instance.index}/{instance.incarnation}",
            str(instance.phase),
            pods(instance),
            revisions(instance),
            flags(instance),
            evidence(status, instance, generation),
        )
        for instance in sorted(status.instance_statuses, key=lambda row: row.index)
    ]


def instances_table(components: Sequence[tuple[str, InferenceReplicaStatus, int | None]]) -> Table:
    """One table over the components, in the order given; `EMPTY` when none has an Instance."""
    rows = [row for component, status, generation in components for row in instance_rows(component, status, generation)]
    return table(HEADERS, rows or [EMPTY_ROW])
