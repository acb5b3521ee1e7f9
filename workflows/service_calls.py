"""Messages, carried state and object manifests of the InferenceService and InferenceReplica
workflows.

The two workflows talk to users and to each other with the names below (`temporal workflow
signal --name pause`), and carry their whole state through continue-as-new in one model each
(`ServiceState`, `ReplicaState`). Manifests come from `planning.service_objects`;
the InferenceService object itself is rendered here (`isvc_object`), as accepted.

Workflows import this module inside `workflow.unsafe.imports_passed_through()`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from models.inferencereplica import Condition, InferenceReplicaSpec, InferenceReplicaStatus
from models.inferenceservice import ComponentSpec
from models.instance import InstancePauseMode, InstanceStatus, RetryBlock
from models.isvc_status import InferenceServiceStatus
from planning.pause_signal import PlannedPauseEvent, replica_pause_mode
from planning.replica_handover import GangSurge
from planning.replica_hold import RolloutHold as PlannedHold
from planning.replica_revisions import RevisionState
from planning.replica_template import ClusterLifecycle
from planning.service_deployment import DeploymentObserved
from planning.service_pause import PauseMode

API_VERSION = "ome.io/v1beta1"

# --- message names (user interface: `temporal workflow signal --name ...`) ---------------
UPDATE_APPLY = "apply"
SIGNAL_PAUSE = "pause"
SIGNAL_RESUME = "resume"
SIGNAL_SCALE = "scale"
SIGNAL_RELEASE_HELD = "release_held"
SIGNAL_RESET_INSTANCES = "reset_instances"
SIGNAL_DELETE = "delete"
QUERY_STATUS = "status"
# Between the workflows.
SIGNAL_CONFIGURE = "configure"
SIGNAL_REPLICA_CHANGED = "replica_changed"
SIGNAL_DEPLOYMENT_CHANGED = "deployment_changed"
"""From the watcher (`workers.deployment_watch`): a Deployment-mode component's Deployment changed."""

ADMISSION_DENIED = "AdmissionDenied"
"""`ApplicationError.type` of a refused manifest, on the update and on a direct start."""

CONTINUED_STATE_KEY = "continuedState"
"""The InferenceService's run input after continue-as-new: `{"continuedState": {...}}`."""


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ApplyResult(_Message):
    """What `apply` answers: accepted with warnings, and the generation now in force."""

    accepted: bool
    generation: int
    changed: bool
    warnings: list[str] = Field(default_factory=list)


class ScaleRequest(_Message):
    """`scale`: a transient Instance count, until the autoscaler or the next apply sets one."""

    component: str = "engine"
    replicas: Any = None
    """Checked by the workflow (`planning.service_scale`), not on decoding: a refused value
    (`-3`, `2.5`, `"three"`) is answered with a `ScaleRejected` Event naming it, which a
    payload that fails to decode could not be."""


class RejectedRequest(_Message):
    """A user's request the workflow refused: in the `status` query and as a Warning Event."""

    signal: str
    request: dict[str, Any]
    reason: str
    message: str
    at: datetime | None = None


class ReleaseHeldRequest(_Message):
    """`release_held`: lift the Held retry block of `revision` (name, hash or 8-hex prefix)."""

    component: str = "engine"
    revision: str


class ResetInstancesRequest(_Message):
    """`reset_instances`: what OME's `ome.io/reset-instances` annotation holds (`all`, `1`, `0,2`)."""

    component: str = "engine"
    instances: str


# --- InferenceReplica -------------------------------------------------------------------


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
    """Multi-pod surge handovers in flight (`planning.replica_handover`): replacement index ->
    the Instance it replaces; no Instance reports this, only this workflow knows it."""
    gang_blocks: list[RetryBlock] = Field(default_factory=list)
    """Retry blocks kept from surge replacements that gave up and deleted themselves."""
    hold: PlannedHold | None = None
    announced_held: list[str] = Field(default_factory=list)
    pending_resets: list[str] = Field(default_factory=list)
    pending_releases: list[str] = Field(default_factory=list)
    deleting: bool = False
    ir_uid: str | None = None
    podgroup_crd: bool | None = None
    conditions: list[Condition] = Field(default_factory=list)
    last_desired: int | None = None
    written_spec: str = ""
    """Fingerprints (`replica_projection.digest`) of what was last written and reported."""
    written_status: str = ""
    reported: str = ""
    published_key: str = ""
    """Fingerprint of the conditions' statuses and reasons and the phase last published."""
    status_written_at: datetime | None = None
    """When the status was last written: large components pace their writes from it."""
    lifecycle_digest: str = ""
    """`planning.replica_lifecycle.lifecycle_digest` of the settings the Instances were last sent."""


class ReplicaReport(_Message):
    """What an InferenceReplica tells its InferenceService when its totals or conditions change."""

    component: str
    status: InferenceReplicaStatus
    condition: Condition
    """The InferenceService's `<Component>Ready` condition (spec reference §8)."""
    phase: str
    deleted: bool = False


# --- InferenceService -------------------------------------------------------------------


class ServiceState(_Message):
    """The InferenceService workflow's whole state, handed to continue-as-new."""

    manifest: dict[str, Any]
    admitted: bool = False
    generation: int = 0
    applied_generation: int = 0
    isvc_uid: str | None = None
    runtime_spec: dict[str, Any] | None = None
    runtime_missing: str | None = None
    modes: dict[str, str] = Field(default_factory=dict)
    paused: bool = False
    pause: PauseMode | None = None
    """The pause depth (`true` / `freeze`); `paused` is True whenever it is set."""
    pause_events: list[PlannedPauseEvent] = Field(default_factory=list)
    """(reason, message, type) of pause/resume outcomes the next pass records as Events."""

    @property
    def pause_depth(self) -> PauseMode | None:
        """The pause in force; a pause carried from before depths existed is `true`."""
        if not self.paused:
            return None
        return self.pause or PauseMode.RECOVER

    @property
    def replica_pause_mode(self) -> InstancePauseMode | None:
        """`spec.pauseMode` of each InferenceReplica: `Recover`, `Freeze`, or None."""
        return replica_pause_mode(self.pause_depth)

    transient: dict[str, int] = Field(default_factory=dict)
    sent_configs: dict[str, str] = Field(default_factory=dict)
    """Fingerprint of the last `configure` sent to each InferenceReplica."""
    replicas: dict[str, ReplicaReport] = Field(default_factory=dict)
    forwards: list[tuple[str, str, dict[str, Any]]] = Field(default_factory=list)
    """(component, signal, payload) to pass on to an InferenceReplica at the next pass."""
    deleting: bool = False
    delete_sent: list[str] = Field(default_factory=list)
    retiring: dict[str, str] = Field(default_factory=dict)
    """Components the spec no longer runs (or runs in another mode): component -> old mode,
    until their InferenceReplica has drained and their objects are gone."""
    conditions: list[Condition] = Field(default_factory=list)
    written_status: str = ""
    cluster: ClusterLifecycle = Field(default_factory=ClusterLifecycle)
    deployments: dict[str, DeploymentObserved] = Field(default_factory=dict)
    """Each Deployment-mode component's Deployment as last read or reported by the watcher."""
    deployment_replicas: dict[str, int] = Field(default_factory=dict)
    """The replica count last written to each Deployment-mode component's Deployment."""
    deployment_rechecks: int = 0
    """Re-reads in a row of Deployments still converging with nothing new: the back-off step."""
    scale_requests: list[ScaleRequest] = Field(default_factory=list)
    """`scale` signals received, checked and applied (or refused) by the next pass."""
    last_rejected: RejectedRequest | None = None
    unrecorded_rejections: list[RejectedRequest] = Field(default_factory=list)
    """Refusals whose Warning Event the next pass records."""


class ServiceStatusView(_Message):
    """The `status` query: the InferenceService status block, plus what the workflow holds."""

    name: str
    namespace: str
    generation: int
    phase: str
    paused: bool
    pause: str | None = None
    """The pause depth in force: `true` (updates held, repairs go on) or `freeze` (repairs stop too)."""
    deleting: bool
    transient_replicas: dict[str, int] = Field(default_factory=dict)
    status: InferenceServiceStatus
    deployments: dict[str, DeploymentObserved] = Field(default_factory=dict)
    """Totals of the Deployment-mode components' Deployments (the InferenceService status
    keeps its `lifecycle` blocks for OMENative components, spec reference §7)."""
    last_rejected_request: RejectedRequest | None = None
    """The last request refused (a `scale` out of range, to an unknown component, ...), with
    the same message as its `ScaleRejected` Warning Event."""


# --- the InferenceService object -----------------------------------------------------------


def isvc_object(manifest: dict[str, Any], namespace: str) -> dict[str, Any]:
    """The InferenceService as stored in the cluster: the accepted manifest, without status."""
    metadata = {
        key: value
        for key, value in (manifest.get("metadata") or {}).items()
        if key in ("name", "labels", "annotations")
    }
    metadata["namespace"] = namespace
    return {
        "apiVersion": API_VERSION,
        "kind": "InferenceService",
        "metadata": metadata,
        "spec": manifest.get("spec") or {},
    }
