"""The Instance workflow's whole state, in one model carried across continue-as-new.

Also the pure bookkeeping on it: the status the `status` query answers and the parent
receives, and the fingerprint that decides whether the parent needs a new report.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from models.instance import (
    DeleteRequest,
    InstanceFailure,
    InstanceOperation,
    InstancePauseMode,
    InstancePhase,
    InstanceSpec,
    InstanceStatus,
    RestartRequest,
    RetryBlock,
)
from models.pods import InstancePods, PodSummary
from planning.instance.health import InstanceLevels, levels
from planning.instance.pods import pod_names
from planning.instance.reports import waiting_on
from planning.instance.resting import rests_on_parent_net
from planning.pod_summary import pods_digest


class InstanceState(BaseModel):
    """Everything the Instance knows; `run()` takes it back after continue-as-new."""

    model_config = ConfigDict(extra="forbid")

    spec: InstanceSpec
    """The target: the spec the Instance is moving to or runs."""
    running_spec: InstanceSpec | None = None
    """The spec the current pods were created from (None before any ran)."""
    phase: InstancePhase = InstancePhase.CREATING
    incarnation: int = 1
    active_ordinal: int = 0
    members: dict[str, str] = Field(default_factory=dict)
    """Current pod name -> uid of the pods we created for it ("" until confirmed)."""
    restart_baseline: dict[str, int] = Field(default_factory=dict)
    ready_since: datetime | None = None
    running_revision: str | None = None
    last_failure: InstanceFailure | None = None
    retry_block: RetryBlock | None = None
    operation: InstanceOperation | None = None
    clock_started_at: datetime | None = None
    clock_held_since: datetime | None = None
    clock_hold: str | None = None
    first_seen: dict[str, datetime] = Field(default_factory=dict)
    failures_in_a_row: int = 0
    rebuild_at: datetime | None = None
    draining: bool = False
    gang_unavailable: bool = False
    pod_group_crd: bool | None = None
    deleted: bool = False
    abandoned: bool = False
    operation_counter: int = 0
    refused_revision: str | None = None
    """An InPlaceOnly update this Instance refused; not retried until another revision comes."""
    service_retry_at: datetime | None = None
    """When the headless Service a full quota refused is tried again (`versions.SERVICE_RETRIED`);
    None: it is in place, or was refused for another reason."""
    service_tries: int = 0
    """How many times in a row a full quota refused the headless Service."""

    workflow_version: int = 0
    """The Instance workflow version this run started under (`workflows.instance.versions`): 0 for
    runs started with an `InstanceSpec` input, before versions travelled in the input. Read from
    the run's input only; a continue-as-new carries `INSTANCE_WORKFLOW_VERSION`."""

    started_clean: bool = False
    """The parent listed its component's pods right before starting this Instance and none had
    its index: the first create makes its pods without listing for leftovers first (a name
    that is taken after all answers the create with 409, which the create reads). Cleared
    once that create has begun."""

    launched_by_parent: bool = False
    """The InferenceReplica that started this Instance counts it `Creating` from the start it
    recorded (`ReplicaState.launched`), so the run's first report, which would say only that,
    is not sent (one signal and one workflow task less in the parent per Instance). Set by the
    parent for single-pod Instances; cleared once the run has started."""

    update_counted_by_parent: str | None = None
    """The revision of the last update the parent asked for and counts from its request
    (`UpdateRequest.counted_by_parent`); None when the last update came without that."""

    pause_mode: InstancePauseMode | None = None
    """The component's pause as last told (`set_pause`, or the spec at start); None: not paused."""
    paused_update: InstanceSpec | None = None
    """An update that arrived during a pause: it waits here and becomes pending on resume."""
    drain_hold: str | None = None
    """Why the old pod of an in-flight SurgeThenDrain may not drain yet (a rollout run's
    `Pairing` gate, `hold_drain`); None: it may. Unlike a pause, updates still start."""

    pending_update: InstanceSpec | None = None
    pending_restart: RestartRequest | None = None
    pending_delete: DeleteRequest | None = None
    pending_drain: bool = False
    pending_releases: list[str] = Field(default_factory=list)
    pods: InstancePods | None = None
    blocked_by_finalizer: list[str] = Field(default_factory=list)
    """Uids of pods whose `PodDeleteBlockedByFinalizer` was recorded: once per pod, across
    continue-as-new."""
    deleted_uids: list[str] = Field(default_factory=list)
    """Uids of the pods the Instance's own deletion deleted (its delete call returned): they
    count as Terminating from then on (`current_levels`), before an observation says so. The
    watcher holds a pod's way out up to 10 s, and a multi-pod Instance's report that it holds
    one pod of its parent's scale-down budget, not all of them, waits for it no longer."""


def newer_observation(candidate: InstancePods, current: InstancePods | None) -> bool:
    """True when `candidate` should replace `current` as what the Instance knows of its pods.

    Both the watcher's `pods_changed` summaries and the workflow's own `kube.list_instance_pods`
    answers carry a resourceVersion from the API server's one counter (the watcher's is the
    newest over pods, nodes and EndpointSlices; a list's is the counter when it read), so
    the larger one saw more. Both paths must use this rule: a list that was read before a
    pod change but whose answer reached the workflow after the signal reporting that change
    is older, and the watcher will not send that change again (the Instance would then wait
    for a wake-up it already had). Equal versions
    describe the same moment, so the later arrival may replace; versions that are not
    numbers cannot be ordered and the later arrival wins.
    """
    if current is None:
        return True
    a, b = candidate.resource_version, current.resource_version
    if a.isdigit() and b.isdigit():
        return int(a) >= int(b)
    return True


def current_levels(state: InstanceState, now: datetime) -> InstanceLevels:
    """Levels of the Instance's current members, from the last observation."""
    pods = known_terminating(state.pods.pods if state.pods is not None else (), state.deleted_uids)
    listed = state.pods.endpoints_listed if state.pods is not None else None
    members = state.members or dict.fromkeys(pod_names(state.spec, state.active_ordinal), "")
    spec = state.running_spec or state.spec
    return levels(pods, members, spec.pod_count, spec.min_ready_seconds, now, listed)


def known_terminating(pods: Sequence[PodSummary], deleted_uids: Collection[str]) -> tuple[PodSummary, ...]:
    """`pods`, those with a uid in `deleted_uids` (deleted by the Instance) as Terminating."""
    return tuple(
        pod.model_copy(update={"terminating": True}) if pod.uid in deleted_uids and not pod.terminating else pod
        for pod in pods
    )


def build_status(state: InstanceState, now: datetime) -> InstanceStatus:
    spec = state.spec
    counts = current_levels(state, now)
    return InstanceStatus(
        namespace=spec.namespace,
        isvc=spec.isvc,
        component=spec.component,
        index=spec.index,
        phase=state.phase,
        incarnation=state.incarnation,
        running_revision=state.running_revision,
        target_revision=spec.revision,
        desired_pods=spec.pod_count,
        total_pods=counts.total,
        ready_pods=counts.ready_pods,
        serving_pods=counts.serving_pods,
        available_pods=counts.available_pods,
        ready=counts.ready,
        serving=counts.serving and not state.draining,
        available=counts.available and not state.draining,
        ready_since=state.ready_since,
        active_ordinal=state.active_ordinal,
        last_failure=state.last_failure,
        operation=state.operation,
        retry_block=state.retry_block,
        gang_scheduling_unavailable=state.gang_unavailable,
        draining=state.draining,
        deleted=state.deleted,
        abandoned=state.abandoned,
        pod_names=sorted(state.members),
        node_names=member_nodes(state),
        updated_at=now,
        pause_mode=state.pause_mode,
        pods_digest=parent_net_digest(state),
    )


def parent_net_digest(state: InstanceState) -> str | None:
    """The digest of the pods the Instance last saw, when it rests on its parent's re-list."""
    if not (
        state.spec.relisted_by_parent and rests_on_parent_net(state.phase, state.operation, state.draining)
    ):
        return None
    return pods_digest(state.pods.pods if state.pods is not None else ())


def member_nodes(state: InstanceState) -> list[str]:
    """The nodes the Instance's current pods were scheduled to, sorted, each once."""
    pods = state.pods.pods if state.pods is not None else ()
    return sorted({pod.node_name for pod in pods if pod.name in state.members and pod.node_name})


def report_fingerprint(status: InstanceStatus, waits: bool = False) -> tuple[object, ...]:
    """What the parent cares about: a report goes out only when one of these changes; with
    `waits`, also what its operation waits on (`InstanceOperation.waiting`)."""
    waiting = (waiting_on(status),) if waits else ()
    return (
        status.phase,
        status.incarnation,
        status.running_revision,
        status.target_revision,
        status.total_pods,
        status.ready_pods,
        status.serving_pods,
        status.available_pods,
        status.retry_block.state if status.retry_block else None,
        status.gang_scheduling_unavailable,
        status.draining,
        status.deleted,
        status.abandoned,
        status.pods_digest,
        *waiting,
    )
