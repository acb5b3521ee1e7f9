"""`omectl get retry-blocks`: spec reference §11, `COMP STATE TARGET ATT NEXT REL REASON`.

STATE `BACKOFF` / `RUNNING` / `HELD`; a TARGET longer than 14 characters shows its first 5, `#`
and a digest of the whole name (not the revision hash, which would read as one); ATT caps at
`99+`; NEXT is `YY-MM-DDThh:mmZ`; REL is `YES` only for a Held block of a current status of a
component not being deleted (`omectl release-held` would release it). No block: one
`-  EMPTY  -  -  -  NO  -` row."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from models.inferencereplica import RetryBlockRow
from workers.omectl.views.table import NONE, Table, table

HEADERS = ("COMP", "STATE", "TARGET", "ATT", "NEXT", "REL", "REASON")
EMPTY_ROW = (NONE, "EMPTY", NONE, NONE, NONE, "NO", NONE)
STATES = {"Backoff": "BACKOFF", "RetryInProgress": "RUNNING", "Held": "HELD"}
TARGET_WIDTH = 14
MAX_ATTEMPTS_SHOWN = 99


@dataclass(frozen=True)
class Blocks:
    """A component's retry blocks, and whether its status can be acted on."""

    component: str
    blocks: Sequence[RetryBlockRow]
    current: bool = True
    """The status is of the spec in force (not stale)."""
    deleting: bool = False


def target(name: str) -> str:
    if len(name) <= TARGET_WIDTH:
        return name
    return f"{name[:5]}#{hashlib.sha256(name.encode()).hexdigest()[:8]}"


def attempts(started: int) -> str:
    return f"{MAX_ATTEMPTS_SHOWN}+" if started > MAX_ATTEMPTS_SHOWN else str(started)


def next_retry(at: datetime | None) -> str:
    if at is None:
        return NONE
    moment = at if at.tzinfo is not None else at.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%y-%m-%dT%H:%MZ")


def releasable(block: RetryBlockRow, of: Blocks) -> bool:
    return block.state == "Held" and of.current and not of.deleting


def rows(of: Blocks) -> list[tuple[str, ...]]:
    return [
        (
            of.component,
            STATES.get(block.state, block.state.upper()),
            target(block.target_revision),
            attempts(block.attempts_started),
            next_retry(block.next_retry_at),
            "YES" if releasable(block, of) else "NO",
            block.reason or NONE,
        )
        for block in of.blocks
    ]


def retry_blocks_table(components: Sequence[Blocks]) -> Table:
    found = [row for of in components for row in rows(of)]
    return table(HEADERS, found or [EMPTY_ROW])
