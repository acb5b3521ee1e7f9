"""The `InferenceReplica` workflow: one OMENative component's Instances.

`irep/{ns}/{isvc}-{component}`, started by the InferenceService workflow as a child (parent
close policy ABANDON: neither the parent's continue-as-new nor its end may take the Instances
down; deletion is an explicit `delete` signal). Each pass is observe -> plan -> act -> wait:

- observe: the Instances' `instance_changed` reports, the parent's `configure`, the user
  requests the parent forwards (`reset_instances`, `release_held`, `delete`), and the
  `Migration` workflows' `migrate` / `cancel_migration`;
- plan: `planning.replica.reconcile.reconcile` (count, rollout within the budget, hold),
  `planning.replica.reset`, `planning.replica.retry`, `planning.replica.conditions`;
- act: start `Instance` children, signal them `update` / `restart` / `delete` /
  `release_held`, write the InferenceReplica object and its status, record Events, and tell
  the parent the component's totals and condition (`replica_changed`);
- wait: for the next message, or the moment the plan said the decision can change.

This module holds the handlers and the loop; the steps are plain functions of the state:
`view` (what the rules read), `requests` (the user's requests), `instances` (plan and act on
the Instance children), `migrations` (replacement-first moves off a node), `batches` (§14
pod batches), `handovers`, `pause`, `children` (start and signal one Instance), `object` (the
InferenceReplica object, its finalizer and Events), `teardown` (§15 deletion), `projection`
(status and report).
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from models.inferencereplica import InferenceReplicaSpec, InferenceReplicaStatus
    from models.instance import PARENT_SIGNAL_INSTANCE_CHANGED, InstanceStatus
    from planning.replica import events
    from planning.replica.overlay import earliest
    from planning.replica.revisions import observe_template
    from workflows import history_budget, search_attributes, waiting
    from workflows.names import INFERENCE_REPLICA
    from workflows.replica import migrations, relocations, teardown, view
    from workflows.replica.carry import PackedReplicaState, carried, unpacked
    from workflows.replica.children import RunChildren, runs_pod_net
    from workflows.replica.deletions import COUNTED_DELETES, count_launched_removals
    from workflows.replica.handovers import note_surge_report
    from workflows.replica.instances import act, drain_all, resend_lifecycle
    from workflows.replica.messages import (
        QUERY_SPEC,
        QUERY_STATUS,
        SIGNAL_CANCEL_MIGRATION,
        SIGNAL_CONFIGURE,
        SIGNAL_DELETE,
        SIGNAL_MIGRATE,
        SIGNAL_RELEASE_HELD,
        SIGNAL_RESET_INSTANCES,
        MigrationCancel,
        MigrationOrder,
        ReplicaConfig,
        ReplicaState,
    )
    from workflows.replica.object import (
        IR_TEARDOWN,
        check_gang_scheduling,
        delete_object,
        desired_spec,
        record,
        write_spec,
    )
    from workflows.replica.projection import build_status, publish, report
    from workflows.replica.recheck import recheck_pods
    from workflows.replica.requests import answer_releases, answer_resets
    from workflows.replica.rest import at_rest

HANDS_OVER_EARLY = "replica-hands-over-early"
"""`workflow.patched` id of `history_budget.hands_over`: runs from it on continue as new at
2,000 events or 1 MB; histories from before went on to the server's suggestion (about 4,100
events, 2.3 MB for a 20-Instance component: the 3-day long run stalled on its replay)."""
HANDS_OVER_AT_REST = "replica-hands-over-at-rest"
"""`workflow.patched` id of `history_budget.hands_over_at_rest`: runs from it also continue as new
at rest once past `AT_REST_EVENTS` events; histories from before waited for the budget."""
KEPT_TIMER = "replica-kept-timer"
"""`workflow.patched` id, asked once at the start of each run: the loop's timer outlives the
wait that set it (`waiting.Waits`), so the re-list's deadline is one timer however many
Instance reports come before it; histories from before cancelled and restarted it per wake."""

LOCAL_STATUS_WRITE = "replica-local-status-write"
"""`workflow.patched` id, asked once at the start of each run: the status write is a local
activity, one marker with the write's small answer, where an activity recorded the whole
status it wrote (a row per Instance) and cost a workflow task. On the bench, pod failures at
200 Instances one after another brought the run to its 1 MB budget every 2-2.5 s (240-270
events); the server failed the continue-as-new task for the reports that came meanwhile
(`UnhandledCommand`), up to three times in a row, and an Instance's report then took up to
3 s to be taken. Histories from before wrote it with an activity."""

LAUNCHED_ROWS = "replica-launched-rows"
"""`workflow.patched` id, asked once at the start of each run: the status shows each Instance
started and not heard from yet as a `Creating` row, as its first report would have; single-pod
Instances started from then on send no such report (`InstanceState.launched_by_parent`).
Histories from before listed reported Instances only."""

REQUESTED_ROWS = "replica-requested-rows"
"""`workflow.patched` id, asked once at the start of each run: an Instance told to update counts
as `Updating` to the new revision from the request, until a report at that revision comes
(`ReplicaState.shows_requested`); Instances told so from then on report a surge update once,
when it ends (`UpdateRequest.counted_by_parent`). Histories from before showed an Instance's
own reports of the update's start and of its surge pod serving."""

RUN_CAP_HOLDS = "replica-run-cap-holds-the-rest"
"""`workflow.patched` id, asked once at the start of each run: a pass that starts some Instances
and leaves the rest to a rollout run's cap shows the run's hold, not the surge budget's
(`ReplicaState.shows_run_cap`). Histories from before showed the budget's, or none when the
budget alone would have let them go."""

SAFETY_RECHECK = timedelta(minutes=5)
"""Everything reaches this workflow as a message; the timer only covers a lost one. Runs
without the pod net (`runs_pod_net`) only; with it, the cluster's `pod_relist_seconds`."""


@workflow.defn(name=INFERENCE_REPLICA)
class InferenceReplicaWorkflow:
    @workflow.init
    def __init__(self, arg: ReplicaConfig | ReplicaState | PackedReplicaState) -> None:
        self.state = (
            ReplicaState(config=arg) if isinstance(arg, ReplicaConfig) else unpacked(arg, workflow.payload_converter())
        )
        """Everything that survives continue-as-new (`ReplicaState` documents each field)."""
        # Not persistent: a run after continue-as-new starts with these afresh.
        self.lock = asyncio.Lock()
        """Held by a pass, so passes never interleave (handlers never take it)."""
        self.seq = 0
        """Bumped by every handler; the loop waits until it moves past what its pass saw."""
        self.wake_at: datetime | None = None
        """When the last pass's plan said its decision can change (a back-off ends, a paced
        status write is due, a start is tried again); None: no need. Reset by each pass."""
        self.waits = waiting.Waits(keep=False)
        """The loop's timer; kept across waits from `KEPT_TIMER` on (decided in `run`)."""
        self.run_children = RunChildren()
        """Instances that reported their end in this run (`instance_changed`), for a start at
        their index that finds their workflow still closing (`children.start_instance`), and
        how many Instances this run started (it continues as new at `CHILDREN_PER_RUN`)."""

    # --- messages -------------------------------------------------------------------

    @workflow.signal(name=PARENT_SIGNAL_INSTANCE_CHANGED)
    def instance_changed(self, status: InstanceStatus) -> None:
        state = self.state
        if status.deleted or status.abandoned:
            self.run_children.ended.add(status.index)
        note_surge_report(state, status, workflow.now())
        state.launched.pop(status.index, None)
        if status.deleted or status.abandoned:
            state.instances.pop(status.index, None)
            state.requested_updates.pop(status.index, None)
            if status.index in state.removing:
                state.removing.remove(status.index)
            state.requested_deletes.pop(status.index, None)
        else:
            state.instances[status.index] = status
            if state.requested_updates.get(status.index) == status.target_revision:
                del state.requested_updates[status.index]
        self.seq += 1

    @workflow.signal(name=SIGNAL_CONFIGURE)
    def configure(self, config: ReplicaConfig) -> None:
        self.state.config = config
        self.seq += 1

    @workflow.signal(name=SIGNAL_RESET_INSTANCES)
    def reset_instances(self, instances: str) -> None:
        self.state.pending_resets.append(instances)
        self.seq += 1

    @workflow.signal(name=SIGNAL_RELEASE_HELD)
    def release_held(self, revision: str) -> None:
        self.state.pending_releases.append(revision)
        self.seq += 1

    @workflow.signal(name=SIGNAL_MIGRATE)
    def migrate(self, order: MigrationOrder) -> None:
        self.state.migration_orders.append(order)
        self.seq += 1

    @workflow.signal(name=SIGNAL_CANCEL_MIGRATION)
    def cancel_migration(self, cancel: MigrationCancel) -> None:
        self.state.migration_cancels.append(cancel)
        self.seq += 1

    @workflow.signal(name=SIGNAL_DELETE)
    def delete(self) -> None:
        self.state.deleting = True
        self.seq += 1

    @workflow.query(name=QUERY_STATUS)
    def status(self) -> InferenceReplicaStatus:
        return build_status(self.state, workflow.now())[0]

    @workflow.query(name=QUERY_SPEC)
    def spec(self) -> InferenceReplicaSpec:
        state = self.state
        return desired_spec(state, state.last_desired if state.last_desired is not None else view.desired(state.config))

    # --- main loop ------------------------------------------------------------------

    @workflow.run
    async def run(self, arg: ReplicaConfig | ReplicaState | PackedReplicaState) -> InferenceReplicaStatus:
        started_at_size = history_budget.start_size()
        config = self.state.config
        self.waits.keep = workflow.patched(KEPT_TIMER)
        self.state.shows_launched = workflow.patched(LAUNCHED_ROWS)
        self.state.writes_status_locally = workflow.patched(LOCAL_STATUS_WRITE)
        self.state.shows_requested = workflow.patched(REQUESTED_ROWS)
        self.state.shows_run_cap = workflow.patched(RUN_CAP_HOLDS)
        self.state.counts_deletes = workflow.patched(COUNTED_DELETES)
        count_launched_removals(self.state)
        workflow.upsert_search_attributes(
            [
                search_attributes.INFERENCE_SERVICE.value_set(config.isvc),
                search_attributes.COMPONENT.value_set(config.component),
                search_attributes.PHASE.value_set("Creating"),
            ]
        )
        while True:
            seen = self.seq
            async with self.lock:
                finished = await self.pass_once()
            if finished:
                return build_status(self.state, workflow.now())[0]
            if (
                history_budget.hands_over(HANDS_OVER_EARLY, started_at_size)
                or (at_rest(self.state) and history_budget.hands_over_at_rest(HANDS_OVER_AT_REST))
                or self.run_children.hands_over()
            ):
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(carried(self.state, workflow.payload_converter()))
            await self.wait_for_news(seen)

    async def wait_for_news(self, seen: int) -> None:
        """Wait: for a message newer than `seen`, the plan's `wake_at`, or the safety re-check,
        which (with the pod net) re-lists the component's pods for the resting Instances."""
        if not runs_pod_net():
            await self.waits.wait_for_news(lambda: self.seq != seen, self.wake_at, SAFETY_RECHECK)
            return
        state = self.state
        relist = timedelta(seconds=state.config.cluster.pod_relist_seconds)
        # None: due one interval from now; a shorter `pod_relist_seconds` takes effect at once.
        due = workflow.now() + relist
        state.next_relist_at = min(state.next_relist_at, due) if state.next_relist_at is not None else due
        # An absolute deadline: a message every few minutes wakes the loop but does not put
        # the re-list off; it runs after whatever wake finds it due.
        await self.waits.wait_for_news(lambda: self.seq != seen, earliest(self.wake_at, state.next_relist_at), None)
        if workflow.now() >= state.next_relist_at:
            async with self.lock:
                await recheck_pods(state)
            state.next_relist_at = workflow.now() + relist

    # --- one pass -------------------------------------------------------------------

    async def pass_once(self) -> bool:
        """One pass; True when the InferenceReplica is gone and the workflow ends."""
        state, config = self.state, self.state.config
        now = workflow.now()
        self.wake_at = None
        state.memo.turn()
        # Observe: the revision the config asks for; on the first pass, the object itself.
        state.revisions = observe_template(state.revisions, config.revision_name, config.revision_hash)
        state.specs[config.revision_hash] = config.component_spec
        if state.ir_uid is None:
            await write_spec(state, view.desired(state.config))
            await check_gang_scheduling(state)
        if state.deleting:
            return await self.tear_down()
        # The user's requests, the desired count, lifecycle settings the Instances must hear of.
        await answer_releases(state)
        await answer_resets(state)
        desired = await self.observe_desired(config)
        await resend_lifecycle(state)
        # Instances stuck on a node are relocated off it (their `Relocated` rows join the
        # migrations'); then migrations: a replacement they start counts with its source.
        await relocations.relocate(state, now)
        moving_at = await migrations.advance(state, self.run_children, now)
        # Plan and act on the Instances (`instances.act`), then project the outcome; `run` waits.
        self.wake_at = earliest(moving_at, await act(state, self.run_children, desired, now))
        await write_spec(state, desired, now)
        self.wake_at = earliest(self.wake_at, await publish(state, now))
        return False

    async def observe_desired(self, config: ReplicaConfig) -> int:
        """The desired count, recorded in a `Scaled` Event when it changed; `config` is the one
        the pass began with, whose transient scale says what changed the count."""
        state = self.state
        desired = view.desired(state.config)
        if state.last_desired is not None and state.last_desired != desired:
            source = "scale" if config.transient_replicas is not None else "minReplicas"
            await record(state, events.scaled(config.component, state.last_desired, desired, source))
        state.last_desired = desired
        return desired

    async def tear_down(self) -> bool:
        """Drain and delete every Instance, then release the InferenceReplica object (§15,
        `workflows.replica.teardown`); True when done."""
        state = self.state
        now = workflow.now()
        await migrations.end_all(state, now)
        if state.teardown_started_at is None and not workflow.patched(IR_TEARDOWN):
            # A history from before the finalizer: the object was deleted once every Instance was.
            self.wake_at = await drain_all(state, now)
            if state.instances or state.launched:
                self.wake_at = earliest(self.wake_at, await publish(state, now))
                return False
            await delete_object(state)
            await report(state, deleted=True)
            return True
        done, wake = await teardown.tear_down(state, now)
        if done:
            # A migration ordered while the last pass ran hears that it cannot happen.
            await migrations.end_all(state, now)
            await report(state, deleted=True)
            return True
        self.wake_at = earliest(wake, await publish(state, now))
        return False
