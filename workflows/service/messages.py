"""The `InferenceService` workflow's contract: its message names, requests and answers, the
state it carries through continue-as-new, and the `status` query's view.

Users steer it with these names (`temporal workflow signal --name pause`); the watcher
sends `deployment_changed`. The contract of its children lives with them
(`workflows.replica.messages`). The InferenceService object itself is rendered here
(`isvc_object`), as accepted.

Workflows import this module inside `workflow.unsafe.imports_passed_through()`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import Field, model_validator

from models.base import MessageModel
from models.inferencereplica import Condition
from models.instance import InstancePauseMode
from models.isvc_status import InferenceServiceStatus
from planning.objects import OME_API_VERSION
from planning.replica.template import ClusterLifecycle
from planning.service.deployment import DeploymentObserved
from planning.service.pause import PauseMode
from planning.service.pause_signal import PlannedPauseEvent, replica_pause_mode
from planning.service.relay import ISVC_FINALIZER
from workflows.replica.messages import ReplicaReport
from workflows.rollout.messages import CanaryRequest, RolloutReport, RolloutRow
from workflows.service.homes import PlacementTracking

# --- message names (user interface: `temporal workflow signal --name ...`) ---------------
UPDATE_APPLY = "apply"
SIGNAL_PAUSE = "pause"
SIGNAL_RESUME = "resume"
"""Without input: lift a pause. With a canary revision (`engine=<hash>` or `<hash>`): retry
that `Failed` or `RolledBack` canary from step 1 (OME's `ome.io/rollout-resume`)."""
SIGNAL_PROMOTE = "promote"
SIGNAL_ROLLBACK = "rollback"
UPDATE_PROMOTE = "promote"
"""Updates of the same names as the signals answer accepted, or fail with the refusal text."""
UPDATE_ROLLBACK = "rollback"
UPDATE_RETRY = "retry"
SIGNAL_REPIN = "repin"
"""Pin the live `spec.rollout` onto the active run (spec reference §4); also an Update."""
UPDATE_REPIN = "repin"
SIGNAL_MIGRATE = "migrate"
"""A migration request (spec reference §13): its own `Migration` workflow carries it out."""
UPDATE_MIGRATE = "migrate"
SIGNAL_SCALE = "scale"
SIGNAL_RELEASE_HELD = "release_held"
SIGNAL_RESET_INSTANCES = "reset_instances"
SIGNAL_DELETE = "delete"
QUERY_STATUS = "status"
QUERY_ROLLOUT_STATUS = "rollout_status"
"""A row per rollout group and component (`kubectl ome rollout status`, computed from the run itself)."""
QUERY_EXPLAIN = "explain"
"""Why a component waits, and what would release it; input: the component's name."""
QUERY_PREVIEW = "preview"
"""The plan a manifest would run, without applying it; input: the manifest."""
QUERY_APPLIED = "applied"
"""What the workflow holds of the object (`AppliedView`): the controller asks before relaying."""
SIGNAL_RUNTIME_CHANGED = "runtime_changed"
"""From the controller: a ServingRuntime or ClusterServingRuntime the service uses changed."""
SIGNAL_DEPLOYMENT_CHANGED = "deployment_changed"
"""From the watcher (`workers.watch.deployments`): a Deployment-mode component's Deployment changed."""

ADMISSION_DENIED = "AdmissionDenied"
MIGRATION_REJECTED = "MigrationRequestRejected"
"""`ApplicationError.type` of an invalid `migrate` request (a bad field): fix it and send again."""
MIGRATION_CONFLICT = "MigrationPreconditionConflict"
"""`ApplicationError.type` of a `migrate` request refused for the service's state (being deleted,
the component not running OMENative Instances, or not planned yet): `migration start`'s
state refusals, a conflict (spec reference §3.3, §13; omectl exits 3)."""
"""`ApplicationError.type` of a refused manifest, on the update and on a direct start."""

CONTINUED_STATE_KEY = "continuedState"
"""The InferenceService's run input after continue-as-new: `{"continuedState": {...}}`."""


class ApplyResult(MessageModel):
    """What `apply` answers: accepted with warnings, and the generation now in force."""

    accepted: bool
    generation: int
    changed: bool
    warnings: list[str] = Field(default_factory=list)
    superseded: bool = False
    """The manifest came from an object generation older than the one the workflow holds:
    nothing was done (a relay that arrived late)."""


class ApplyOrigin(MessageModel):
    """`apply`'s second input, from the controller: the InferenceService object the manifest
    was read from (`kubectl apply`). Without it the manifest came through the `temporal` CLI."""

    object_generation: int
    uid: str | None = None
    resource_version: str | None = None


class AppliedView(MessageModel):
    """The `applied` query: the spec the workflow holds, as the controller compares it."""

    generation: int
    """The workflow's own count of accepted changes."""
    object_generation: int
    """`metadata.generation` of the object whose spec the workflow holds (0: not known yet)."""
    digest: str
    """`planning.service.relay.manifest_digest` of the manifest it holds."""
    deleting: bool


class ScaleRequest(MessageModel):
    """`scale`: a transient Instance count, until the autoscaler or the next apply sets one."""

    component: str = "engine"
    replicas: Any = None
    """Checked by the workflow (`planning.service.scale`), not on decoding: a refused value
    (`-3`, `2.5`, `"three"`) is answered with a `ScaleRejected` Event naming it, which a
    payload that fails to decode could not be."""


class RejectedRequest(MessageModel):
    """A user's request the workflow refused: in the `status` query and as a Warning Event."""

    signal: str
    request: dict[str, Any]
    reason: str
    message: str
    at: datetime | None = None


class ReleaseHeldRequest(MessageModel):
    """`release_held`: lift the Held retry block of `revision` (name, hash or 8-hex prefix)."""

    component: str = "engine"
    revision: str


class ResetInstancesRequest(MessageModel):
    """`reset_instances`: what OME's `ome.io/reset-instances` annotation holds (`all`, `1`, `0,2`)."""

    component: str = "engine"
    instances: str


class Forward(MessageModel):
    """`release_held` / `reset_instances`: `value` for `signal` to `component`'s InferenceReplica."""

    component: str
    signal: str
    value: str
    """The request's `revision` or `instances`, as the InferenceReplica's signal takes it."""

    @model_validator(mode="before")
    @classmethod
    def _carried_tuple(cls, data: Any) -> Any:
        """State carried from before this model: `[component, signal, {"value": value}]`."""
        if isinstance(data, list | tuple):
            component, signal, payload = data
            return {"component": component, "signal": signal, "value": payload["value"]}
        return data


# --- InferenceService -------------------------------------------------------------------


class RolloutTracking(MessageModel):
    """The InferenceService's side of its rollout runs (`workflows.service.rollouts`)."""

    run: int | None = None
    """The active run (the generation that opened it); None between runs."""
    targets: dict[str, str] = Field(default_factory=dict)
    """Component -> the revision hash the active run moves it to."""
    target_names: dict[str, str] = Field(default_factory=dict)
    """Component -> that revision's name (what the InferenceReplicas report)."""
    report: RolloutReport | None = None
    """The latest report of the active run, or of the last one once it closed."""
    forwarded: dict[str, str] = Field(default_factory=dict)
    """Fingerprints of what the active run was last sent: each component's counts, the
    pause (`pause`) and, while it is parked, `spec.rollout` (`respec`)."""
    pairing: str | None = None
    """The `spec.rollout.pairingProtocol` token the grouped components serve at rest (taken
    whenever no run is active and none is asked for): a run's `pairing_from`."""
    canary_requests: list[CanaryRequest] = Field(default_factory=list)
    """Operator requests (promote, rollback, retry) not yet delivered to the active run."""
    answers_seen: list[str] = Field(default_factory=list)
    """Request IDs whose refusal was already taken into `last_rejected_request`."""


class ServiceState(MessageModel):
    """The InferenceService workflow's whole state, handed to continue-as-new."""

    manifest: dict[str, Any]
    admitted: bool = False
    generation: int = 0
    applied_generation: int = 0
    object_generation: int = 0
    """`metadata.generation` of the object holding `manifest`: from the controller's relay, or
    from the workflow's own write (0: not known yet)."""
    observed_generation: int = 0
    """`object_generation` as of the last pass that applied the manifest: `status.observedGeneration`."""
    spec_from_object: bool = False
    """The manifest came from the object (`kubectl`); else from the `temporal` CLI, and the
    workflow writes it to the object as `kubectl apply` would."""
    observes_object: bool = False
    """`status.observedGeneration` is the object's generation (runs started since patch
    `isvc-observed-object-generation`); before, the workflow's own count."""
    temporal_write_pending: bool = False
    """A spec from the `temporal` CLI not yet written to the object: a relay of the generation
    it will be written over is older than it."""
    superseded_at: int = 0
    """The object generation whose newer spec stopped the workflow's own write (recorded once)."""
    runtime_stale: bool = False
    """The controller said the runtime changed: the next pass re-reads it."""
    isvc_uid: str | None = None
    runtime_spec: dict[str, Any] | None = None
    runtime_missing: str | None = None
    modes: dict[str, str] = Field(default_factory=dict)
    pause: PauseMode | None = None
    """The pause depth in force (`true` / `freeze`); None when not paused."""
    pause_events: list[PlannedPauseEvent] = Field(default_factory=list)
    """(reason, message, type) of pause/resume outcomes the next pass records as Events."""
    transient: dict[str, int] = Field(default_factory=dict)
    sent_configs: dict[str, str] = Field(default_factory=dict)
    """Fingerprint of the last `configure` sent to each InferenceReplica."""
    replicas: dict[str, ReplicaReport] = Field(default_factory=dict)
    forwards: list[Forward] = Field(default_factory=list)
    """Requests to pass on to an InferenceReplica at the next pass."""
    deleting: bool = False
    delete_sent: list[str] = Field(default_factory=list)
    retiring: dict[str, str] = Field(default_factory=dict)
    """Components the spec no longer runs (or runs in another mode): component -> old mode,
    until their InferenceReplica has drained and their objects are gone."""
    conditions: list[Condition] = Field(default_factory=list)
    written_status: str = ""
    multinode_shown: bool = False
    """Whether the status names a component pinned to MultiNode (`projection.MULTINODE_SHOWN`,
    asked once such a component is met). Runs from before left it out of the status."""
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
    rollout: RolloutTracking = Field(default_factory=RolloutTracking)
    home: str | None = None
    """Set on a multi-cluster home's member (`isvc/{ns}/{name}@{home}`): the workload cluster
    it runs in; its children's IDs end in `@{home}` (`workflows.service.homes`)."""
    placement_parent: str | None = None
    """A member's placement source, which it reports to with `member_changed`."""
    source_generation: int = 0
    """A member's: the source generation of the copy it runs."""
    endpoint: str | None = None
    """A member's endpoint, from its cluster's inference Gateway."""
    copy_refused: str | None = None
    """A member's: why it refused the source's latest copy (it runs the one before)."""
    member_sent: str = ""
    """A member's last report to its source (fingerprint)."""
    placement: PlacementTracking | None = None
    """The placement source's homes and TrafficMap; None for a single-cluster service."""

    @model_validator(mode="before")
    @classmethod
    def _carried_pause(cls, data: Any) -> Any:
        """State carried from before `pause` alone held the pause: `paused` goes, and
        `paused: true` without a depth is `true` (Recover), as it was then read."""
        if isinstance(data, dict) and "paused" in data:
            data = dict(data)
            paused = data.pop("paused")
            data["pause"] = (data.get("pause") or PauseMode.RECOVER.value) if paused else None
        return data

    @property
    def paused(self) -> bool:
        """Whether a pause of either depth is in force."""
        return self.pause is not None

    @property
    def replica_pause_mode(self) -> InstancePauseMode | None:
        """`spec.pauseMode` of each InferenceReplica: `Recover`, `Freeze`, or None."""
        return replica_pause_mode(self.pause)


class ServiceStatusView(MessageModel):
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
    """The InferenceService as stored in the cluster: the accepted manifest, without status,
    with the product's finalizer (held until the workflow has torn everything down)."""
    metadata = {
        key: value
        for key, value in (manifest.get("metadata") or {}).items()
        if key in ("name", "labels", "annotations")
    }
    metadata["namespace"] = namespace
    metadata["finalizers"] = [ISVC_FINALIZER]
    return {
        "apiVersion": OME_API_VERSION,
        "kind": "InferenceService",
        "metadata": metadata,
        "spec": manifest.get("spec") or {},
    }


# --- rollout queries -------------------------------------------------------------------


class RolloutStatusView(MessageModel):
    """`rollout_status`: REPORTED (`NotConfigured` without groups), the run and its rows."""

    reported: str
    run: int | None = None
    active: bool = False
    plan_digest: str | None = None
    parked_reason: str | None = None
    outcome: str | None = None
    rows: list[RolloutRow] = Field(default_factory=list)


class ExplainView(MessageModel):
    """`explain <component>`: why it waits and what would release it."""

    component: str
    grouped: bool
    group: int | None = None
    run: int | None = None
    target: str | None = None
    gate: str | None = None
    reason: str | None = None
    since: datetime | None = None
    release: str | None = None
    time_left: str | None = None
    """Until a soak ends, as Go prints a duration."""
    limit: int | None = None
    updated: int = 0
    replicas: int = 0
    plan_ready: str | None = None
    drift: str | None = None
    summary: str = ""


class PreviewGroupView(MessageModel):
    index: int
    components: list[str]
    strategy: str
    moves: list[str]
    batches: dict[str, list[int]]
    gates: list[str]
    soak: str | None = None


class PreviewView(MessageModel):
    """`preview <manifest>`: what `apply` would run, changing nothing."""

    accepted: bool
    reasons: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    moves: dict[str, str] = Field(default_factory=dict)
    """Component -> the revision the change gives it."""
    groups: list[PreviewGroupView] = Field(default_factory=list)
    stages: list[list[str]] = Field(default_factory=list)
    independent: list[str] = Field(default_factory=list)
    parked: str | None = None
    notes: list[str] = Field(default_factory=list)
