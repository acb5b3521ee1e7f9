"""The Instance workflow's changes and which of them a run takes (replay safety).

Every change to what the Instance workflow does is named by an id below. How a run decides:

- A run started before versions travelled in its input (`InstanceState.workflow_version` 0: its
  input was an `InstanceSpec`) asks `workflow.patched(id)` where the change applies, as Temporal's
  patching does: a recorded history replays on the path it took, and a run that meets the change
  live takes it, writing a marker and a `TemporalChangeVersion` search attribute into its history.
- A run started with a version (the InferenceReplica starts every Instance with
  `models.instance.INSTANCE_WORKFLOW_VERSION`; a continue-as-new carries the newest) takes every
  change that version lists without asking: its input, the first event of its history, already
  says which code it started under, so it replays the same way with two events fewer per change.
  A change made after that version is asked with `workflow.patched` again, as for old runs.

A version's list is never changed once released: a new change goes into the next version.
"""

from __future__ import annotations

from temporalio import workflow

from workflows.waiting import LEAVE_NEAR_TIMER, PARK_SAFETY_TIMER

LOCAL_KUBE_CALLS = "instance-local-kube-calls"
"""Decided once at the start of each run (`InstanceWorkflow.run`): the Instance's short
Kubernetes calls (its Service, pods, serving gate, lists, Events) run as local activities, and a
SurgeThenDrain counts its new pod as the Instance's while the old one drains. Histories from
before ran them as activities and reported only the old pod during the drain."""

RELEASE_EVENT_BY_PARENT = "release-event-by-parent"
"""Under an InferenceReplica, the parent records a release's one event."""

DRAIN_OVERDUE = "drain-overdue"
"""An Instance's deletion waits past its drain deadline (`DrainOverdue`) instead of giving up at
the teardown deadline; histories from before gave up."""

FINALIZER_BLOCK = "finalizer-block-report"
"""A pod pinned by finalizers on a dead node is reported (`PodDeleteBlockedByFinalizer`, and the
timer that notices it); histories from before passed it by in silence, and set no timer for it.
Asked only when such a pod is met, in the workflow (teardown and bring-up both meet them), never
in a query."""

REPORT_BY_LOCAL_ACTIVITY = "instance-report-local"
"""Decided once at the start of each run: reports go to the parent through a local activity
(`workflows.parent.deliver_local`), one marker instead of two events and the workflow task the
delivery wakes. Histories from before signalled from the workflow."""

KEPT_TIMER = "instance-kept-timer"
"""Decided once at the start of each run: the loop's timer outlives the wait that set it
(`workflows.waiting.Waits`), so a pod report during a drain or a backstop wait no longer cancels
and restarts it. Histories from before cancelled and restarted it on every wake."""

SERVING_AT_CREATE = "instance-serving-at-create"
"""Decided once at the start of each run: a single-pod Instance with no minReadySeconds creates
its pod with the `ome.io/serving` gate True (`planning.instance.serving`) and writes no gate
once it sees it ready. Histories from before wrote the gate after seeing the pod ready."""

REPORT_BESIDE_NEXT_STEP = "instance-report-beside-next-step"
"""Decided once at the start of each run: the report the loop sends after a step goes out beside
the next step instead of before it (`workflows.instance.reports`), so a pod failure's
recreation does not wait on the report's delivery. On the bench, a parent InferenceReplica
between two runs of a continue-as-new took such a signal 0.5-3 s late. Histories from before
awaited each report."""

RETIRE_IN_ONE_CALL = "instance-retire-in-one-call"
"""A teardown with no drain pause takes its pods out of rotation and deletes them in one local
activity (`DeletePodsInput.out_of_rotation`) instead of two one after the other: the same two
writes, in the same order, one marker and one activity round trip fewer. Histories from before
made two calls. Asked only where a teardown meets it."""

REPORT_BACK_TO_DELIVERED = "instance-report-back-to-delivered"
"""A status back to the one the parent last took, while a report of another is still on its way
beside a step, is reported again after that one (`InstanceReports.compose_report`), so the parent
is not left holding the status in between. Asked only when that happens. Histories from before
skipped it, and the parent held the one in between until the Instance's next wait reported."""

UPDATE_REPORTS_COUNTED = "instance-update-reports-counted"
"""An update the parent asked for and counts from its request (`UpdateRequest.counted_by_parent`)
sends no report that would only tell it so: Updating to that revision, with the same pods
ready, serving and available (`planning.instance.reports.counted_by_request`). A surge update
then reports once, when it ends. Asked only when such a report is composed. Histories from
before reported the update's start and its surge pod serving as well."""

COUNTED_WAITS_REPORTED = "instance-counted-waits-reported"
"""A counted update whose operation waits (its `waiting`: a surge pod held by the quota or by no
node fitting it, `QuotaExceeded`, `Unschedulable`; or its drain held, `Paused`, `Pairing`)
reports it: the parent's row then shows what the update waits on. Asked only when such a report
would otherwise not be sent. Histories from before left the row a bare `Updating` while it
waited on the pods (a held drain reported already)."""

HELD_UPDATE_OFF_NET = "instance-held-update-off-net"
"""A counted update kept for after a pause (`InstanceState.paused_update`) takes the Instance off
its parent's net: the parent shows it `Updating` from its request and leaves it out of its
re-list, so the Instance re-lists on its own safety timer until the update runs. Asked only when
such an update is held. Histories from before kept the 6-hour backstop while it was held."""

DELETION_COUNTED = "instance-deletion-counted"
"""A deletion the parent asked for and counts from its request (`DeleteRequest.counted_since`)
starts its clock at that moment and sends no report that would only tell the parent so:
`Deleting`, with the same pods and no new failure (`planning.instance.reports.deletion_counted`).
A single-pod Instance's deletion then reports once, when it ends. Asked only when such a
request is taken. Histories from before reported the deletion's start as well, and started
its clock when the Instance took the request."""

WAITS_REPORTED = "instance-waits-reported"
"""What an operation waits on (`InstanceOperation.waiting`: `QuotaExceeded`, `Unschedulable`,
`PodGroupTerminating`, `NodeUnknown`, a held drain) is news for the parent: a report goes out
when it starts or ends, so the parent's row shows it (`omectl rollout tree`'s `waiting ...`).
Decided at the run's start. Runs from before reported a wait only with other news or, under
`COUNTED_WAITS_REPORTED`, a counted update's wait's start; an Instance whose pods a full quota
refused stayed a bare `Creating` row."""

DELETED_PODS_TERMINATING = "instance-deleted-pods-terminating"
"""A multi-pod Instance's deletion counts the pods its delete call deleted as Terminating at once
(`InstanceState.deleted_uids`), so its report that it holds one pod of its parent's scale-down
budget, not all of them, goes out when the call returns. Asked only when such a deletion
deletes more than one pod. Runs from before waited for an observation to show the pods
Terminating: the watcher holds a pod's way out up to 10 s (`WAY_OUT_SETTLE_SECONDS`)."""

QUOTA_NOT_COUNTED_WAITS = "instance-quota-not-counted-waits"
"""Decided once at the start of each run: a create the API server refuses because a quota of the
namespace is not counted yet (`QuotaNotCounted`, 403 `status unknown for quota`) waits as one a
full quota refuses (`QuotaExceeded`): its operation shows `waiting QuotaNotCounted`, the
readiness clock stops, the create is tried again at news or after 30 s, and a delete or a newer
revision can end the wait. Runs from before retried the create inside its activity call (1, 2,
4 ... 60 s): a bare `Creating` row, and a delete waited for the quota to be counted."""

PARTIAL_CREATE_KEPT = "instance-partial-create-kept"
"""Decided once at the start of each run: a create a quota refuses part of (a gang's leader made,
its worker refused) keeps the pods it made, and the next try asks only for the rest
(`CreatePodsInput.partial_on_quota`). Runs from before lost them and posted them again each
try; the API server charges a pod posted again to the quota before it finds the name taken,
until the quota is counted again, so the leader's charge could keep the room its worker needed."""

REPORT_BUSY_LATER = "instance-report-busy-later"
"""Decided once at the start of each run: a report its parent's server refuses as busy (the
parent continuing as new, a refused try's retry replaying its history) is answered `busy` within
`REPORT_BUSY_WITHIN` and sent again `REPORT_AGAIN` later (`InstanceReports.report_again_at`,
a timer of the wait), instead of tried on for as long as the parent stays busy. The report, a
local activity, held the Instance's workflow task open meanwhile, and the news behind it waited:
on the bench, a killed pod's recreation began 1.29 s after the kill. Runs from before tried on."""

READY_BEFORE_UPDATE = "instance-ready-before-update"
"""A create or restart (or an update's attempt) that a newer revision interrupts while its pods
serve already (created with their gate True, ready before the workflow heard so) makes the
Instance Ready at the attempt's revision, and the update then goes by its way (a surge keeps it
serving). Asked only when that happens. Runs from before rebuilt the serving pods on their
stable names at the new revision, and the Instance served nothing until they were ready again:
under a worker's restart, an update that arrived with the news of the pod's readiness took an
Instance out of rotation (tests/e2e/test_chaos_worker_kill.py saw it)."""

SERVICE_RETRIED = "instance-service-retried"
"""A headless Service a full quota refused (403 `exceeded quota`, a `services` quota) is tried
again at the loop's passes, 30 s after, then doubling to every 5 minutes
(`InstanceState.service_retry_at`), until it is made; an event says so once it is. Asked only
when such a refusal comes. Runs from before said the refusal (`HeadlessServiceFailed`) and went
on without the Service for the rest of the run: no DNS name for the leader, and no listing to
tell "available" by (spec reference §9)."""

MOMENT_KEEPS_TIMER = "instance-moment-keeps-timer"
"""The moment's wait after the bring-up puts its pods into rotation (until the watcher shows the
gate written) keeps the timer the bring-up left running, its readiness deadline, and adds no
command (`Waits.wait_for_news(hold=True)`). Asked only when such a timer runs. Runs from before
cancelled it for a 5-minute re-check and started that: two events per gang bring-up, and a
history that depended on when the gate write's local activity result reached the workflow. A
run that heard the watcher's news before that result went straight on to Ready; its replay,
which hears the result first, replaced the timer where the recording had not."""
SERVICE_RETRIED_IN_BRING_UP = "instance-service-retried-in-bring-up"
"""The headless Service a full quota refused (`SERVICE_RETRIED`) is tried again at its time
during the bring-up too, not only at the loop's passes once the bring-up is over: a leader's
workers find the leader by the Service's name, so without it a gang's pods may never become
ready, and the Instance would fail on its readiness deadline first. Asked only while such a
retry is due. Runs from before waited for the bring-up's end."""
# The loop's `Waits` (`workflows.waiting`) asks two changes of its own through `takes`: a
# superseded timer due within a second is left to fire (LEAVE_NEAR_TIMER), and the 6-hour net of
# an Instance at rest is parked, not cancelled, while an update or a deletion waits on the
# short one, then taken back once Ready (PARK_SAFETY_TIMER). Version 4 takes both.

CHANGES: dict[int, frozenset[str]] = {
    1: frozenset({LOCAL_KUBE_CALLS, RELEASE_EVENT_BY_PARENT, DRAIN_OVERDUE, FINALIZER_BLOCK, REPORT_BY_LOCAL_ACTIVITY}),
    2: frozenset({KEPT_TIMER}),
    3: frozenset({SERVING_AT_CREATE}),
    4: frozenset({PARK_SAFETY_TIMER, LEAVE_NEAR_TIMER}),
    5: frozenset({REPORT_BESIDE_NEXT_STEP}),
    6: frozenset({RETIRE_IN_ONE_CALL, REPORT_BACK_TO_DELIVERED}),
    7: frozenset({UPDATE_REPORTS_COUNTED}),
    8: frozenset({COUNTED_WAITS_REPORTED, HELD_UPDATE_OFF_NET}),
    9: frozenset({DELETION_COUNTED}),
    10: frozenset({WAITS_REPORTED}),
    11: frozenset({DELETED_PODS_TERMINATING, QUOTA_NOT_COUNTED_WAITS, PARTIAL_CREATE_KEPT}),
    12: frozenset({REPORT_BUSY_LATER}),
    13: frozenset({READY_BEFORE_UPDATE, SERVICE_RETRIED}),
    14: frozenset({MOMENT_KEEPS_TIMER, SERVICE_RETRIED_IN_BRING_UP}),
}
"""Per version, the changes it takes without a marker (a version takes those of the ones before too)."""


def included(version: int, change: str) -> bool:
    """Whether a run started with `version` takes `change` without asking."""
    return any(change in changes for number, changes in CHANGES.items() if number <= version)


def takes(version: int, change: str) -> bool:
    """Whether this run takes `change`: by its version, or else by `workflow.patched` (which
    writes the change's marker when the run meets it live). Called where the change applies,
    from the workflow's own code, never from a query."""
    return included(version, change) or workflow.patched(change)
