"""Leader election over a `coordination.k8s.io/v1` Lease: the pure rules.

Two watchers and two controllers run; the one holding its Lease acts, the other waits
(`workers.leader` does the I/O, like client-go's `leaderelection`). Time here is each
process's own monotonic clock, never the record's `renewTime`: a standby counts the lease
duration from the moment *it* saw the record change, so clocks that disagree between machines
cannot make it take a lease that is still being renewed (client-go's `observedTime`).

The watcher's hand-over also lives here: the leader writes into its Lease, at every renewal,
the per-kind resourceVersions its view had reached when every Instance's summary from that
view was delivered (`delivered`); a standby that took over sends an Instance's summary only
if something it saw about that Instance is newer than that mark (`already_delivered`), or if the
old leader was holding back that Instance's progress (`held_text`, `held_keys`): a held
Instance was not told what its mark covers, and only it is resent for that.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime

from planning.pod_summary import InstanceKey

HELD_TEXT_LIMIT = 32 * 1024
"""Most characters of held Instances a Lease carries (annotations total at most 256 KiB)."""
MAX_HELD_SPAN = 100_000
"""Longest index range `held_keys` reads: more Instances than a component has."""


@dataclass(frozen=True)
class LeaseRecord:
    """The fields of a Lease's spec that the election reads and writes."""

    holder: str = ""
    """`holderIdentity`; empty when released or never held."""
    lease_seconds: float = 0.0
    """`leaseDurationSeconds`: how long the holder's claim lasts without a renewal."""
    acquire_time: datetime | None = None
    renew_time: datetime | None = None
    transitions: int = 0
    """`leaseTransitions`: how many times the holder changed."""


def may_take(identity: str, record: LeaseRecord | None, observed_at: float, now: float) -> bool:
    """Whether `identity` may write itself into the Lease at local time `now`.

    `observed_at` is the local time this process first saw `record` as it is now (its
    resourceVersion); a record nobody renewed for its `lease_seconds` since then is expired.
    """
    if record is None or not record.holder or record.holder == identity:
        # No Lease yet, released on a graceful stop, or ours to renew.
        return True
    return now >= observed_at + record.lease_seconds


def expires_at(record: LeaseRecord, observed_at: float) -> float:
    """Local time from which another process may take `record` (when the standby next tries)."""
    return observed_at + record.lease_seconds


def claimed(identity: str, record: LeaseRecord | None, wall_now: datetime, lease_seconds: float) -> LeaseRecord:
    """The record `identity` writes to acquire or renew: `acquireTime` and `leaseTransitions`
    change only when the holder does."""
    if record is not None and record.holder == identity:
        return replace(record, lease_seconds=lease_seconds, renew_time=wall_now)
    transitions = 0 if record is None else record.transitions + (1 if record.holder else 0)
    return LeaseRecord(identity, lease_seconds, wall_now, wall_now, transitions)


def released(record: LeaseRecord, wall_now: datetime) -> LeaseRecord:
    """The record a leader writes on a graceful stop, so the standby need not wait out the lease.
    client-go's `ReleaseOnCancel`: no holder and a one-second duration."""
    return replace(record, holder="", lease_seconds=1, renew_time=wall_now)


def still_leading(last_renewed_at: float, now: float, renew_deadline_seconds: float) -> bool:
    """A leader that has not renewed within its renew deadline stops acting at once: the deadline
    is shorter than the lease, so it has stopped before any standby may take over."""
    return now < last_renewed_at + renew_deadline_seconds


def _version(value: str) -> int | None:
    return int(value) if value.isdigit() else None


def already_delivered(changed: Mapping[str, str], delivered: Mapping[str, str]) -> bool:
    """Whether the summary built from the changes in `changed` (kind -> resourceVersion of the
    newest event of that kind that touched the Instance) was delivered by a leader whose Lease
    says it had delivered everything up to `delivered` (kind -> resourceVersion).

    Each kind's watch stream is ordered by resourceVersion, so an Instance none of whose changes
    is newer than the mark of its kind looked to the old leader exactly as it looks now. A kind
    without a mark, or versions that are not numbers, cannot be compared: sending again is
    the safe side (a summary is the whole state, so a repeat changes nothing).
    """
    for kind, version in changed.items():
        mine, theirs = _version(version), _version(delivered.get(kind, ""))
        if mine is None or theirs is None or mine > theirs:
            return False
    return True


def held_text(held: Iterable[InstanceKey], limit: int = HELD_TEXT_LIMIT) -> tuple[str, set[InstanceKey]]:
    """The held Instances as the Lease carries them, and those left out to stay within `limit`
    characters (whose changes the caller keeps out of its mark instead).

    One entry per component, its indexes as ranges: `ns/isvc/component:0-3,7;ns/other/engine:2`
    (names are DNS labels: no `/`, `:`, `;` or `,`). A fleet update holding thousands of
    Instances of one service takes a few characters.
    """
    by_component: dict[tuple[str, str, str], list[int]] = {}
    for namespace, isvc, component, index in held:
        by_component.setdefault((namespace, isvc, component), []).append(index)
    entries: list[str] = []
    left_out: set[InstanceKey] = set()
    length = 0
    for component_key, indexes in sorted(by_component.items()):
        entry = "/".join(component_key) + ":" + _ranges(sorted(set(indexes)))
        if length + len(entry) + 1 > limit:
            left_out.update((*component_key, index) for index in indexes)
            continue
        entries.append(entry)
        length += len(entry) + 1
    return ";".join(entries), left_out


def held_keys(text: str) -> set[InstanceKey]:
    """The Instances `held_text` wrote. Raises ValueError on text it did not write."""
    keys: set[InstanceKey] = set()
    for entry in filter(None, text.split(";")):
        component, _, ranges = entry.rpartition(":")
        parts = component.split("/")
        if len(parts) != 3 or not all(parts) or not ranges:
            raise ValueError(f"not a held entry: {entry!r}")
        namespace, isvc, name = parts
        for span in ranges.split(","):
            first, _, last = span.partition("-")
            start, end = int(first), int(last or first)
            if start < 0 or end < start or end - start > MAX_HELD_SPAN:
                raise ValueError(f"not an index range: {span!r}")
            keys.update((namespace, isvc, name, index) for index in range(start, end + 1))
    return keys


def _ranges(indexes: list[int]) -> str:
    """Sorted distinct indexes as `0-3,7`."""
    spans: list[str] = []
    start = previous = indexes[0]
    for index in [*indexes[1:], None]:
        if index is not None and index == previous + 1:
            previous = index
            continue
        spans.append(str(start) if start == previous else f"{start}-{previous}")
        if index is not None:
            start = previous = index
    return ",".join(spans)
