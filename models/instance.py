"""The `Instance` workflow's contract: its input, its status and the messages it takes.

An Instance is one replica of an OMENative component: one pod (`default`) or a leader and
its workers, created, updated, repaired and removed as one unit (spec reference §9). The
InferenceReplica workflow resolves everything that depends on the InferenceService and its
runtime (pod specs, lifecycle settings, cluster-wide policies) and hands each Instance child
an `InstanceSpec`; the Instance needs nothing else to do its job.

Messages (all signals, because a parent workflow can only signal its children):

| name             | payload            | sender                | effect                                   |
|------------------|--------------------|-----------------------|------------------------------------------|
| `pods_changed`   | `InstancePods`     | watcher               | new observation of the Instance's pods   |
| `update`         | `UpdateRequest`    | InferenceReplica      | move to a new revision                   |
| `restart`        | `RestartRequest`   | InferenceReplica/user | recreate all pods (new incarnation)      |
| `drain`          | `DrainRequest`     | InferenceReplica      | take out of rotation, keep the pods      |
| `delete`         | `DeleteRequest`    | InferenceReplica/user | drain, delete the pods, then finish      |
| `release_held`   | `ReleaseHeldRequest` | InferenceReplica/user | lift a Held retry block               |
| `set_pause`      | `PauseRequest`     | InferenceReplica      | the component's pause depth, or none     |

Query `status` returns `InstanceStatus`. Whenever the phase, the pod counts or the revisions
change, the Instance signals `instance_changed` (payload `InstanceStatus`) to its parent
InferenceReplica workflow (`irep/{ns}/{isvc}-{component}`). A single-pod Instance the parent
started skips the first one, `Creating` with no pods, which the parent's launch record already
says (`InstanceState.launched_by_parent`).
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import Field, model_validator

from models.base import StatusModel
from models.pods import SERVING_CONDITION

# Signal, query and parent-signal names: part of the user interface (`temporal workflow
# signal --name ...`), so they are constants both the Instance and its callers import.
SIGNAL_PODS_CHANGED = "pods_changed"
SIGNAL_UPDATE = "update"
SIGNAL_RESTART = "restart"
SIGNAL_DRAIN = "drain"
SIGNAL_DELETE = "delete"
SIGNAL_RELEASE_HELD = "release_held"
SIGNAL_SET_PAUSE = "set_pause"
SIGNAL_HOLD_DRAIN = "hold_drain"
QUERY_STATUS = "status"
PARENT_SIGNAL_INSTANCE_CHANGED = "instance_changed"
INSTANCE_WORKFLOW_VERSION = 14
"""The Instance workflow version the InferenceReplica starts Instances with (their input's
`workflow_version`); the changes each version takes are listed in `workflows.instance.versions`."""

# Pod label keys live with the pod summaries in models/pods.py (ARCHITECTURE.md "Kubernetes
# objects"); the readiness gate is the serving condition the workflow sets.
SERVING_GATE = SERVING_CONDITION
# Kueue holds admitted-later pods with this scheduling gate; time behind it is not counted.
KUEUE_SCHEDULING_GATE = "kueue.x-k8s.io/admission"


class InstancePhase(StrEnum):
    """Spec reference §9: in-flight phases and resting phases."""

    PENDING = "Pending"
    CREATING = "Creating"
    READY = "Ready"
    UPDATING = "Updating"
    RESTARTING = "Restarting"
    MIGRATING = "Migrating"
    FAILED = "Failed"
    DELETING = "Deleting"


class RestartPolicy(StrEnum):
    """`lifecycle.restartPolicy`: recreate the whole Instance, or leave restarts to the kubelet."""

    RECREATE_INSTANCE_ON_POD_RESTART = "RecreateInstanceOnPodRestart"
    NONE = "None"


class UpdateStrategyType(StrEnum):
    """`lifecycle.updateStrategy.type` (spec reference §7)."""

    SURGE_THEN_DRAIN = "SurgeThenDrain"
    RECREATE_POD = "RecreatePod"
    IN_PLACE_IF_POSSIBLE = "InPlaceIfPossible"
    IN_PLACE_ONLY = "InPlaceOnly"


InstancePauseMode = Literal["Recover", "Freeze"]
"""The InferenceReplica's `spec.pauseMode` while paused (spec reference §5): `Recover` (the
annotation's `true`: repairs go on) or `Freeze` (repairs stop too). None: not paused."""


class RetryBlockState(StrEnum):
    """Spec reference §8/§11: the revision-scoped retry block's states."""

    BACKOFF = "Backoff"
    RETRY_IN_PROGRESS = "RetryInProgress"
    HELD = "Held"


class UpdateRetryPolicy(StatusModel):
    """Cluster-wide `updateRetry`: how often a revision's own failures are retried.

    The chart's policy is three attempts, the 2nd one minute after the 1st failure and the
    3rd two minutes after the 2nd (spec reference §11); `attempt_delays_seconds[i]` is the
    wait after the failure of attempt i+1. Without a policy the first counting failure holds.
    """

    max_attempts: int = Field(default=3, ge=1)
    attempt_delays_seconds: list[float] = Field(default_factory=lambda: [60.0, 120.0])


class ForceDeletePolicy(StatusModel):
    """Cluster-wide `forceDelete` (spec reference §15): both durations set turns it on.

    `overdue_slack_seconds`: how long past its own deletion deadline a Terminating pod may
    linger before it is force-deleted. `node_unreachable_threshold_seconds`: how long a node
    must have been NotReady/Unknown/unreachable before its pods are presumed dead.
    """

    overdue_slack_seconds: float = Field(ge=0)
    node_unreachable_threshold_seconds: float = Field(ge=0)


class InstanceSpec(StatusModel):
    """Everything one Instance needs, resolved by the InferenceReplica's planning.

    Pod specs are Kubernetes `PodSpec` dicts in wire form (camelCase), already carrying
    containers, resources, nodeSelector, affinity, topologySpreadConstraints, tolerations and
    schedulerName. The Instance adds what depends on it alone: names, labels, the role
    environment, the readiness gate, hostname/subdomain, the worker-to-leader affinity for
    `topology_key`, and owner references.
    """

    namespace: str = Field(min_length=1)
    isvc: str = Field(min_length=1)
    isvc_uid: str | None = None
    """UID of the InferenceService object; when set, every pod is owned by it (GC on delete)."""
    component: str = Field(min_length=1)
    index: int = Field(ge=0)
    revision: str = Field(min_length=1)
    """The pod template hash, the `ome.io/revision` label value."""
    revision_name: str = ""
    """The ControllerRevision name (`{isvc}-{component}-{hash}`), shown in status and events."""

    leader_pod_spec: dict[str, Any]
    """PodSpec of the leader, or of the only pod when `worker_count` is 0."""
    worker_pod_spec: dict[str, Any] | None = None
    worker_count: int = Field(default=0, ge=0)
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    pairing_protocol: str | None = None
    topology_key: str | None = None
    """Node label that keeps the workers in their leader's domain (required pod affinity)."""
    gang_scheduling: bool = True
    """Create a scheduler-plugins PodGroup for a multi-pod Instance when the CRD exists."""
    gang_surge_of: int | None = None
    """Set when this Instance is the new-index replacement of a multi-pod SurgeThenDrain update
    of Instance `gang_surge_of`: a failure abandons it (`GangSurgeAbandoned`) instead of retrying."""
    parent_workflow_id: str | None = None
    """Where `instance_changed` goes; defaults to the parent workflow, if any."""
    pause_mode: InstancePauseMode | None = None
    """The pause in force when the Instance starts; later changes arrive as `set_pause`."""

    restart_policy: RestartPolicy | None = None
    """None picks the default: RecreateInstanceOnPodRestart for multi-pod, None for single-pod."""
    update_strategy_type: UpdateStrategyType = UpdateStrategyType.SURGE_THEN_DRAIN
    instance_ready_timeout_seconds: float | None = 1800.0
    """`instanceReadyTimeout`; None means no deadline."""
    min_ready_seconds: float = Field(default=0.0, ge=0)
    drain_seconds: float = Field(default=5.0, ge=0)
    """How long an Instance stays out of rotation before its pods are deleted, so in-flight
    requests finish and load balancers notice (5s, like the chart's requeue interval)."""
    stuck_pod_grace_seconds: float | None = 60.0
    unschedulable_grace_seconds: float | None = 900.0
    update_retry: UpdateRetryPolicy | None = Field(default_factory=lambda: UpdateRetryPolicy())
    force_delete: ForceDeletePolicy | None = None
    teardown_deadline_seconds: float | None = 1800.0
    safety_recheck_seconds: float = Field(default=300.0, gt=0)
    """A slow timer that re-lists the pods in case a watcher signal was lost; while the
    Instance rests Ready under `relisted_by_parent`, only the parent's re-list runs."""
    relisted_by_parent: bool = False
    """The parent InferenceReplica re-lists the component's pods as the safety net of its
    resting Ready Instances (`planning.replica.recheck`), so such an Instance waits for news
    with no timer of its own: idle, it costs no Temporal action (issue 17)."""

    @model_validator(mode="after")
    def _workers_have_a_spec(self) -> InstanceSpec:
        if self.worker_count > 0 and self.worker_pod_spec is None:
            raise ValueError(
                f"worker_pod_spec must be set when worker_count is {self.worker_count}; "
                "give the worker PodSpec or set worker_count to 0"
            )
        return self

    @property
    def pod_count(self) -> int:
        return 1 + self.worker_count

    @property
    def multi_pod(self) -> bool:
        return self.worker_count > 0

    @property
    def instance_name(self) -> str:
        """`{isvc}-{component}-{index}`: pod name prefix and headless Service name."""
        return f"{self.isvc}-{self.component}-{self.index}"

    @property
    def effective_restart_policy(self) -> RestartPolicy:
        if self.restart_policy is not None:
            return self.restart_policy
        if self.multi_pod:
            return RestartPolicy.RECREATE_INSTANCE_ON_POD_RESTART
        return RestartPolicy.NONE


class InstanceFailure(StatusModel):
    """`lastFailure`: what failed, where, and when; kept after the Instance recovers."""

    pod_name: str | None = None
    container_name: str | None = None
    reason: str
    exit_code: int | None = None
    message: str = ""
    time: datetime
    counting: bool = False
    """True when the failure is the revision's own fault (counts toward holding it)."""
    operation: Literal["Create", "Update", "Restart", "Migrate", "Delete"] | None = None
    """The operation whose attempt failed (None: a Ready Instance's pod failed, or a report
    from before this was recorded). Not shown in `lastFailure`; the InferenceReplica reads it
    to decide an automatic relocation (§13)."""
    node_names: list[str] = Field(default_factory=list)
    """The nodes the failed attempt's pods were on, sorted; empty when none was scheduled."""


class InstanceOperation(StatusModel):
    """The operation in flight (spec reference §9 `operation`)."""

    id: str
    type: Literal["Create", "Update", "Restart", "Migrate", "Delete"]
    step: str
    started_at: datetime
    last_progress_at: datetime | None = None
    deadline: datetime | None = None
    target_revision: str | None = None
    strategy: UpdateStrategyType | None = None
    waiting: str | None = None
    """A hold that stops the readiness clock (`QuotaExceeded`, `Unschedulable`, ...)."""


class RetryBlock(StatusModel):
    """The retry block of this Instance's target revision (spec reference §8)."""

    target_revision: str
    state: RetryBlockState
    attempts_started: int
    next_retry_at: datetime | None = None
    first_failure_at: datetime
    last_failure_at: datetime
    reason: str


class InstanceStatus(StatusModel):
    """What the `status` query answers and what the parent receives in `instance_changed`."""

    namespace: str
    isvc: str
    component: str
    index: int
    phase: InstancePhase
    incarnation: int
    running_revision: str | None = None
    target_revision: str
    desired_pods: int
    total_pods: int = 0
    ready_pods: int = 0
    serving_pods: int = 0
    available_pods: int = 0
    ready: bool = False
    serving: bool = False
    available: bool = False
    ready_since: datetime | None = None
    active_ordinal: int = 0
    last_failure: InstanceFailure | None = None
    operation: InstanceOperation | None = None
    retry_block: RetryBlock | None = None
    gang_scheduling_unavailable: bool = False
    """True for a multi-pod Instance when the PodGroup CRD is missing (`GangSchedulingUnavailable`)."""
    draining: bool = False
    deleted: bool = False
    """Set in the last report of an Instance whose pods are gone and whose workflow ends."""
    abandoned: bool = False
    """Set when a gang surge target gave up (`GangSurgeAbandoned`) and removed its pods."""
    pod_names: list[str] = Field(default_factory=list)
    node_names: list[str] = Field(default_factory=list)
    """The nodes its current pods run on (a migration's source node); rides along with the
    reports the other fields cause, so it is not part of their fingerprint."""
    updated_at: datetime | None = None
    pause_mode: InstancePauseMode | None = None
    """The pause this Instance knows of (`set_pause`); None when not paused."""
    pods_digest: str | None = None
    """`planning.pod_summary.pods_digest` of the pods the Instance last saw, set while it rests
    on its parent's re-list (`relisted_by_parent`, Ready, no operation); the re-list compares
    it with the listing's. None otherwise (and in reports from before it existed)."""


class UpdateRequest(StatusModel):
    """Move the Instance to `spec.revision` (the whole new spec, same namespace/isvc/index)."""

    spec: InstanceSpec
    counted_by_parent: bool = False
    """The InferenceReplica that asks counts the Instance as updating to `spec.revision` from
    its own request (`ReplicaState.requested_updates`) until a report at that revision says
    otherwise: the Instance's reports that would only tell it so are not sent
    (`planning.instance.reports.counted_by_request`)."""


class RestartRequest(StatusModel):
    """Recreate every pod of the Instance with a new incarnation."""

    reason: str = "RestartRequested"


class DrainRequest(StatusModel):
    """Take the Instance out of rotation (serving gate False) and keep its pods."""

    reason: str = "DrainRequested"


class DeleteRequest(StatusModel):
    """Drain, wait `drain_seconds` (the spec's value when None), delete the pods, finish."""

    reason: str = "Deleted"
    drain_seconds: float | None = None
    counted_since: datetime | None = None
    """Set by an InferenceReplica that counts the Instance as `Deleting` from its own request,
    from this moment (`ReplicaState.requested_deletes`): the deletion starts its clock then (its
    drain deadline is this + `instanceReadyTimeout`, as the parent computes it), and the
    Instance sends no report that would only tell the parent it is being deleted
    (`planning.instance.reports.deletion_counted`); its last report, deleted, still goes."""
    drain_deadline: datetime | None = None
    """With `counted_since`: when the deletion's drain becomes overdue (`DrainOverdue`) as the
    parent counts it, `counted_since` + the component's `instanceReadyTimeout` at the request
    (None: no deadline). The Instance takes it as it is (`says_drain_deadline`), so the two agree
    when a lifecycle change reaches the Instance only after the delete."""
    drain_deadline_said: bool = False
    """Set with `drain_deadline` by the parent. A request of before said nothing of it: the
    Instance then reckons the deadline from its own spec."""

    def says_drain_deadline(self) -> bool:
        """Whether the parent that counts this deletion said its drain deadline (even None)."""
        return self.counted_since is not None and self.drain_deadline_said


class ReleaseHeldRequest(StatusModel):
    """Lift the Held retry block of `revision` (full hash or its first 8 characters)."""

    revision: str


class HoldDrainRequest(StatusModel):
    """From the InferenceReplica while its rollout run holds drains (gate `Pairing`): an
    in-flight SurgeThenDrain keeps its old pod serving until `reason` is None again."""

    reason: str | None = None


class PauseRequest(StatusModel):
    """The component's pause depth (`Recover` / `Freeze`), or None when it resumes."""

    mode: InstancePauseMode | None = None
