"""InferenceReplica (`irep`): one OMENative component's Instances, written by the product.

Named `{isvc}-{component}`. Its spec is the component's effective settings (runtime defaults
merged under the InferenceService's values, see `models.resolution.inference_replica_spec`)
plus the desired Instance count, pause and pacing; its status holds the counts, revisions,
per-Instance rows (`InstanceRow`), retry blocks, migrations, conditions and `rolloutHold`
with the exact field names of the spec (reference §7-§11).

Public API: `InferenceReplica`, `InferenceReplicaSpec`, `InferenceReplicaStatus`, `Pacing`,
`InstanceRow`, `InstancePhase`, `PodCounts`, `LastFailure`, `OperationRow`,
`RetryBlockRow`, `RetryState`, `RolloutHoldRow`, `HoldGate`, `MigrationRecord`, `Condition`,
`ConditionStatus`, `inference_replica_name(isvc, component)`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from models.base import StatusModel
from models.inferenceservice import (
    ComponentName,
    LeaderSpec,
    LifecycleSpec,
    ObjectMeta,
    RunnerSpec,
    WorkerSpec,
)

InstancePhase = Literal[
    "Creating", "Updating", "Restarting", "Migrating", "Deleting", "Ready", "Pending", "Failed"
]
RESTING_PHASES: frozenset[str] = frozenset({"Ready", "Pending", "Failed"})
RetryState = Literal["Backoff", "RetryInProgress", "Held"]
HoldGate = Literal["Plan", "Pairing", "Ratio", "Sequential", "Budget", "RetryBlock", "Held"]
ConditionStatus = Literal["True", "False", "Unknown"]


def inference_replica_name(isvc: str, component: ComponentName) -> str:
    return f"{isvc}-{component}"


class Condition(StatusModel):
    """A Kubernetes-style condition (`metav1.Condition`)."""

    type: str
    status: ConditionStatus
    reason: str = ""
    message: str = ""
    last_transition_time: datetime | None = None
    observed_generation: int | None = None


class Pacing(StatusModel):
    """Canary projection: Instances with index < partition hold the old revision."""

    partition: int | None = None
    rollback_to_revision: str | None = None


class InferenceReplicaSpec(StatusModel):
    inference_service: str
    component: ComponentName
    replicas: int = 0
    min_replicas: int | None = None
    max_replicas: int | None = None
    # The revision name (`<isvc>-<component>-rev-<hash>`) of the pods described below.
    revision: str
    model_name: str | None = None
    runtime_name: str | None = None
    pairing_protocol: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    runner: RunnerSpec | None = None
    leader: LeaderSpec | None = None
    worker: WorkerSpec | None = None
    scheduler_name: str | None = None
    topology_key: str | None = None
    topology_spread: Literal["Required", "Preferred"] | None = None
    topology_spread_key: str | None = None
    lifecycle: LifecycleSpec | None = None
    paused: bool = False
    pause_mode: Literal["Recover", "Freeze"] | None = None
    pacing: Pacing | None = None

    @property
    def pods_per_instance(self) -> int:
        """One pod, or a leader and `worker.size` workers (1 when size is unset)."""
        if self.leader is None and self.worker is None:
            return 1
        workers = 1 if self.worker is None or self.worker.size is None else self.worker.size
        return 1 + workers


class PodCounts(StatusModel):
    """An Instance's pods: `serving/available/total` in `kubectl ome instance list`."""

    total: int = 0
    ready: int = 0
    serving: int = 0
    available: int = 0


class LastFailure(StatusModel):
    """Kept after the Instance recovers, so the cause of the last failure stays visible."""

    pod_name: str | None = None
    container_name: str | None = None
    reason: str
    exit_code: int | None = None
    message: str = ""
    time: datetime | None = None


class OperationRow(StatusModel):
    """An Instance's operation in flight as its row shows it (the Instance's own, fuller
    record is `models.instance.InstanceOperation`)."""

    id: str
    type: Literal["Create", "Update", "Restart", "Migrate", "Delete"]
    step: str | None = None
    started_at: datetime | None = None
    last_progress_at: datetime | None = None
    deadline: datetime | None = None
    waiting: str | None = None


class InstanceRow(StatusModel):
    """One Instance: a row of `status.instanceStatuses`, not an object of its own."""

    index: int
    phase: InstancePhase
    incarnation: int = 1
    running_revision: str | None = None
    target_revision: str | None = None
    pods: PodCounts = Field(default_factory=PodCounts)
    ready_since: datetime | None = None
    last_failure: LastFailure | None = None
    operation: OperationRow | None = None
    node_names: list[str] | None = None
    active_ordinal: int | None = None


class RetryBlockRow(StatusModel):
    """Revision-scoped retry state shared by all Instances updating to `target_revision`, as
    `status.retryBlocks` shows it (each Instance's view is `models.instance.RetryBlock`)."""

    target_revision: str
    state: RetryState
    attempts_started: int = 0
    next_retry_at: datetime | None = None
    first_failure_at: datetime | None = None
    last_failure_at: datetime | None = None
    reason: str = ""


class RolloutHoldRow(StatusModel):
    """`status.rolloutHold` as written (decided by `planning.replica.hold.RolloutHold`): why a
    component's update waits; `since` stays while gate and target are unchanged."""

    gate: HoldGate
    reason: str
    target: str | None = None
    since: datetime | None = None


class CoordinationGroupRefRow(StatusModel):
    """`status.coordinationGroupRef`: the rollout run that moves this component, its group in
    `spec.rollout.groups` and the group's phase; absent outside a run."""

    rollout: str
    """The `Rollout` workflow's ID, `rollout/{ns}/{isvc}/{run}`."""
    run: int
    group: int
    phase: str


class MigrationRecord(StatusModel):
    uuid: str
    instance: int
    from_node: str | None = None
    phase: str
    surge_instance: int | None = None
    message: str = ""
    accepted_at: datetime | None = None


class InferenceReplicaStatus(StatusModel):
    observed_generation: int | None = None
    replicas: int = 0
    ready_replicas: int = 0
    serving_replicas: int = 0
    available_replicas: int = 0
    updated_replicas: int = 0
    updated_ready_replicas: int = 0
    current_revision: str | None = None
    update_revision: str | None = None
    collision_count: int | None = None
    label_selector: str | None = None
    instance_statuses: list[InstanceRow] = Field(default_factory=list)
    retry_blocks: list[RetryBlockRow] = Field(default_factory=list)
    migrations: list[MigrationRecord] = Field(default_factory=list)
    conditions: list[Condition] = Field(default_factory=list)
    rollout_hold: RolloutHoldRow | None = None
    coordination_group_ref: CoordinationGroupRefRow | None = None

    def condition(self, type_: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == type_), None)


class InferenceReplica(StatusModel):
    api_version: Literal["ome.io/v1beta1"] = "ome.io/v1beta1"
    kind: Literal["InferenceReplica"] = "InferenceReplica"
    metadata: ObjectMeta
    spec: InferenceReplicaSpec
    status: InferenceReplicaStatus = Field(default_factory=InferenceReplicaStatus)
