"""The `InferenceReplica` workflow's contract: its message names, the config its parent
sends, the state it carries through continue-as-new, and the report it sends its parent.

The InferenceService (its parent) imports this module; this module imports nothing of its
parent's. Workflows import it inside `workflow.unsafe.imports_passed_through()`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import Field, PrivateAttr

from models.base import MessageModel
from models.inferencereplica import Condition, InferenceReplicaSpec, InferenceReplicaStatus
from models.inferenceservice import ComponentSpec
from models.instance import InstancePauseMode, InstanceStatus, RetryBlock
from models.migration import MigrationAudit, MigrationRequest
from planning.replica.coordination import Coordination
from planning.replica.handover import GangSurge
from planning.replica.hold import RolloutHold
from planning.replica.migrations import MigrationTicket
from planning.replica.relocation import Relocation
from planning.replica.revisions import RevisionState
from planning.replica.template import ClusterLifecycle
from workflows.replica.memo import ReplicaMemo

# --- message names (`temporal workflow signal --workflow-id irep/... --name ...`) ---------
SIGNAL_CONFIGURE = "configure"
"""From the InferenceService: a new `ReplicaConfig` (spec, revision, pause, transient scale)."""
SIGNAL_RESET_INSTANCES = "reset_instances"
"""What OME's `ome.io/reset-instances` annotation holds (`all`, `1`, `0,2`)."""
SIGNAL_RELEASE_HELD = "release_held"
"""Lift the Held retry block of a revision (name, hash or 8-hex prefix)."""
SIGNAL_DELETE = "delete"
SIGNAL_MIGRATE = "migrate"
"""From a `Migration` workflow: a `MigrationOrder`. Sent again, it asks for the current
phase again (and brings the caps in force now)."""
SIGNAL_CANCEL_MIGRATION = "cancel_migration"
"""From a `Migration` workflow: a `MigrationCancel`."""
QUERY_STATUS = "status"
QUERY_SPEC = "spec"
"""The InferenceReplica's spec as the workflow writes it: desired Instance count and pause
(`omectl get irep` reads DESIRED from it; the status carries counts, not the desired one)."""
SIGNAL_REPLICA_CHANGED = "replica_changed"
"""To the InferenceService (its parent): a `ReplicaReport`."""


class ReplicaConfig(MessageModel):
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
    home: str | None = None
    """The workload cluster this component runs in, for a multi-cluster InferenceService's home
    (reference §16): its Instances' workflow IDs end in `@{home}`. None on a single cluster."""
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


class MigrationOrder(MessageModel):
    """A migration for this component to carry out (spec reference §13)."""

    request: MigrationRequest
    """The request, its `uuid` set."""
    accepted_at: datetime
    """When it was accepted: its deadline counts from here."""
    workflow_id: str | None = None
    """The `Migration` workflow to tell of each change (`migration_changed`)."""
    audit: MigrationAudit | None = None
    """The worker's `lifecycle.audit` caps; None: not configured, the migration waits."""


class MigrationCancel(MessageModel):
    uuid: str
    by: str = "operator"


class DeleteCounted(MessageModel):
    """A deletion this InferenceReplica asked for and counts from its request."""

    since: datetime
    """When it was asked: the Instance's deletion starts its clock then (`counted_since`)."""
    deadline: datetime | None = None
    """When its drain becomes overdue (`DrainOverdue`): `since` + `instanceReadyTimeout`."""


class ReplicaState(MessageModel):
    """The InferenceReplica workflow's whole state, handed to continue-as-new.

    Only the workflow writes it: its handlers (`workflows.replica.workflow`) record what
    arrived, and each pass's steps (`workflows.replica.instances`, `requests`, `handovers`,
    `pause`, `object`, `projection`) fold in what they sent or wrote. Each field says who
    writes it and when it is cleared.
    """

    config: ReplicaConfig
    """The parent's latest config: the run's input, replaced by each `configure`. Never cleared."""
    specs: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """The effective component of each revision hash still in use: an Instance the partition
    keeps behind, or a new one started while the update revision is Held, runs the old one;
    a canary rollback moves Instances back to the stable one's (`planning.replica.rollback`).
    Each pass adds the config's; `instances.keep_revisions` drops hashes gone from `revisions`
    (never one the rollout run names to return to)."""
    instances: dict[int, InstanceStatus] = Field(default_factory=dict)
    """Each Instance's latest `instance_changed` report, by index. Written by that handler;
    an entry goes when its report says the Instance was deleted or abandoned."""
    launched: dict[int, str] = Field(default_factory=dict)
    """Instances started whose first report has not arrived: index -> revision hash. Written
    by `children.start_instance` before the start; cleared by the Instance's first report, or
    by the start itself when it found the index's ended Instance still closing. A single-pod
    Instance's first report is the one that says it left `Creating` (`launched_by_parent`)."""
    shows_launched: bool = False
    """Whether this run's status lists the `launched` Instances as `Creating` rows
    (`projection.launched_rows`). Asked at each run's start (`workflow.LAUNCHED_ROWS`)."""
    shows_requested: bool = False
    """Whether this run counts an Instance it told to update as `Updating` from its own request
    (`requested_updates`) until a report at the new revision comes: in the rules' facts, the
    status rows and the safety re-list. Its update requests say so (`counted_by_parent`), and
    the Instance sends no report that would only tell it that. Asked at each run's start
    (`workflow.REQUESTED_ROWS`)."""
    shows_run_cap: bool = False
    """Whether a pass that starts some Instances and leaves the rest to a rollout run's cap shows
    the run's hold (`reconcile`'s `rest_held_by_run`). Asked at each run's start
    (`workflow.RUN_CAP_HOLDS`)."""
    writes_status_locally: bool = False
    """Whether this run writes the object's status through a local activity
    (`projection.write_status`). Asked at each run's start (`workflow.LOCAL_STATUS_WRITE`)."""
    requested_updates: dict[int, str] = Field(default_factory=dict)
    """Updates signalled whose report does not show the target yet: index -> revision hash.
    Written when the plan's updates are sent (`instances.requests`); cleared by the report
    that shows the target revision, or by the Instance's end."""
    removing: list[int] = Field(default_factory=list)
    """Instances told to delete that have not reported their end: appended when a scale-down,
    a finished handover, a migration or the deletion tells one to go (`deletions.tell_to_delete`);
    an index leaves when its Instance reports it was deleted or abandoned."""
    counts_deletes: bool = False
    """Whether this run counts an Instance it told to delete as `Deleting` from its own request
    (`requested_deletes`): in its status rows and its drain deadlines. Its delete requests say so
    (`counted_since`), and the Instance sends no report that would only tell it that. Asked at
    each run's start (`deletions.COUNTED_DELETES`)."""
    requested_deletes: dict[int, DeleteCounted] = Field(default_factory=dict)
    """Deletions sent with `counted_since` whose Instance has not reported its end: index -> when
    and until when. Written with `removing` (`deletions.tell_to_delete`); an entry leaves with it."""
    counts_launched_removals: bool = False
    """Whether this run counts an Instance told to delete before its first report came (only in
    `launched`) as deleting: in the rules' facts, so no later pass plans its removal again, and
    in its status row; `removing` then holds each index once. Asked at each run's start
    (`deletions.LAUNCHED_REMOVALS`)."""
    instances_told_pause: InstancePauseMode | None = None
    """The pause every Instance was last told (`pause.tell_pause`, each pass); a change of
    `config.pause_mode` is news. None: unpaused (or none told yet)."""
    instances_told_drain_hold: str | None = None
    """The rollout run's drain hold the Instances were last told (`pause.tell_pause`); None:
    drains are free (or none told yet)."""
    drain_hold_told: list[int] = Field(default_factory=list)
    """The Instances told that hold: one started while it is in force is told too."""
    revisions: RevisionState = Field(default_factory=RevisionState)
    """The current and update revisions and their history, ControllerRevision-style. Each pass
    observes the config's (`observe_template`), then completes a finished rollout and trims
    the history (`instances.keep_revisions`)."""
    gang_surges: dict[int, GangSurge] = Field(default_factory=dict)
    """Multi-pod surge handovers in flight (`planning.replica.handover`): replacement index ->
    the Instance it replaces; no Instance reports this, only this workflow knows it. Added
    when the plan starts a replacement; marked abandoned, then dropped, by the replacement's
    reports (`handovers.note_surge_report`); forgotten once either side is gone
    (`handovers.settle_handovers`) or when its start must be tried again."""
    gang_blocks: list[RetryBlock] = Field(default_factory=list)
    """Retry blocks kept from surge replacements that gave up and deleted themselves: written
    by `handovers.note_surge_report`, moved on when a new attempt starts
    (`instances.carry_out`); dropped once they are not the update revision's or an Instance
    is Ready on it (`handovers.settle_handovers`), or on release (`requests.release`)."""
    hold: RolloutHold | None = None
    """Why the rollout waits, from the last plan (`instances.carry_out`, each pass); shown in
    the status and kept so the hold's start time carries over. None: nothing holds it."""
    announced_held: list[str] = Field(default_factory=list)
    """Revision hashes whose `RetryHeld` Event was recorded (`instances.announce_held`), so it
    is recorded once; a hash leaves when the user releases its block (`requests.release`)."""
    pending_resets: list[str] = Field(default_factory=list)
    """`reset_instances` requests not answered yet: appended by that handler, emptied by the
    next pass (`requests.answer_resets`)."""
    pending_releases: list[str] = Field(default_factory=list)
    """`release_held` requests not answered yet: appended by that handler, emptied by the next
    pass (`requests.answer_releases`)."""
    deleting: bool = False
    """Set by the `delete` signal; never cleared: the run tears everything down and ends."""
    teardown_started_at: datetime | None = None
    """When the teardown deleted the object, which its finalizer then holds (`teardown.tear_down`):
    the teardown deadline counts from it. None: not begun (or a history from before the finalizer)."""
    teardown_blocked_at: datetime | None = None
    """When `TeardownBlocked` was last recorded, so it repeats once per re-check interval."""
    spec_applied_at: datetime | None = None
    """When the object was last applied (`object.write_spec`): an apply every few minutes puts
    back a finalizer patched off a live object. None: not since the finalizer existed."""
    next_relist_at: datetime | None = None
    """When the component's pods are re-listed next (`recheck.recheck_pods`, with the pod net):
    an absolute time, so messages arriving every few minutes do not put it off. Set after each
    re-list; None: due one `pod_relist_seconds` after the run's first wait."""
    relisted_up_to: int = -1
    """The last Instance index the re-list refreshed; the next one starts after it, so no more
    than `planning.replica.recheck.MAX_RELISTS_PER_PASS` a pass still reach every Instance."""
    ir_uid: str | None = None
    """The InferenceReplica object's uid, from its first write (`object.write_spec`); None
    until then, which is how a pass knows the object must be written first."""
    podgroup_crd: bool | None = None
    """Whether the PodGroup CRD is installed, checked once on the first pass of a multi-pod
    component (`object.check_gang_scheduling`); None: not checked."""
    conditions: list[Condition] = Field(default_factory=list)
    """The status conditions last built (`projection.publish`, each pass), whose transition
    times the next status keeps."""
    last_desired: int | None = None
    """The desired count of the last pass (`InferenceReplicaWorkflow.observe_desired`): a
    change is a `Scaled` Event. None before the first pass."""
    written_spec: str = ""
    """Fingerprint (`planning.replica.publish.digest`) of the object last applied
    (`object.write_spec`): the same rendering is not written again."""
    written_status: str = ""
    """Fingerprint of the status body last written (`projection.publish`)."""
    reported: str = ""
    """Fingerprint of the report last sent to the parent, transition time left out
    (`projection.report`): the same report is not sent again."""
    published_key: str = ""
    """Fingerprint of the conditions' statuses and reasons, the component condition and the
    phase last published (`projection.publish`): a change there is written at once."""
    status_written_at: datetime | None = None
    """When the status was last written (`projection.publish`): large components pace their
    writes from it. None: never written."""
    migrations: list[MigrationTicket] = Field(default_factory=list)
    """The component's migrations (`planning.replica.migrations`): active ones, and ended ones
    for their audit window. Added from `migration_orders` and advanced by each pass
    (`workflows.replica.migrations`)."""
    migration_orders: list[MigrationOrder] = Field(default_factory=list)
    """`migrate` orders not folded in yet: appended by that handler, emptied by the next pass."""
    migration_cancels: list[MigrationCancel] = Field(default_factory=list)
    """`cancel_migration` requests not folded in yet: emptied by the next pass."""
    migrations_told: dict[str, str] = Field(default_factory=dict)
    """uuid -> fingerprint of the progress last sent to its `Migration` workflow; an entry
    goes with its ticket."""
    relocations: dict[int, Relocation] = Field(default_factory=dict)
    """Automatic relocations (`planning.replica.relocation`), by Instance index: the attempts
    and the nodes left, which `children.spec_for` keeps that Instance's pods off. Written by
    each pass (`workflows.replica.relocations`); an entry goes once its Instance is Ready on
    its target revision, or gone."""
    lifecycle_digest: str = ""
    """`planning.replica.lifecycle.lifecycle_digest` of the settings the Instances were last
    sent (`instances.resend_lifecycle`, each pass); "" before the first pass, which only
    remembers it."""
    _memo: ReplicaMemo = PrivateAttr(default_factory=ReplicaMemo)

    @property
    def memo(self) -> ReplicaMemo:
        """Per-Instance results kept between passes (`workflows.replica.memo`); never carried."""
        return self._memo


class ReplicaReport(MessageModel):
    """What an InferenceReplica tells its InferenceService when its totals or conditions change."""

    component: str
    status: InferenceReplicaStatus
    condition: Condition
    """The InferenceService's `<Component>Ready` condition (spec reference §8)."""
    phase: str
    deleted: bool = False
    failed_on_update: int = 0
    """Instances Failed while on, or moving to, the update revision: a rollout run fails its
    group for these, not for a failure of an Instance on another revision."""
    surge_serving: int = 0
    """Instances moving to the update revision whose new pod serves while the old one still
    does (a SurgeThenDrain at its drain step): a rollout run counts them as serving the new
    revision, which the totals do only once the old pod has gone."""
    on_revision: dict[str, int] = Field(default_factory=dict)
    """While the run rolls the component back (`Coordination.rollback_to`): Instances per
    revision hash they run or move to (an Instance moving counts under both). The rollback
    is done once the revision rolled back from has none. Empty outside a rollback."""
    stable_revision_missing: bool = False
    """The revision the run names to return to (`Coordination.rollback_to`, else `stable`)
    is no longer retained here: a rollback cannot happen (`StableRevisionMissing`)."""
