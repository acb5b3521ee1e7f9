"""The `Rollout` workflow's contract: its input, the counts its parent forwards, what it
reports back, the state it carries through continue-as-new, and the `status` query.

The InferenceService (its parent) starts one per run (`rollout/{ns}/{isvc}/{run}`),
forwards each grouped InferenceReplica's counts (`progress`), and passes on `pause`,
`supersede` and, while the run is parked, `respec`. The Rollout answers with a
`RolloutReport` (`rollout_changed`): the pinned plan, each group's phase, and each moved
component's allowance, which the parent hands to the InferenceReplica in its config.

Workflows import this module inside `workflow.unsafe.imports_passed_through()`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from models.base import MessageModel
from models.canary_analysis import CanarySettingsResult

# --- message names (`temporal workflow signal --workflow-id rollout/... --name ...`) ------
SIGNAL_PROGRESS = "progress"
"""From the InferenceService: one grouped component's latest `ComponentCounts`."""
SIGNAL_PAUSE = "pause"
"""From the InferenceService: the pause depth in force (`true`, `freeze`) or None."""
SIGNAL_SUPERSEDE = "supersede"
"""From the InferenceService: a newer run opened; this one closes as `Superseded`."""
SIGNAL_CLOSE = "close"
"""From the InferenceService: it is being deleted; the run ends as `Closed` (its InferenceReplicas go too)."""
SIGNAL_RESPEC = "respec"
"""From the InferenceService: `spec.rollout` changed; a parked run resolves its plan again."""
SIGNAL_CANARY = "canary_request"
"""From the InferenceService (or an operator): a `CanaryRequest` (promote, rollback, retry);
a refused one becomes a Warning Event on the InferenceService."""
UPDATE_CANARY = "canary"
"""The same `CanaryRequest` as an Update: answers the acceptance, or fails with the refusal text."""
QUERY_STATUS = "status"
SIGNAL_ROLLOUT_CHANGED = "rollout_changed"
"""To the InferenceService (its parent): a `RolloutReport`."""


class RolloutInput(MessageModel):
    """Everything a run starts from; the plan is pinned from `rollout` at start."""

    namespace: str
    isvc: str
    isvc_uid: str | None = None
    run: int
    """The generation that opened the run."""
    rollout: dict[str, Any]
    """`spec.rollout` as applied (wire form)."""
    targets: dict[str, str]
    """Component -> the revision hash it moves to."""
    target_names: dict[str, str] = Field(default_factory=dict)
    previous: dict[str, str] = Field(default_factory=dict)
    """Component -> the revision it moves from (`rollout status` PREVIOUS)."""
    replicas: dict[str, int] = Field(default_factory=dict)
    """Each grouped component's desired Instances when the run opened."""
    strategies: dict[str, str] = Field(default_factory=dict)
    """Each grouped component's update strategy (in-place skips the ratio check)."""
    paused: str | None = None
    parent_workflow_id: str | None = None
    pairing_from: str | None = None
    """The `spec.rollout.pairingProtocol` token the components served before this change: with
    a new token in the plan, the run keeps a same-token engine and decoder pair serving."""
    pairing_protocol: str | None = None
    """The token this change rolls out (`status...traffic[].pairingProtocol`)."""
    min_replicas: dict[str, int] = Field(default_factory=dict)
    """Each grouped component's `minReplicas` as set in the InferenceService (a canary step's
    capacity is a share of it, spec reference §1.3); absent when unset."""
    annotations: dict[str, str] = Field(default_factory=dict)
    """The InferenceService's annotations when the run opened (`ome.io/rollout-ready-timeout`)."""
    stable: dict[str, str] = Field(default_factory=dict)
    """Component -> the revision hash serving when the run opened (a canary's stable
    revision, which a rollback returns to)."""


class CanaryRequest(MessageModel):
    """An operator's request to a canary group (spec reference §3): `promote` (a manual gate,
    or an analysis gate with `override_analysis`), `rollback`, `retry` (a `Failed` or
    `RolledBack` canary from step 1), `repin` (§4), or `discard` (a pause that drops the
    promote and rollback requests not yet acted on, §5)."""

    action: Literal["promote", "rollback", "retry", "repin", "discard"]
    revision: str | None = None
    """The canary revision hash it is meant for; a request naming an older canary is refused.
    For `repin`: the plan digest the operator saw (`rp1:<12 hex>`), or `now`."""
    rollout: dict[str, Any] | None = None
    """For `repin`: the live `spec.rollout` to pin (the InferenceService fills it in)."""
    override_analysis: bool = False
    component: str | None = None
    """Selects the group when the plan has several canary groups."""
    request_id: str = ""


class CanaryAnswer(MessageModel):
    """What became of a `CanaryRequest` that carried a `request_id`: the InferenceService's
    Update waits for it to answer its caller."""

    request_id: str
    action: str
    accepted: bool
    message: str
    """What it does, or the refusal text (spec reference §3.2)."""


ANSWERS_KEPT = 20


class ComponentCounts(MessageModel):
    """One InferenceReplica's counts, as its InferenceService forwards them."""

    component: str
    revision: str | None = None
    """The update revision the counts are about: counts of another revision count as none moved."""
    replicas: int = 0
    updated: int = 0
    updated_serving: int = 0
    serving: int = 0
    failed: int = 0
    surge_serving: int = 0
    """Moving Instances whose new pod serves beside the old one (a held SurgeThenDrain drain)."""
    stable_missing: bool = False
    """A canary rollback cannot find the stable revision (`StableRevisionMissing`)."""
    on_revisions: dict[str, int] = Field(default_factory=dict)
    """While rolling back: Instances per revision hash they run or move to (an Instance moving
    counts under both), so a rollback is done only once none is left on the canary."""


class AllowanceView(MessageModel):
    """How many Instances of a component may be on the target now, and what holds it."""

    limit: int
    gate: str | None = None
    reason: str | None = None
    release: str | None = None
    """What would release the hold (the `explain` query)."""
    wake_at: datetime | None = None
    """When the hold ends by itself (a soak)."""
    max_surge: int | str | None = None
    max_unavailable: int | str | None = None
    """A rolling-update group's budgets, which replace the component's own."""
    drain_hold: str | None = None
    """Why old Instances may not drain yet (gate `Pairing`); None: they may."""
    rollback_to: str | None = None
    """A canary rolling back: the stable revision hash the Instances return to."""
    stable: str | None = None
    """A canary's stable revision hash: the InferenceReplica keeps it for a rollback."""


class RolloutRow(MessageModel):
    """One group and component of `rollout status` (reference §3.4 columns)."""

    group: int
    component: str
    strategy: str
    group_phase: str
    gate: str | None = None
    reason: str | None = None
    release: str | None = None
    """What would release the hold; for a canary group, what moves its canary on (the `explain` query)."""
    capacity: str = ""
    """`updated/replicas` on the target revision."""
    ready: str = ""
    """`serving-on-target/replicas`."""
    previous: str | None = None
    target: str | None = None
    issues: list[str] = Field(default_factory=list)
    phase: str | None = None
    """A canary group's phase (`rolloutPhase`); None for the other progressions."""
    step: str | None = None
    """A canary's STEP, `step/total` counted from 1 (`total/total` once Stable)."""
    traffic: str | None = None
    """A canary's TRAFFIC, `target% -> observed%`: the weight recorded for the new revision,
    and its share of this component's ready Instances (requests go to every ready Instance)."""


class RolloutReport(MessageModel):
    """What the Rollout tells its InferenceService whenever it changes."""

    run: int
    workflow_id: str
    started_at: datetime
    targets: dict[str, str]
    plan_digest: str | None = None
    group_digests: list[str] = Field(default_factory=list)
    group_phases: list[str] = Field(default_factory=list)
    parked_reason: str | None = None
    parked_message: str | None = None
    allowances: dict[str, AllowanceView] = Field(default_factory=dict)
    outcome: str | None = None
    """`Completed` or `Superseded` once the run has closed."""
    reported: str = "Unknown"
    """REPORTED of `rollout status`: Failed, Paused, InProgress or Succeeded."""
    rows: list[RolloutRow] = Field(default_factory=list)
    canary: dict[str, Any] = Field(default_factory=dict)
    """Per canary group's primary component: its `rolloutPhase`, `canary` and `traffic`
    status (spec reference §1.5, §1.7, §2.6); empty without canary groups."""
    answers: list[CanaryAnswer] = Field(default_factory=list)
    """The latest operator requests' outcomes (the last `ANSWERS_KEPT`)."""


class RolloutState(MessageModel):
    """The Rollout's whole state, handed to continue-as-new."""

    input: RolloutInput
    started_at: datetime | None = None
    """When the run opened (workflow time), pinned with the plan."""
    pinned: dict[str, Any] | None = None
    """`spec.rollout` the plan was pinned from; None while parked."""
    latest_rollout: dict[str, Any] | None = None
    """The newest `spec.rollout` received (`respec`), tried again while parked."""
    parked_reason: str | None = None
    parked_message: str | None = None
    parked_announced: bool = False
    """Whether the `RolloutPlanParked` Event of the current park was recorded."""
    counts: dict[str, ComponentCounts] = Field(default_factory=dict)
    finished_at: dict[str, datetime] = Field(default_factory=dict)
    """When each moved component last began to serve its target on every Instance."""
    failed_groups: list[int] = Field(default_factory=list)
    """Groups whose `CoordinationGroupFailed` Event was recorded (again after they recover and fail anew)."""
    paused: str | None = None
    superseded_by: int | None = None
    closed: bool = False
    """The InferenceService is being deleted: the run ends `Closed`."""
    outcome: str | None = None
    reported: str = ""
    """Fingerprint of the last report sent to the parent."""
    canaries: dict[str, Any] = Field(default_factory=dict)
    """Canary group index -> its `planning.rollout.canary.CanaryState` (JSON)."""
    verdicts: dict[str, Any] = Field(default_factory=dict)
    """Canary group index -> the verdict of its last sample, not yet seen by the machine."""
    requests: list[CanaryRequest] = Field(default_factory=list)
    """Operator requests received and not yet applied."""
    canary_settings: CanarySettingsResult | None = None
    """The worker's canary settings as last read (`rollout.canary_settings`)."""
    sample_summary: str | None = None
    """The last sample's verdict line, shown on the wait that follows it."""
    answers: list[CanaryAnswer] = Field(default_factory=list)
    """The latest operator requests' outcomes, reported to the parent."""


class RolloutView(MessageModel):
    """The `status` query: the run, its plan, and a row per group and component."""

    run: int
    started_at: datetime | None = None
    plan_digest: str | None = None
    parked_reason: str | None = None
    reported: str
    outcome: str | None = None
    rows: list[RolloutRow] = Field(default_factory=list)
