"""Which components an InferenceService runs, in which mode, at which revision.

A component exists when the InferenceService or its runtime declares it (router, engine,
decoder, in that order: the order objects are created in, so a router's backends appear
after it and a history reads top-down). Its mode comes from `models.resolution`:
`OMENative` runs an InferenceReplica of Instances, `RawDeployment` a plain Deployment.
`MultiNode` would need a LeaderWorkerSet, which this product doesn't run: the component is
reported with a reason and left alone, so pinning it never destroys what runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from models.inferenceservice import COMPONENTS, ComponentName, ComponentSpec, DeploymentMode, InferenceService
from models.resolution import component_revision, deployment_mode, effective_component, revision_name
from models.runtime import ServingRuntimeSpec
from planning.replica.scale import bounds

CREATION_ORDER: tuple[ComponentName, ...] = ("router", "engine", "decoder")
assert set(CREATION_ORDER) == set(COMPONENTS)


@dataclass(frozen=True)
class ComponentPlan:
    name: ComponentName
    mode: DeploymentMode
    effective: ComponentSpec
    revision_hash: str
    revision_name: str

    @property
    def multi_pod(self) -> bool:
        return self.effective.is_multi_pod

    @property
    def omenative(self) -> bool:
        return self.mode == "OMENative"

    @property
    def min_replicas(self) -> int:
        return bounds(self.effective.min_replicas, self.effective.max_replicas)[0]

    @property
    def max_replicas(self) -> int | None:
        return bounds(self.effective.min_replicas, self.effective.max_replicas)[1]


def plan_components(isvc: InferenceService, runtime: ServingRuntimeSpec | None) -> list[ComponentPlan]:
    """Every declared component with its mode and revision, in creation order."""
    plans: list[ComponentPlan] = []
    for name in CREATION_ORDER:
        effective = effective_component(isvc, runtime, name)
        if effective is None:
            continue
        digest = component_revision(isvc, runtime, name)
        plans.append(
            ComponentPlan(
                name=name,
                mode=deployment_mode(isvc, runtime, name),
                effective=effective,
                revision_hash=digest,
                revision_name=revision_name(isvc.name, name, digest),
            )
        )
    return plans


def removed_components(previous: list[ComponentPlan], current: list[ComponentPlan]) -> list[ComponentPlan]:
    """Components that ran before and no longer do, or that changed mode (their old objects go)."""
    now = {(plan.name, plan.mode) for plan in current}
    return [plan for plan in previous if (plan.name, plan.mode) not in now]
