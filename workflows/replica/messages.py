"""The `InferenceReplica` workflow's contract: its message names, the config its parent
sends, the state it carries through continue-as-new, and the report it sends its parent.

The InferenceService (its parent) imports this module; this module imports nothing of its
parent's. Workflows import it inside `workflow.unsafe.imports_passed_through()`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from models.inferencereplica import Condition, InferenceReplicaSpec, InferenceReplicaStatus
from models.inferenceservice import ComponentSpec
from models.instance import InstancePauseMode, InstanceStatus, RetryBlock
from planning.replica.coordination import Coordination
from planning.replica.handover import GangSurge
from planning.replica.hold import RolloutHold
from planning.replica.revisions import RevisionState
from planning.replica.template import ClusterLifecycle

# --- message names (`temporal workflow signal --workflow-id irep/... --name ...`) ---------
SIGNAL_CONFIGURE = "configure"
"""From the InferenceService: a new `ReplicaConfig` (spec, revision, pause, transient scale)."""
SIGNAL_RESET_INSTANCES = "reset_instances"
"""What OME's `ome.io/reset-instances` annotation holds (`all`, `1`, `0,2`)."""
SIGNAL_RELEASE_HELD = "release_held"
"""Lift the Held retry block of a revision (name, hash or 8-hex prefix)."""
SIGNAL_DELETE = "delete"
QUERY_STATUS = "status"
SIGNAL_REPLICA_CHANGED = "replica_changed"
"""To the InferenceService (its parent): a `ReplicaReport`."""


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ReplicaConfig(_Message):
    """Everything an InferenceReplica runs from; the InferenceService sends a new one on change."""

    namespace: str
    isvc: str
    isvc_uid: str | None = None
    component: str
    generation: int
    component_spec: dict[str, Any]
    """The effective component (runtime defaults merged under the InferenceService), wire form."""
    ir_spec: InferenceReplicaSpec
    revision_hash: str
    revision_name: str
    pairing_protocol: str | None = None
    paused: bool = False
    pause_mode: InstancePauseMode | None = None
    """`spec.pauseMode` while paused: `Recover` (annotation `true`) or `Freeze`; told to every Instance."""
    transient_replicas: int | None = None
    history_limit_annotation: str | None = None
    cluster: ClusterLifecycle = Field(default_factory=ClusterLifecycle)
    parent_workflow_id: str | None = None
    coordination: Coordination | None = None
    """While a rollout run moves this component: how far it may move now (`planning.replica.coordination`)."""

    @property
    def effective(self) -> ComponentSpec:
        return ComponentSpec.model_validate(self.component_spec)

    @property
    def ir_name(self) -> str:
        return f"{self.isvc}-{self.component}"

    @property
    def effective_pause_mode(self) -> InstancePauseMode | None:
        """The pause in force: `pause_mode`, and `Recover` for a parent that sent only `paused`."""
        if not self.paused:
            return None
        return self.pause_mode or "Recover"


class ReplicaState(_Message):
    """The InferenceReplica workflow's whole state, handed to continue-as-new."""

    config: ReplicaConfig
    specs: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """The effective component of each revision hash still in use: an Instance the partition
    keeps behind, or a new one started while the update revision is Held, runs the old one."""
    instances: dict[int, InstanceStatus] = Field(default_factory=dict)
    """Each Instance's latest `instance_changed` report."""
    launched: dict[int, str] = Field(default_factory=dict)
    """Instances started whose first report has not arrived: index -> revision hash."""
    requested_updates: dict[int, str] = Field(default_factory=dict)
    """Updates signalled whose report does not show the target yet: index -> revision hash."""
    removing: list[int] = Field(default_factory=list)
    """Instances told to delete that have not reported their end."""
    instances_told_pause: InstancePauseMode | None = None
    """The pause every Instance was last told (`set_pause`); a change of `config.pause_mode` is news."""
    revisions: RevisionState = Field(default_factory=RevisionState)
    gang_surges: dict[int, GangSurge] = Field(default_factory=dict)
    """Multi-pod surge handovers in flight (`planning.replica.handover`): replacement index ->
    the Instance it replaces; no Instance reports this, only this workflow knows it."""
    gang_blocks: list[RetryBlock] = Field(default_factory=list)
    """Retry blocks kept from surge replacements that gave up and deleted themselves."""
    hold: RolloutHold | None = None
    announced_held: list[str] = Field(default_factory=list)
    pending_resets: list[str] = Field(default_factory=list)
    pending_releases: list[str] = Field(default_factory=list)
    deleting: bool = False
    ir_uid: str | None = None
    podgroup_crd: bool | None = None
    conditions: list[Condition] = Field(default_factory=list)
    last_desired: int | None = None
    written_spec: str = ""
    """Fingerprints (`workflows.replica.projection.digest`) of what was last written and reported."""
    written_status: str = ""
    reported: str = ""
    published_key: str = ""
    """Fingerprint of the conditions' statuses and reasons and the phase last published."""
    status_written_at: datetime | None = None
    """When the status was last written: large components pace their writes from it."""
    lifecycle_digest: str = ""
    """`planning.replica.lifecycle.lifecycle_digest` of the settings the Instances were last sent."""


class ReplicaReport(_Message):
    """What an InferenceReplica tells its InferenceService when its totals or conditions change."""

    component: str
    status: InferenceReplicaStatus
    condition: Condition
    """The InferenceService's `<Component>Ready` condition (spec reference §8)."""
    phase: str
    deleted: bool = False
