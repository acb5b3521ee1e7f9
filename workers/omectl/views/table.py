"""The table shape every `omectl get` prints (kubectl's: upper-case headers, columns padded
with spaces, no borders) and the AGE column's rendering."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

NONE = "-"
"""What a cell shows when the workflow did not report the value."""


@dataclass(frozen=True)
class Table:
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]

    def render(self) -> str:
        """Columns separated by three spaces, the last one unpadded (kubectl's printer)."""
        lines = [self.headers, *self.rows]
        widths = [max(len(line[i]) for line in lines) for i in range(len(self.headers))]
        return "\n".join(
            "   ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
            for line in lines
        )


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> Table:
    return Table(tuple(headers), tuple(tuple(row) for row in rows))


def age(since: datetime | None, now: datetime) -> str:
    """kubectl's AGE: `45s`, `12m`, `3h`, `5d`; `-` when unknown."""
    if since is None:
        return NONE
    seconds = max(0, int((now - since) / timedelta(seconds=1)))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 120 * 60:
        return f"{seconds // 60}m"
    if seconds < 48 * 3600:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


def count(value: int | None) -> str:
    return NONE if value is None else str(value)
