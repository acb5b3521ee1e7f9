"""What a `Drain` is started with, checked before anything is cordoned.

Public API:
- `input_problems(node, timeout) -> list[str]`: every problem, each naming the field, the
  value and the fix; empty when the input is usable.
- `deadline_of(started, timeout) -> datetime | None`: when the drain gives up.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from models.duration import parse_duration
from planning.drain import texts

_NODE_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
NODE_NAME_LIMIT = 253


def input_problems(node: object, timeout: object) -> list[str]:
    problems: list[str] = []
    if not isinstance(node, str) or not node:
        problems.append(texts.node_required(node))
    elif len(node) > NODE_NAME_LIMIT or not _NODE_NAME.fullmatch(node):
        problems.append(texts.node_malformed(node))
    if timeout is not None:
        problem = _timeout_problem(timeout)
        if problem:
            problems.append(texts.timeout_malformed(str(timeout), problem))
    return problems


def _timeout_problem(timeout: object) -> str | None:
    if not isinstance(timeout, str):
        return "is not a string"
    try:
        seconds = parse_duration(timeout)
    except ValueError:
        return "is not a duration"
    return None if seconds > 0 else "is not positive"


def deadline_of(started: datetime, timeout: str | None) -> datetime | None:
    """`started + timeout`; None without a timeout. The timeout was checked at start."""
    if timeout is None:
        return None
    return started + timedelta(seconds=parse_duration(timeout))
