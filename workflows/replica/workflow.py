"""The `InferenceReplica` workflow: one OMENative component's Instances.

`irep/{ns}/{isvc}-{component}`, started by the InferenceService workflow as a child (parent
close policy ABANDON: neither the parent's continue-as-new nor its end may take the Instances
down; deletion is an explicit `delete` signal). Each pass is observe -> plan -> act -> wait:

- observe: the Instances' `instance_changed` reports, the parent's `configure`, and the user
  requests the parent forwards (`reset_instances`, `release_held`, `delete`);
- plan: `planning.replica.reconcile.reconcile` (count, rollout within the budget, hold),
  `planning.replica.reset`, `planning.replica.retry`, `planning.replica.conditions`;
- act: start `Instance` children, signal them `update` / `restart` / `delete` /
  `release_held`, write the InferenceReplica object and its status, record Events, and tell
  the parent the component's totals and condition (`replica_changed`);
- wait: for the next message, or the moment the plan said the decision can change.

What this workflow asked for and has not heard back yet (an update signalled, an Instance
started, a delete sent) is folded into its view at once, so a second pass before the
report arrives neither repeats the request nor spends the budget twice.

This module holds the messages and the loop; the acts on the Instance children live in
`workflows.replica.instances`, the facts, status, object and Events in
`workflows.replica.projection` (the workflow class inherits both).
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from models.inferencereplica import InferenceReplicaStatus
    from models.instance import PARENT_SIGNAL_INSTANCE_CHANGED, InstanceStatus, UpdateRequest
    from models.instance import SIGNAL_UPDATE as INSTANCE_UPDATE
    from planning.replica import events
    from planning.replica.lifecycle import lifecycle_digest
    from planning.replica.revisions import observe_template
    from workflows import search_attributes, waiting
    from workflows.names import INFERENCE_REPLICA
    from workflows.replica.instances import ReplicaInstances
    from workflows.replica.messages import (
        QUERY_STATUS,
        SIGNAL_CONFIGURE,
        SIGNAL_DELETE,
        SIGNAL_RELEASE_HELD,
        SIGNAL_RESET_INSTANCES,
        ReplicaConfig,
        ReplicaState,
    )

SAFETY_RECHECK = timedelta(minutes=5)
"""Everything reaches this workflow as a message; the timer only covers a lost one."""


@workflow.defn(name=INFERENCE_REPLICA)
class InferenceReplicaWorkflow(ReplicaInstances):
    @workflow.init
    def __init__(self, arg: ReplicaConfig | ReplicaState) -> None:
        self.state = arg if isinstance(arg, ReplicaState) else ReplicaState(config=arg)
        self.lock = asyncio.Lock()
        self.seq = 0
        self.wake_at: datetime | None = None

    # --- messages -------------------------------------------------------------------

    @workflow.signal(name=PARENT_SIGNAL_INSTANCE_CHANGED)
    def instance_changed(self, status: InstanceStatus) -> None:
        state = self.state
        self.note_report(status)
        state.launched.pop(status.index, None)
        if status.deleted or status.abandoned:
            state.instances.pop(status.index, None)
            state.requested_updates.pop(status.index, None)
            if status.index in state.removing:
                state.removing.remove(status.index)
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

    @workflow.signal(name=SIGNAL_DELETE)
    def delete(self) -> None:
        self.state.deleting = True
        self.seq += 1

    @workflow.query(name=QUERY_STATUS)
    def status(self) -> InferenceReplicaStatus:
        return self.build_status(workflow.now())[0]

    # --- main loop ------------------------------------------------------------------

    @workflow.run
    async def run(self, arg: ReplicaConfig | ReplicaState) -> InferenceReplicaStatus:
        config = self.state.config
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
                return self.build_status(workflow.now())[0]
            if workflow.info().is_continue_as_new_suggested():
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(self.state)
            await self.wait_for_news(seen)

    async def wait_for_news(self, seen: int) -> None:
        await waiting.wait_for_news(lambda: self.seq != seen, self.wake_at, SAFETY_RECHECK)

    # --- one pass -------------------------------------------------------------------

    async def resend_lifecycle(self) -> None:
        """Send running Instances a lifecycle-only change (no new revision, no pod moves)."""
        state, config = self.state, self.state.config
        current = lifecycle_digest(self.instance_spec(0, config.revision_hash))
        if current == state.lifecycle_digest:
            return
        # The first pass only remembers it: every Instance started with these settings.
        told = state.lifecycle_digest != ""
        state.lifecycle_digest = current
        if not told:
            return
        targets = {index: status.target_revision for index, status in state.instances.items()}
        targets.update(state.launched)
        targets.update(state.requested_updates)
        sends = [
            self.signal_instance(
                index,
                INSTANCE_UPDATE,
                UpdateRequest(
                    spec=self.instance_spec(index, revision, gang_surge_of=self.surging_for(index))
                ),
            )
            for index, revision in sorted(targets.items())
            if index not in state.removing
        ]
        await self.send_all(sends)

    def surging_for(self, index: int) -> int | None:
        """The source Instance `index` is still a gang surge target for; None once it took over."""
        surge = self.state.gang_surges.get(index)
        if surge is None or surge.source in self.state.removing:
            return None
        return surge.source

    async def pass_once(self) -> bool:
        """One pass; True when the InferenceReplica is gone and the workflow ends."""
        state, config = self.state, self.state.config
        now = workflow.now()
        self.wake_at = None
        state.revisions = observe_template(state.revisions, config.revision_name, config.revision_hash)
        state.specs[config.revision_hash] = config.component_spec
        if state.ir_uid is None:
            await self.write_spec(self.desired())
            await self.check_gang_scheduling()
        if state.deleting:
            return await self.tear_down()
        await self.answer_releases()
        await self.answer_resets()
        desired = self.desired()
        if state.last_desired is not None and state.last_desired != desired:
            source = "scale" if config.transient_replicas is not None else "minReplicas"
            await self.record(events.scaled(config.component, state.last_desired, desired, source))
        state.last_desired = desired
        await self.resend_lifecycle()
        await self.act(desired, now)
        await self.write_spec(desired)
        await self.publish(now)
        return False
