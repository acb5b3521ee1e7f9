"""How often the InferenceReplica rewrites its status and reports to its InferenceService.

Every Instance report changes the counts, so a large component coming up or rolling out
would rewrite its whole status (one row per Instance) and signal its parent once per
report: O(N) bytes per pass, O(N^2) over a bring-up, and all of it in the workflows'
histories. Status writes are therefore paced by the component's size: a small component
writes on every change (what tests and users of a handful of Instances expect), a large
one at most every `interval_for(n)` while only counts move. A change a user waits for,
a condition's status or reason, the phase shown in the UI, or the end of the
InferenceReplica, is never held back.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from models.inferencereplica import Condition

PACED_FROM = 20
"""Components with fewer Instances write every change."""
SECONDS_PER_INSTANCE = 0.005
"""200 Instances: at most one write a second while only counts change."""
LONGEST = timedelta(seconds=10)


def digest(value: object) -> str:
    """A short fingerprint of a JSON-able value: what workflow state keeps to spot a change."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:32]


def interval_for(instances: int) -> timedelta:
    """The shortest time between two count-only status writes of a component of `instances`."""
    if instances < PACED_FROM:
        return timedelta(0)
    return min(LONGEST, timedelta(seconds=instances * SECONDS_PER_INSTANCE))


def condition_key(conditions: Sequence[Condition]) -> tuple[tuple[str, str, str], ...]:
    """What of the conditions a waiting user reacts to: type, status, reason."""
    return tuple(sorted((c.type, str(c.status), c.reason) for c in conditions))


@dataclass(frozen=True)
class PublishDecision:
    write: bool
    """Write the status and report now."""
    wake_at: datetime | None = None
    """A held-back write is due then; the workflow must look again at that moment."""


def decide_publish(
    *,
    changed: bool,
    urgent: bool,
    last_written_at: datetime | None,
    instances: int,
    now: datetime,
) -> PublishDecision:
    """Whether a pass writes its status now, and if not, when the held-back write is due.

    `changed`: the status differs from the last one written; `urgent`: a condition's
    status or reason, or the phase, differs from the last one written (or the
    InferenceReplica is going away).
    """
    if not changed:
        return PublishDecision(write=False)
    if urgent or last_written_at is None:
        return PublishDecision(write=True)
    due = last_written_at + interval_for(instances)
    if now >= due:
        return PublishDecision(write=True)
    return PublishDecision(write=False, wake_at=due)
