"""`reset_instances`: rebuild Failed Instances on request (spec reference §12).

The request is what OME's `ome.io/reset-instances` annotation holds: an index, a comma
list of indexes, or `all` (case-sensitive). It is answered once: the named Failed
Instances lose their pods and their preserved operation, and the lifecycle rebuilds them
on the target revision (still waiting for a Backoff's NEXT, a running attempt, a Held
release or a pause). Everything else is skipped with the reason why; a malformed request
resets nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from models.instance import InstancePhase
from planning.replica.facts import InstanceFacts

RESET_ALL = "all"


class ResetRequestError(ValueError):
    """A request with a token that is not a non-negative index; `token` names it."""

    def __init__(self, value: str, token: str) -> None:
        super().__init__(f'"{token}" is not a non-negative instance index')
        self.value = value
        self.token = token


@dataclass(frozen=True)
class ResetRequest:
    everything: bool
    indexes: tuple[int, ...] = ()


def parse_reset_request(value: str) -> ResetRequest:
    """`all`, `3` or `0,2,5` (spaces around commas allowed); `ResetRequestError` otherwise."""
    if value == RESET_ALL:
        return ResetRequest(everything=True)
    indexes: list[int] = []
    for raw in value.split(","):
        token = raw.strip()
        if not token.isdigit() or not token.isascii():
            raise ResetRequestError(value, token)
        index = int(token)
        if index not in indexes:
            indexes.append(index)
    return ResetRequest(everything=False, indexes=tuple(indexes))


@dataclass(frozen=True)
class ResetOutcome:
    reset: tuple[int, ...] = ()
    skipped: tuple[tuple[int, str], ...] = ()
    """(index, why) for each named Instance that is not reset."""
    none_failed: bool = False
    """`all` found no Failed Instance."""


def skip_reason(instance: InstanceFacts | None) -> str | None:
    """Why an Instance is not reset, or None when it is reset."""
    if instance is None:
        return "no such instance"
    if instance.serving:
        return "still serving"
    if instance.phase != InstancePhase.FAILED:
        if instance.operation in ("Update", "Migrate", "Delete"):
            return f"owned by {instance.operation}"
        return f"Phase={instance.phase.value}"
    if instance.operation in ("Migrate", "Delete"):
        return f"owned by {instance.operation}"
    if not instance.has_pods and instance.operation is None:
        return "nothing to reset"
    return None


def plan_reset(request: ResetRequest, instances: Sequence[InstanceFacts]) -> ResetOutcome:
    by_index = {instance.index: instance for instance in instances}
    if request.everything:
        failed = sorted(
            index for index, instance in by_index.items() if instance.phase == InstancePhase.FAILED
        )
        if not failed:
            return ResetOutcome(none_failed=True)
        reset: list[int] = []
        skipped: list[tuple[int, str]] = []
        for index in failed:
            why = skip_reason(by_index[index])
            if why is None:
                reset.append(index)
            else:
                skipped.append((index, why))
        return ResetOutcome(reset=tuple(reset), skipped=tuple(skipped))
    reset_named: list[int] = []
    skipped_named: list[tuple[int, str]] = []
    for index in request.indexes:
        why = skip_reason(by_index.get(index))
        if why is None:
            reset_named.append(index)
        else:
            skipped_named.append((index, why))
    return ResetOutcome(reset=tuple(reset_named), skipped=tuple(skipped_named))
