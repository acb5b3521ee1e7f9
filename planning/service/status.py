"""The InferenceService's status: per-component lifecycle blocks and its conditions.

- `status.components.<component>.lifecycle` (spec reference §7, OMENative components only)
  copies the InferenceReplica's totals, revisions, conditions and `rolloutHold`; the
  per-Instance rows stay on the InferenceReplica.
- `<Component>Ready` per component (§8 last bullet), from the InferenceReplica's counts or,
  for a Deployment-mode component, from the Deployment's status
  (`planning.service.deployment`). Deployment-mode components get no `lifecycle` block
  (§7 keeps it to OMENative); their totals are the Deployment's, shown by
  `kubectl get deploy` and the workflow's `status` query.
- `Ready`: True when every component's condition is True; otherwise False naming the first
  component that isn't, with that component's message, so `kubectl wait --for=condition=Ready`
  works and a failed wait says why.

The body is written as a JSON merge patch, which keeps whatever it does not name: `merge_patch`
names each field the last written body had and this one lacks as null, so a cleared field
(a completed canary's `stableRevisionHash`, a lifted `rolloutHold`, a removed component)
leaves the object too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from models.inferencereplica import Condition, InferenceReplicaStatus
from models.isvc_status import LifecycleStatus
from models.resolution import MULTINODE_NOT_RUN, multinode_message
from planning.replica.conditions import PlannedCondition, component_condition_type
from planning.replica.status import with_transitions
from planning.service.deployment import DeploymentObserved, deployment_condition

LIFECYCLE_FIELDS = (
    "observedGeneration",
    "currentRevision",
    "updateRevision",
    "collisionCount",
    "labelSelector",
    "replicas",
    "readyReplicas",
    "servingReplicas",
    "availableReplicas",
    "updatedReplicas",
    "updatedReadyReplicas",
    "conditions",
    "rolloutHold",
)


def lifecycle_status(status: InferenceReplicaStatus) -> dict[str, Any]:
    """The §7 `LifecycleStatus` block copied from an InferenceReplica's status."""
    wire = status.model_dump(by_alias=True, mode="json")
    block = {name: wire.get(name) for name in LIFECYCLE_FIELDS}
    # Zero counts stay (a user reads "0 ready"); unset optional fields are left out.
    return {name: value for name, value in block.items() if value is not None}


def lifecycle_model(status: InferenceReplicaStatus) -> LifecycleStatus:
    """The same block as `lifecycle_status`, as the `models.isvc_status` type."""
    return LifecycleStatus.model_validate(lifecycle_status(status))


@dataclass(frozen=True)
class ComponentReport:
    """One component's contribution to the InferenceService status."""

    name: str
    condition: PlannedCondition
    lifecycle: dict[str, Any] | None = None


def deployment_component_report(
    name: str, desired: int, observed: DeploymentObserved | None
) -> ComponentReport:
    """A Deployment-mode component: its condition from the Deployment's own status."""
    return ComponentReport(name=name, condition=deployment_condition(name, desired, observed))


def multinode_component_report(name: str) -> ComponentReport:
    """A component pinned to `MultiNode`, which this product does not run: its `<Component>Ready`
    False, saying so and how to run it, so `Ready` names it instead of "no component"."""
    condition = PlannedCondition(
        component_condition_type(name), "False", MULTINODE_NOT_RUN, multinode_message(name)
    )
    return ComponentReport(name=name, condition=condition)


DELETING = PlannedCondition(
    "Ready",
    "False",
    "Deleting",
    "the InferenceService is being deleted: every Instance drains before its pods go",
)
"""`Ready` while a delete runs, whatever the components still report."""


def ready_condition(reports: Sequence[ComponentReport]) -> PlannedCondition:
    if not reports:
        return PlannedCondition(
            "Ready", "False", "NoComponents", "the InferenceService declares no component"
        )
    for report in reports:
        if report.condition.status != "True":
            return PlannedCondition(
                "Ready",
                "False" if report.condition.status == "False" else "Unknown",
                report.condition.reason,
                f"{report.name}: {report.condition.message}",
            )
    names = ", ".join(report.name for report in reports)
    return PlannedCondition("Ready", "True", "ComponentsReady", f"{names} ready")


def isvc_status(
    generation: int | None,
    reports: Sequence[ComponentReport],
    previous_conditions: Sequence[Condition],
    now: datetime,
    blocking: PlannedCondition | None = None,
    extra: Sequence[PlannedCondition] = (),
) -> dict[str, Any]:
    """The status subresource to patch onto the InferenceService object.

    `blocking` is a condition that keeps the whole service from running (its runtime is
    missing, say); it is listed and makes `Ready` False with its reason and message. A
    blocking condition of type `Ready` (the service is being deleted) is `Ready` itself.
    `extra` conditions (the rollout plan's) are listed after the components'.
    """
    ready = ready_condition(reports)
    if blocking is not None:
        ready = PlannedCondition("Ready", "False", blocking.reason, blocking.message)
    blocked = [blocking] if blocking is not None and blocking.type != "Ready" else []
    planned = [ready, *(report.condition for report in reports), *blocked, *extra]
    conditions = with_transitions(previous_conditions, planned, now, generation)
    components: dict[str, Any] = {}
    for report in reports:
        components[report.name] = {"lifecycle": report.lifecycle} if report.lifecycle is not None else {}
    return {
        "observedGeneration": generation,
        "conditions": [
            condition.model_dump(by_alias=True, mode="json", exclude_none=True) for condition in conditions
        ],
        "components": components,
    }


def merge_patch(previous: Mapping[str, Any] | None, current: Mapping[str, Any]) -> dict[str, Any]:
    """`current` as a JSON merge patch (RFC 7386) over `previous`, the body written last: a key
    `previous` has and `current` lacks is null, at any depth of nested objects, so the object
    ends up with `current` and nothing else of ours. Lists need nothing: a merge patch
    replaces them whole. Keys we never wrote are left to whoever wrote them."""
    patch = dict(current)
    for key, old in (previous or {}).items():
        if key not in current:
            patch[key] = None
        elif isinstance(old, Mapping) and isinstance(current[key], Mapping):
            patch[key] = merge_patch(old, current[key])
    return patch
