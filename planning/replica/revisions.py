"""Revisions of a component's pod template: current, update, and a bounded history.

Each distinct pod template hash is a revision named `{isvc}-{component}-rev-{hash}`
(`models.resolution.revision_name`, as a ControllerRevision would be named). The update
revision is the template the spec asks for now; the current revision is the one the
Instances served on before it, and becomes the update revision once the rollout completes
(spec reference §7). Going back to an earlier template reuses its revision with a new
sequence number, like Kubernetes does, so history shows the revision coming back.

History keeps every live revision (current, update, any an Instance still runs, and any a
rollout run names to roll back to) and at most `revisionHistoryLimit` others, newest first:
the chart's 10, overridden by the InferenceService's `ome.io/revision-history-limit`
annotation; with neither, all are kept.

While a rollout run rolls the component back (`planning.replica.rollback`), the update
revision shown is the one it returns to (`rolling_back_to`), and completing that rollback
makes it the current one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

REVISION_HISTORY_ANNOTATION = "ome.io/revision-history-limit"
CHART_REVISION_HISTORY_LIMIT = 10


@dataclass(frozen=True)
class RevisionRecord:
    name: str
    hash: str
    number: int
    """Sequence number: higher is newer; a revision that comes back gets a new one."""


@dataclass(frozen=True)
class RevisionState:
    current: str | None = None
    update: str | None = None
    history: tuple[RevisionRecord, ...] = ()
    """Every kept revision, oldest first."""

    def record(self, name: str | None) -> RevisionRecord | None:
        for record in self.history:
            if record.name == name:
                return record
        return None

    @property
    def update_hash(self) -> str | None:
        record = self.record(self.update)
        return record.hash if record is not None else None

    @property
    def rolling_out(self) -> bool:
        return self.update is not None and self.current != self.update


def observe_template(state: RevisionState, name: str, template_hash: str) -> RevisionState:
    """The state after the spec asks for the template `template_hash`, named `name`.

    The first template is both current and update; a later new one becomes the update
    revision while the current one keeps serving until the rollout completes.
    """
    if state.update == name:
        return state
    next_number = max((record.number for record in state.history), default=0) + 1
    others = tuple(record for record in state.history if record.name != name)
    history = (*others, RevisionRecord(name=name, hash=template_hash, number=next_number))
    current = state.current if state.current is not None else name
    return RevisionState(current=current, update=name, history=history)


def complete_rollout(state: RevisionState, to: str | None = None) -> RevisionState:
    """Every Instance serves the update revision (or `to`, a rollback's): it becomes the current one."""
    served = to if to is not None else state.update
    if served is None or state.current == served:
        return state
    return replace(state, current=served)


def rolling_back_to(state: RevisionState, name: str | None) -> RevisionState:
    """The revisions as status shows them while rolling back to `name`: it is the update revision."""
    if name is None or state.record(name) is None:
        return state
    return replace(state, update=name)


def history_limit(annotation: str | None, cluster_default: int | None) -> tuple[int | None, str | None]:
    """(limit, warning): the annotation wins when it is a whole number >= 0.

    A malformed annotation falls back to the cluster default, with a warning naming it.
    """
    if annotation is None:
        return cluster_default, None
    text = annotation.strip()
    if text.isdigit() and text.isascii():
        return int(text), None
    return cluster_default, (
        f'metadata.annotations["{REVISION_HISTORY_ANNOTATION}"] must be a whole number >= 0, '
        f"got {annotation!r}; using {cluster_default if cluster_default is not None else 'no limit'}"
    )


def trim_history(
    state: RevisionState, running: Iterable[str], limit: int | None, keep: Iterable[str] = ()
) -> RevisionState:
    """Drop the oldest non-live revisions beyond `limit` (None keeps them all); `keep` names
    revisions that count as live (a rollout run's stable revision)."""
    if limit is None:
        return state
    live = {state.current, state.update, *running, *keep}
    not_live = sorted(
        (record for record in state.history if record.name not in live),
        key=lambda record: record.number,
    )
    dropped = {record.name for record in not_live[: max(0, len(not_live) - max(0, limit))]}
    if not dropped:
        return state
    return replace(state, history=tuple(record for record in state.history if record.name not in dropped))
