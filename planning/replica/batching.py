"""Pod batching (spec reference §14): how many Instances a pass may start, or drain and delete.

Two budgets, per component, in pods: `scaleUpPodBatchSize` (missing pods started per pass) and
`scaleDownPodBatchSize` (pod-equivalent cost of drains and deletes in flight, for scale-down
and for the InferenceReplica's deletion alike). The rules, the same for both:

- whole Instances only: an Instance costs its pods, never a part of them;
- in order: stop at the first Instance that does not fit, later ones wait for the next pass
  (admitting a smaller one behind it would reorder the keep order scale-down follows);
- an Instance larger than the whole budget proceeds alone, or it would never go;
- deletion work already in flight counts first (it resumes before a new batch is admitted);
  its cost per Instance is its live and Terminating pods, or 1 when only cleanup remains
  (the PodGroup, the headless Service) once its pods are gone;
- None (the key absent): unbounded. Zero or negative is refused by name, like OME refuses
  to start on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")

DEFAULT_POD_BATCH_SIZE = 100
"""The chart's value of both batch sizes."""

BATCH_SIZE_KEYS = {
    "scale_up_pod_batch_size": "lifecycle.scaleUpPodBatchSize",
    "scale_down_pod_batch_size": "lifecycle.scaleDownPodBatchSize",
}
"""The chart key of each setting, for the refusal's wording."""


def check_pod_batch_size(key: str, value: int | None) -> None:
    """Raise `ValueError` naming `key` for a zero or negative batch size (None: unbounded)."""
    if value is not None and value <= 0:
        raise ValueError(
            f"{key} must be a positive number of pods, got {value}; set it to at least 1 "
            f"(the chart uses {DEFAULT_POD_BATCH_SIZE}) or leave it unset for no limit"
        )


@dataclass(frozen=True)
class Candidate:
    """An Instance a pass could start or remove, and what it costs in pods."""

    index: int
    pods: int


@dataclass(frozen=True)
class Wave:
    """What one pass admits of its candidates under the budget, and the figures of the log line."""

    admitted: tuple[int, ...]
    deferred: tuple[int, ...]
    pod_budget: int | None
    active_pod_cost: int = 0
    active_instances: int = 0
    oversized: bool = False
    """The one admitted Instance is larger than the whole budget."""


def deletion_cost(live_and_terminating_pods: int) -> int:
    """An Instance's cost while it is deleted: its pods, or 1 once only cleanup remains."""
    return max(live_and_terminating_pods, 1)


def admit(candidates: Sequence[Candidate], budget: int | None, active: Sequence[Candidate] = ()) -> Wave:
    """The candidates, in their order, that fit in `budget` beside the `active` work."""
    active_cost = sum(item.pods for item in active)
    if budget is None:
        return Wave(tuple(c.index for c in candidates), (), None, active_cost, len(active))
    admitted: list[int] = []
    spent = active_cost
    oversized = False
    for candidate in candidates:
        if spent + candidate.pods <= budget:
            admitted.append(candidate.index)
            spent += candidate.pods
            continue
        if spent == 0 and candidate.pods > budget:
            # Nothing else in flight and it would never fit: it goes, alone.
            admitted.append(candidate.index)
            oversized = True
        break
    deferred = tuple(c.index for c in candidates if c.index not in admitted)
    return Wave(tuple(admitted), deferred, budget, active_cost, len(active), oversized)


def within_room(room: int, creates: Sequence[T], surges: Sequence[T]) -> tuple[Sequence[T], Sequence[T]]:
    """The starts of a pass that fit the `room` a run has left for starts
    (`workflows.replica.children.CHILDREN_PER_RUN`): new Instances first, then gang surges,
    each in plan order; what does not fit is planned again by the next run."""
    room = max(0, room)
    return creates[:room], surges[: max(0, room - len(creates))]
