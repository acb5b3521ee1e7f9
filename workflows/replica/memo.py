"""What the InferenceReplica computes for each of its Instances in every pass, kept between passes
while the Instance's report is the same object.

Each pass condenses every report into the facts its rules read (`facts_from_status`) and, when it
publishes, into the row `status.instanceStatuses` shows (`instance_row`): a pass of a 200-Instance
component built both 200 times over, a quarter of its workflow task and of every replay of its
history (after a continue-as-new refused, a worker restart). A report is never changed in place: a
new `instance_changed` signal replaces it (`InferenceReplicaWorkflow.instance_changed`), and an
overlay (a requested update, a counted deletion) makes a copy. So the same object gives the same
result, and a result is kept by the object's identity, the object held with it so its `id` cannot
be reused meanwhile. Nothing kept reaches a command or the carried state: the workflow issues the
same commands with or without it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from models.inferencereplica import InstanceRow
from models.instance import InstanceStatus
from planning.replica.facts import InstanceFacts, facts_from_status
from planning.replica.status import instance_row

T = TypeVar("T")
R = TypeVar("R")


class Kept(Generic[T, R]):
    """`compute(obj)`, kept by `obj`'s identity from one pass (`turn`) to the next; what no pass
    asked for since the one before is let go, so copies made for one pass do not pile up."""

    def __init__(self, compute: Callable[[T], R]) -> None:
        self.compute = compute
        self.current: dict[int, tuple[T, R]] = {}
        self.previous: dict[int, tuple[T, R]] = {}

    def __call__(self, obj: T) -> R:
        key = id(obj)
        kept = self.current.get(key) or self.previous.pop(key, None)
        if kept is None or kept[0] is not obj:
            kept = (obj, self.compute(obj))
        self.current[key] = kept
        return kept[1]

    def turn(self) -> None:
        """A new pass: what the last one did not use goes."""
        self.previous, self.current = self.current, {}


class ReplicaMemo:
    """One run's kept results (`ReplicaState.memo`); a new run starts empty."""

    def __init__(self) -> None:
        self.facts: Kept[InstanceStatus, InstanceFacts] = Kept(facts_from_status)
        self.rows: Kept[InstanceStatus, InstanceRow] = Kept(instance_row)

    def turn(self) -> None:
        self.facts.turn()
        self.rows.turn()

    def __eq__(self, other: object) -> bool:
        """What is kept says nothing of the state: two states that hold the same are equal
        (pydantic compares private attributes too)."""
        return isinstance(other, ReplicaMemo)

    __hash__ = None  # type: ignore[assignment]
