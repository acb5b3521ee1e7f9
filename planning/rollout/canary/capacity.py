"""New-revision capacity of a canary step, per component (spec reference §1.3, §1.4 step 1).

- Desired replicas are the component's `minReplicas` as set in the InferenceService; runtime
  and chart defaults do not count.
- A percentage `"N%"` is `ceil(N/100 x desired)`; an integer is `min(int, desired)`.
- A step replaces Instances: the remainder stays on the previous revision, and Instances an
  autoscaler adds above the desired count run the new revision. So the step's `count` must
  be ready on the new revision, and its `limit` (what the InferenceReplica may hold on it) is
  the count plus the Instances above desired.
- Each component computes its own count; the engine and the decoder (and the router, in the
  same group) are one unit: the step waits until every component has its count ready.

Without `minReplicas` (desired unknown) the reference warns that a step may wait forever or
open its gate before any new Instance is ready. We decide: a percentage of an unknown count
is 0, except `"100%"`, which is every Instance the component runs now (so the last step
still moves everything and completion means what it says); an integer is capped at the
Instances the component runs now. Early steps then open without new Instances, as OME's do.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from models.inferenceservice import CanaryStep
from planning.rollout.canary.observation import ComponentObservation


@dataclass(frozen=True)
class ComponentCapacity:
    component: str
    count: int
    """Instances that must serve on the canary revision for the step to be ready."""
    limit: int
    """Instances the InferenceReplica may hold on the canary revision (0 on rollback)."""
    rollback_to: str | None = None
    """The stable revision hash to return to; set while rolling back."""


def percent_of(capacity: str) -> int:
    """`"25%"` -> 25; admission guarantees the form, anything else is a programming error."""
    if not capacity.endswith("%") or not capacity[:-1].isdigit():
        raise ValueError(f'canary capacity must be a whole percentage such as "25%", got "{capacity}"')
    return int(capacity[:-1])


def step_count(capacity: int | str, desired: int | None, instances: int) -> int:
    """Instances of one component that must be ready on the new revision at a step."""
    if isinstance(capacity, int):
        return max(0, min(capacity, instances if desired is None else desired))
    percent = percent_of(capacity)
    if desired is None:
        return max(0, instances) if percent >= 100 else 0
    return -(-percent * max(0, desired) // 100)


def new_revision_limit(count: int, desired: int | None, instances: int) -> int:
    """The step's count plus the Instances an autoscaler added above desired."""
    above = 0 if desired is None else max(0, instances - desired)
    return count + above


def step_capacities(
    step: CanaryStep, components: Mapping[str, ComponentObservation]
) -> dict[str, ComponentCapacity]:
    found = {}
    for name, seen in components.items():
        count = step_count(step.capacity, seen.desired, seen.instances)
        found[name] = ComponentCapacity(name, count, new_revision_limit(count, seen.desired, seen.instances))
    return found


def shortfalls(
    group: tuple[str, ...],
    capacities: Mapping[str, ComponentCapacity],
    components: Mapping[str, ComponentObservation],
) -> list[str]:
    """`engine 1/2` for each component short of its count (a component not reported yet is short)."""
    short = []
    for name in group:
        seen, cap = components.get(name), capacities.get(name)
        if seen is None or cap is None:
            short.append(f"{name} not reported")
        elif seen.ready_canary < cap.count:
            short.append(f"{name} {seen.ready_canary}/{cap.count}")
    return short
