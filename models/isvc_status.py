"""The InferenceService status the product writes and the `status` query returns.

Shaped like the spec's status blocks: `status.components.<component>.lifecycle`
(`LifecycleStatus`, reference §7: totals, revisions, conditions, `rolloutHold`), the
canary's `rolloutPhase`, `canary` (§1.5, §2.6) and recorded `traffic` (§1.7), and
`status.rollout` with the pinned run and per-group digests (§4, §6), and `status.placement`
on a multi-cluster service's control-plane copy (§16). Per-Instance rows are not mirrored
here; they live on the InferenceReplica.

Public API: `InferenceServiceStatus`, `ComponentStatus`, `LifecycleStatus`, `CanaryStatus`,
`CanaryFailure`, `MetricResult`, `TrafficTarget`, `RolloutStatus`, `RolloutRun`,
`RolloutGroupStatus`, `RolloutPhase`, `PlacementStatus`, `PlacementCandidate`, `PlacementHome`,
`PlacementPhase`, `CandidatePhase`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from models.base import StatusModel
from models.inferencereplica import Condition, RolloutHoldRow

RolloutPhase = Literal[
    "Pending", "Canarying", "Paused", "Promoting", "Stable", "Failed", "RollingBack", "RolledBack"
]


class LifecycleStatus(StatusModel):
    """`status.components.<c>.lifecycle`, only for OMENative components."""

    observed_generation: int | None = None
    current_revision: str | None = None
    update_revision: str | None = None
    collision_count: int | None = None
    label_selector: str | None = None
    replicas: int = 0
    ready_replicas: int = 0
    serving_replicas: int = 0
    available_replicas: int = 0
    updated_replicas: int = 0
    updated_ready_replicas: int = 0
    conditions: list[Condition] = Field(default_factory=list)
    rollout_hold: RolloutHoldRow | None = None


class MetricResult(StatusModel):
    name: str
    value: str = ""  # empty when the sample was inconclusive
    threshold: str = ""
    operator: Literal["LT", "LTE", "GT", "GTE"] | None = None
    passed: bool = False
    message: str = ""
    time: datetime | None = None


class CanaryFailure(StatusModel):
    reason: Literal["CapacityTimeout", "AnalysisStalled", "StableRevisionMissing"]
    time: datetime | None = None


class CanaryStatus(StatusModel):
    """`status.components.<primary>.canary` (primary: the router if in the group, else the engine)."""

    target_id: str | None = Field(default=None, alias="targetID")  # the spec spells it `targetID`
    canary_revision_hash: str | None = None
    stable_revision_hash: str | None = None
    current_step: int = 0  # 0-based; equals the number of steps once complete
    step_entered_time: datetime | None = None
    observed_traffic_weight: int | None = None
    promoted_through: str | None = None
    pre_step_hold: bool = False
    rolled_back_revision_hash: str | None = None
    analysis_failed_checks: int = 0
    last_evaluation_time: datetime | None = None
    last_conclusive_evaluation_time: datetime | None = None
    metric_results: list[MetricResult] = Field(default_factory=list)
    capacity_wait_since: datetime | None = None
    failed: CanaryFailure | None = None


class TrafficTarget(StatusModel):
    """One recorded (not routed) traffic share; 0-weight entries are left out."""

    revision_name: str
    percent: int
    tag: Literal["canary", "stable"] | None = None
    latest_revision: bool = False
    pairing_protocol: str | None = None


class ComponentStatus(StatusModel):
    deployment_mode: Literal["OMENative", "RawDeployment", "MultiNode"] | None = None
    lifecycle: LifecycleStatus | None = None
    rollout_phase: RolloutPhase | None = None
    canary: CanaryStatus | None = None
    traffic: list[TrafficTarget] | None = None


class RolloutRun(StatusModel):
    """The run pinned at rollout start (`status.rollout.activeRun`)."""

    id: str
    started_at: datetime | None = None
    plan_digest: str | None = None
    target_revisions: dict[str, str] = Field(default_factory=dict)


class RolloutGroupStatus(StatusModel):
    observed_digest: str | None = None
    phase: str | None = None


class RolloutStatus(StatusModel):
    active_run: RolloutRun | None = None
    groups: list[RolloutGroupStatus] = Field(default_factory=list)


PlacementPhase = Literal["Pending", "Admitting", "Racing", "Placed", "Failed"]
CandidatePhase = Literal["Admitting", "Admitted"]


class PlacementCandidate(StatusModel):
    """A cluster that holds (or is being given) a member copy of the InferenceService."""

    cluster: str
    phase: CandidatePhase


class PlacementHome(StatusModel):
    """A cluster whose member copy admitted the spec. `replicas` is its share of a split's
    floor (absent: the component's own minReplicas/maxReplicas)."""

    cluster: str
    replicas: int | None = None
    endpoint: str | None = None


class PlacementStatus(StatusModel):
    """`status.placement` (reference §16). `cluster` and `endpoint` are set only in mode Single."""

    phase: PlacementPhase
    candidates: list[PlacementCandidate] = Field(default_factory=list)
    homes: list[PlacementHome] = Field(default_factory=list)
    cluster: str | None = None
    endpoint: str | None = None


class InferenceServiceStatus(StatusModel):
    observed_generation: int | None = None
    conditions: list[Condition] = Field(default_factory=list)
    components: dict[str, ComponentStatus] = Field(default_factory=dict)
    rollout: RolloutStatus | None = None
    placement: PlacementStatus | None = None

    def condition(self, type_: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == type_), None)
