"""The `Instance` workflow: one OMENative Instance from creation to deletion.

`instance/{ns}/{isvc}-{component}-{index}`. Observe (the watcher's `pods_changed` signals,
activity results) -> plan (`planning.instance.steps.next_step`) -> act (Kubernetes activities
through `workflows.kube_calls`) -> wait (`wait_condition` with the deadlines planning computes; a
slow re-list is only a safety net). A pod that looks gone or failed in a watcher observation
is confirmed with a fresh list before anything is recreated, because a signal may lag
behind our own writes.

Message handlers only record what arrived (no awaits), so they need no lock; the main loop
takes requests from the state at safe points, and continue-as-new happens only in a
resting phase, after the handlers have finished, carrying the one `InstanceState`.

Phases and messages: see `models/instance.py`. The steps are carried out by
`workflows/instance/lifecycle.py`; this module holds the message handlers and the main loop.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from models.instance import (
        INSTANCE_WORKFLOW_VERSION,
        QUERY_STATUS,
        SIGNAL_DELETE,
        SIGNAL_DRAIN,
        SIGNAL_HOLD_DRAIN,
        SIGNAL_PODS_CHANGED,
        SIGNAL_RELEASE_HELD,
        SIGNAL_RESTART,
        SIGNAL_SET_PAUSE,
        SIGNAL_UPDATE,
        DeleteRequest,
        DrainRequest,
        HoldDrainRequest,
        InstancePhase,
        InstanceSpec,
        InstanceStatus,
        PauseRequest,
        ReleaseHeldRequest,
        RestartRequest,
        UpdateRequest,
    )
    from models.pods import InstancePods
    from planning.instance.pause import hold_update
    from planning.instance.state import InstanceState, build_status, newer_observation
    from planning.instance.steps import next_step, next_wake
    from workflows import search_attributes, tracing, waiting
    from workflows.instance.lifecycle import InstanceLifecycle
    from workflows.instance.versions import (
        KEPT_TIMER,
        LOCAL_KUBE_CALLS,
        PARTIAL_CREATE_KEPT,
        QUOTA_NOT_COUNTED_WAITS,
        REPORT_BESIDE_NEXT_STEP,
        REPORT_BUSY_LATER,
        REPORT_BY_LOCAL_ACTIVITY,
        SERVING_AT_CREATE,
        WAITS_REPORTED,
    )

P = InstancePhase


@workflow.defn(name="Instance")
class InstanceWorkflow(InstanceLifecycle):
    """`instance/{ns}/{isvc}-{component}-{index}`: input `InstanceSpec` (or `InstanceState`
    after continue-as-new), result the final `InstanceStatus`."""

    @workflow.init
    def __init__(self, arg: InstanceSpec | InstanceState) -> None:
        # A new Instance learns the pause in force from its spec; later changes are signals.
        state = arg if isinstance(arg, InstanceState) else InstanceState(spec=arg, pause_mode=arg.pause_mode)
        self.state = state
        self.pods_seq = 0
        self.inbox_seq = 0
        self.last_report: tuple[object, ...] | None = None
        # Pods whose `PodDeleteBlockedByFinalizer` was recorded; carried through continue-as-new.
        self.blocked_by_finalizer: set[str] = set(state.blocked_by_finalizer)
        self.waits = waiting.Waits(keep=False, takes=self.takes)
        """The loop's timer; kept across waits from `KEPT_TIMER` on (decided in `run`); its own
        changes (`waiting.PARK_SAFETY_TIMER`, `waiting.LEAVE_NEAR_TIMER`) by this run's version."""

    # --- messages -------------------------------------------------------------------

    @workflow.signal(name=SIGNAL_PODS_CHANGED)
    def pods_changed(self, pods: InstancePods) -> None:
        # A summary older than what we already know (our own list answered after the watcher
        # read) is dropped; it cannot be news.
        if newer_observation(pods, self.state.pods):
            self.state.pods = pods
            self.pods_seq += 1

    @workflow.signal(name=SIGNAL_UPDATE)
    def update(self, request: UpdateRequest) -> None:
        self.state.update_counted_by_parent = request.spec.revision if request.counted_by_parent else None
        if hold_update(self.state.pause_mode):
            # No update starts during a pause (§5): it waits, and the newest one goes on resume.
            self.state.paused_update = request.spec
            return
        self.state.pending_update = request.spec
        self.inbox_seq += 1

    @workflow.signal(name=SIGNAL_HOLD_DRAIN)
    def hold_drain(self, request: HoldDrainRequest) -> None:
        """A rollout run holds (or releases) the drain of an in-flight SurgeThenDrain's old pod."""
        if request.reason != self.state.drain_hold:
            self.state.drain_hold = request.reason
            self.inbox_seq += 1

    @workflow.signal(name=SIGNAL_SET_PAUSE)
    def set_pause(self, request: PauseRequest) -> None:
        state = self.state
        if request.mode == state.pause_mode:
            return
        state.pause_mode = request.mode
        if hold_update(state.pause_mode):
            # An update that has not started yet waits too; one already running finishes.
            if state.pending_update is not None:
                state.paused_update, state.pending_update = state.pending_update, None
        elif state.paused_update is not None:
            state.pending_update, state.paused_update = state.paused_update, None
        self.inbox_seq += 1

    @workflow.signal(name=SIGNAL_RESTART)
    def restart(self, request: RestartRequest) -> None:
        self.state.pending_restart = request
        self.inbox_seq += 1

    @workflow.signal(name=SIGNAL_DRAIN)
    def drain(self, request: DrainRequest) -> None:
        self.state.pending_drain = True
        self.inbox_seq += 1

    @workflow.signal(name=SIGNAL_DELETE)
    def delete(self, request: DeleteRequest) -> None:
        self.state.pending_delete = request
        self.inbox_seq += 1

    @workflow.signal(name=SIGNAL_RELEASE_HELD)
    def release_held(self, request: ReleaseHeldRequest) -> None:
        self.state.pending_releases.append(request.revision)
        self.inbox_seq += 1

    @workflow.query(name=QUERY_STATUS)
    def status(self) -> InstanceStatus:
        return build_status(self.state, workflow.now())

    # --- main loop ------------------------------------------------------------------

    @workflow.run
    async def run(self, arg: InstanceSpec | InstanceState) -> InstanceStatus:
        spec = self.state.spec
        # Decided once, before the run's first command: runs recorded before keep their activities.
        self.local_kube = self.takes(LOCAL_KUBE_CALLS)
        self.local_report = self.takes(REPORT_BY_LOCAL_ACTIVITY)
        self.reports_beside = self.takes(REPORT_BESIDE_NEXT_STEP)
        self.reports_waits = self.takes(WAITS_REPORTED)
        self.waits.keep = self.takes(KEPT_TIMER)
        self.serving_at_create = self.local_kube and self.takes(SERVING_AT_CREATE)
        self.quota_not_counted_waits = self.takes(QUOTA_NOT_COUNTED_WAITS)
        self.keeps_partial_create = self.takes(PARTIAL_CREATE_KEPT)
        self.reports_busy_later = self.local_report and self.takes(REPORT_BUSY_LATER)
        # Each operation (create, update, restart, delete) is its own trace; between them, the
        # run's. After a continue-as-new mid-operation the new run finds the same trace.
        tracing.follow_operations(lambda: self.state.operation.id if self.state.operation is not None else None)
        found_by = search_attributes.instance_attributes(spec.isvc, spec.component, self.state.phase.value)
        if self.state.workflow_version >= 1:
            # Versioned runs are started with them (`workflows.replica.children.start_instance`).
            found_by = search_attributes.missing(found_by, workflow.info().typed_search_attributes)
        if found_by:
            workflow.upsert_search_attributes(found_by)
        # The Instance's Service, its first report to the parent (unless the parent's launch
        # record says it already), and (for a create) the pod list the create starts from
        # (unless the parent found its index clean) go out in one workflow task.
        first = [self.prepare()]
        if not self.first_report_implied():
            first.append(self.report())
        if self.state.phase in (P.CREATING, P.PENDING) and not self.state.started_clean:
            first.append(self.list_ahead())
        await asyncio.gather(*first)
        while True:
            finished = await self.step()
            if finished or not self.reports_beside:
                await self.report()
            else:
                self.report_beside()
            if finished:
                return build_status(self.state, workflow.now())
            if self.resting() and workflow.info().is_continue_as_new_suggested():
                await self.reports_sent()
                await workflow.wait_condition(workflow.all_handlers_finished)
                # The next run has no history to replay: it starts under the newest version.
                self.state.workflow_version = INSTANCE_WORKFLOW_VERSION
                workflow.continue_as_new(self.state)

    def first_report_implied(self) -> bool:
        """Whether the parent already counts this run as it is now (`launched_by_parent`): then
        the report it would get is taken as sent. Read once, at the run's start."""
        implied, self.state.launched_by_parent = self.state.launched_by_parent, False
        status = build_status(self.state, workflow.now())
        if not implied or status.phase != P.CREATING or status.total_pods:
            return False
        self.last_report = self.fingerprint(status)
        self.delivered = status
        return True

    def resting(self) -> bool:
        return self.state.phase in (P.READY, P.FAILED, P.PENDING)

    async def step(self) -> bool:
        """One pass of the loop: take the requests, carry out the step `next_step` chooses,
        and when there is nothing to do, wait for news; True when the workflow is done."""
        state = self.state
        since = self.mark()
        if state.pending_delete is not None:
            await self.delete_instance(state.pending_delete)
            return True
        await self.take_requests()
        await self.service_due(state.service_retry_at)
        if not await self.carry_out(next_step(state, workflow.now())):
            await self.wait_for_news(next_wake(state, workflow.now()), since)
        return False
