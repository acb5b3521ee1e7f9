"""A Deployment-mode component's readiness, from its Deployment's own status.

A RawDeployment component runs as a plain Kubernetes Deployment (`planning.service.objects`),
so the Deployment controller, not an InferenceReplica, knows how many of its pods are up.
`observe_deployment` reduces a Deployment object to `DeploymentObserved` (what the watcher
signals to the InferenceService workflow and what the workflow carries), and
`deployment_condition` turns that into the InferenceService's `<Component>Ready` condition
with the reasons and messages of spec reference §8 (last bullet):

| Reason                  | Status | When                                                       |
|-------------------------|--------|------------------------------------------------------------|
| `NoReplicas`            | False  | the component wants no pods                                |
| `Ready`                 | True   | the Deployment is complete: its controller has seen the    |
|                         |        | current generation and every desired pod is updated and    |
|                         |        | available, no old pod left (Kubernetes' DeploymentComplete)|
| `MinimumAvailable`      | True   | available pods >= desired - maxUnavailable                 |
| `InsufficientAvailable` | False  | otherwise                                                  |

"Serving" counts the Deployment's available pods: those are the pods its Service routes to
(Ready, for `minReadySeconds`), and the same count Kubernetes' own `Available` condition
judges, so `MinimumAvailable` here agrees with `kubectl get deploy`. The minimum follows
Kubernetes' arithmetic for the Deployment's strategy: `maxUnavailable` rounds down and
`maxSurge` up (both default 25%), both resolving to 0 makes `maxUnavailable` 1, and a
`Recreate` Deployment has no unavailability allowance (minimum = desired).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from models.pods import LABEL_COMPONENT, LABEL_ISVC
from planning.replica.conditions import PlannedCondition, component_ready

DEFAULT_BUDGET = "25%"
"""Kubernetes' default `maxSurge` and `maxUnavailable` for a RollingUpdate Deployment."""

_PERCENT = re.compile(r"^\s*(\d+)\s*%\s*$")


class DeploymentObserved(BaseModel):
    """One Deployment's spec counts and status, as last seen (level-triggered: the whole state)."""

    model_config = ConfigDict(extra="forbid")

    namespace: str
    isvc: str
    component: str
    resource_version: str = ""
    generation: int = 0
    observed_generation: int = 0
    spec_replicas: int = 0
    replicas: int = 0
    ready_replicas: int = 0
    available_replicas: int = 0
    updated_replicas: int = 0
    strategy: str = "RollingUpdate"
    max_surge: int | str | None = None
    max_unavailable: int | str | None = None
    exists: bool = True
    """False once the Deployment is gone (a DELETED watch event, or a read that found nothing)."""

    @property
    def current(self) -> bool:
        """Whether the status describes the spec as it is now (its controller caught up)."""
        return self.observed_generation >= self.generation

    def complete(self, desired: int) -> bool:
        """Kubernetes' DeploymentComplete for `desired` pods: rolled out, all available, no extra."""
        return (
            self.exists
            and self.current
            and self.updated_replicas >= desired
            and self.replicas == desired
            and self.available_replicas >= desired
        )

    def same_state(self, other: DeploymentObserved | None) -> bool:
        """Equal apart from the resourceVersion (which moves on every status write)."""
        if other is None:
            return False
        return self.model_dump(exclude={"resource_version"}) == other.model_dump(exclude={"resource_version"})


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def observe_deployment(obj: Mapping[str, Any], exists: bool = True) -> DeploymentObserved | None:
    """The observation of one of our Deployments; None for a Deployment that isn't a component's."""
    metadata = obj.get("metadata") or {}
    labels = metadata.get("labels") or {}
    isvc, component = labels.get(LABEL_ISVC), labels.get(LABEL_COMPONENT)
    if not isvc or not component:
        return None
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    strategy = spec.get("strategy") or {}
    rolling = strategy.get("rollingUpdate") or {}
    return DeploymentObserved(
        namespace=str(metadata.get("namespace") or ""),
        isvc=str(isvc),
        component=str(component),
        resource_version=str(metadata.get("resourceVersion") or ""),
        generation=_int(metadata.get("generation")),
        observed_generation=_int(status.get("observedGeneration")),
        # The API server defaults spec.replicas to 1 when unset.
        spec_replicas=_int(spec.get("replicas", 1)),
        replicas=_int(status.get("replicas")),
        ready_replicas=_int(status.get("readyReplicas")),
        available_replicas=_int(status.get("availableReplicas")),
        updated_replicas=_int(status.get("updatedReplicas")),
        strategy=str(strategy.get("type") or "RollingUpdate"),
        max_surge=rolling.get("maxSurge"),
        max_unavailable=rolling.get("maxUnavailable"),
        exists=exists,
    )


def newer(candidate: DeploymentObserved, held: DeploymentObserved | None) -> bool:
    """Whether `candidate` may replace `held`: a report older than what the workflow read is
    dropped (watch signals can arrive after the workflow's own read of a later version)."""
    if held is None:
        return True
    a, b = candidate.resource_version, held.resource_version
    if a.isdigit() and b.isdigit():
        return int(a) >= int(b)
    # Opaque versions cannot be ordered: the latest arrival wins, as level-triggered state allows.
    return True


def resolve_budget(value: int | str | None, total: int, round_up: bool) -> int:
    """An int-or-percent budget against `total` pods; unset or unreadable means 25%."""
    if isinstance(value, bool):
        value = None
    if isinstance(value, int):
        return max(0, value)
    text = DEFAULT_BUDGET if value is None else str(value)
    match = _PERCENT.match(text)
    if match is None:
        if text.strip().isdigit():
            return int(text)
        match = _PERCENT.match(DEFAULT_BUDGET)
        assert match is not None
    exact = total * int(match.group(1)) / 100
    return math.ceil(exact) if round_up else math.floor(exact)


def deployment_minimum(
    desired: int,
    strategy: str = "RollingUpdate",
    max_surge: int | str | None = None,
    max_unavailable: int | str | None = None,
) -> int:
    """desired - maxUnavailable, as Kubernetes' deploymentutil.MaxUnavailable works it out."""
    if desired <= 0:
        return 0
    if strategy != "RollingUpdate":
        return desired
    surge = resolve_budget(max_surge, desired, round_up=True)
    unavailable = resolve_budget(max_unavailable, desired, round_up=False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return desired - min(unavailable, desired)


def deployment_condition(
    component: str, desired: int, observed: DeploymentObserved | None
) -> PlannedCondition:
    """The InferenceService's `<Component>Ready` for a Deployment-mode component (§8)."""
    if observed is None or not observed.exists:
        return component_ready(component, desired, False, 0, deployment_minimum(desired))
    minimum = deployment_minimum(desired, observed.strategy, observed.max_surge, observed.max_unavailable)
    return component_ready(
        component, desired, observed.complete(desired), observed.available_replicas, minimum
    )


def converged(desired: int, observed: DeploymentObserved | None) -> bool:
    """Whether nothing about this Deployment is still expected to change on its own."""
    if desired <= 0:
        return observed is None or not observed.exists or (observed.current and observed.replicas == 0)
    return observed is not None and observed.complete(desired)


def rolling_out(desired: int, observed: DeploymentObserved | None) -> bool:
    """A new pod template still being rolled out (the phase reads `Updating`): pods of an older
    ReplicaSet remain, or the controller has yet to see a change to a Deployment it ran
    before. A first creation or a scale is not an update."""
    if observed is None or not observed.exists or desired <= 0:
        return False
    old_pods_left = observed.replicas > observed.updated_replicas
    unseen_change = 0 < observed.observed_generation < observed.generation
    return old_pods_left or unseen_change
