"""The InferenceReplica workflow's hands on its Instances: start, update, restart, release, delete.

`ReplicaInstances` sits between `workflows.replica.projection.ReplicaProjection` (facts and
projections) and `workflows.replica.workflow.InferenceReplicaWorkflow` (messages and the
loop). It carries out what the rules planned (`planning.replica.reconcile.reconcile`,
`planning.replica.reset`, `planning.replica.retry`) as `Instance` child starts and signals,
in the order the plan lists them, and folds every request it sends into the workflow state at
once so a second pass before the Instance answers neither repeats it nor spends the budget
twice.

Multi-pod SurgeThenDrain handovers (`planning.replica.handover`) live here too: which
replacement was started for which Instance is known only to this workflow
(`state.gang_surges`), so its facts, retry blocks and status rows are overlaid with it, and a
replacement that gave up leaves its retry block with this workflow (`state.gang_blocks`).

Imported by the workflow module inside `workflow.unsafe.imports_passed_through()`.
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import replace
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError

from models.inferencereplica import InferenceReplicaStatus
from models.inferenceservice import ComponentSpec
from models.instance import SIGNAL_DELETE as INSTANCE_DELETE
from models.instance import SIGNAL_RELEASE_HELD as INSTANCE_RELEASE_HELD
from models.instance import SIGNAL_RESTART as INSTANCE_RESTART
from models.instance import SIGNAL_UPDATE as INSTANCE_UPDATE
from models.instance import DeleteRequest as InstanceDeleteRequest
from models.instance import (
    InstanceSpec,
    InstanceStatus,
    RestartRequest,
    RetryBlock,
    RetryBlockState,
    UpdateRequest,
)
from models.instance import ReleaseHeldRequest as InstanceReleaseRequest
from models.kube_ops import DeleteObjectInput
from planning.replica import events
from planning.replica.conditions import PlannedCondition
from planning.replica.facts import InstanceFacts
from planning.replica.handover import (
    GANG_SURGE_COMPLETED,
    GangSurge,
    cleaning_up,
    handover_rows,
    settle_surges,
    with_handovers,
)
from planning.replica.reconcile import aggregate_blocks, reconcile
from planning.replica.reset import ResetRequestError, parse_reset_request, plan_reset
from planning.replica.retry import (
    ReleaseResult,
    absorb_abandoned_surge,
    current_blocks,
    release_held,
    start_retry_attempt,
)
from planning.replica.revisions import complete_rollout, history_limit, trim_history
from planning.replica.template import InstanceIdentity, instance_spec
from workflows import kube_calls
from workflows.names import INSTANCE, instance_workflow_id
from workflows.replica.pause import ReplicaPause


class ReplicaInstances(ReplicaPause):
    """Acts on the Instance children; the workflow subclass decides when."""

    ended_indexes: frozenset[int] = frozenset()
    """Indexes whose Instance reported its end in this run: its workflow may still be closing,
    so a start at that index that finds it running is tried again (`start_instance`)."""
    start_again: bool = False

    # --- handovers --------------------------------------------------------------------

    def note_report(self, status: InstanceStatus) -> None:
        """Called by `instance_changed` before the report is folded into the state.

        A surge replacement that gave up deletes itself and its retry block with it: the
        block stays here, so the next replacement is the next attempt, not a first one. Its
        record stays until its last report says its pods are gone (`GangSurgeTargetCleanup`).
        """
        state = self.state
        if status.deleted or status.abandoned:
            self.ended_indexes = self.ended_indexes | {status.index}
        surge = state.gang_surges.get(status.index)
        if surge is None:
            return
        if status.abandoned and not surge.abandoned:
            kept = next((b for b in state.gang_blocks if b.target_revision == surge.revision), None)
            failure = status.last_failure
            block = absorb_abandoned_surge(
                kept,
                status.retry_block,
                surge.revision,
                failure.reason if failure is not None else None,
                workflow.now(),
                state.config.cluster.update_retry,
            )
            others = [b for b in state.gang_blocks if b.target_revision != surge.revision]
            state.gang_blocks = others + ([block] if block is not None else [])
            state.gang_surges[status.index] = replace(surge, abandoned=True)
        if status.deleted:
            del state.gang_surges[status.index]

    def facts(self) -> list[InstanceFacts]:
        return with_handovers(super().facts(), self.state.gang_surges)

    def retry_blocks(self) -> list[RetryBlock]:
        """The Instances' blocks and those kept from surge replacements that gave up."""
        state = self.state
        ready_on = {s.running_revision for s in state.instances.values() if s.ready and s.running_revision}
        blocks = aggregate_blocks([*super().retry_blocks(), *state.gang_blocks])
        return current_blocks(blocks, state.config.revision_hash, {r for r in ready_on if r})

    def build_status(self, now: datetime) -> tuple[InferenceReplicaStatus, PlannedCondition]:
        status, component = super().build_status(now)
        if not self.state.gang_surges:
            return status, component
        rows = handover_rows(status.instance_statuses, self.state.gang_surges)
        return status.model_copy(update={"instance_statuses": rows}), component

    def settle_handovers(self) -> None:
        """Forget handovers that ended, and kept blocks that no longer matter."""
        state = self.state
        state.gang_surges = settle_surges(state.gang_surges, set(state.instances) | set(state.launched))
        ready_on = {s.running_revision for s in state.instances.values() if s.ready and s.running_revision}
        state.gang_blocks = current_blocks(
            state.gang_blocks, state.config.revision_hash, {r for r in ready_on if r}
        )

    # --- one pass ---------------------------------------------------------------------

    async def act(self, desired: int, now: datetime) -> None:
        state, config = self.state, self.state.config
        # The Instances hear of a pause change before this pass starts or updates anything.
        await self.tell_pause()
        policy = self.policy()
        current = state.revisions.record(state.revisions.current)
        self.settle_handovers()
        blocks = self.retry_blocks()
        actions = reconcile(
            desired=desired,
            instances=self.facts(),
            update_revision=config.revision_hash,
            current_revision=current.hash if current is not None else None,
            revision_names=self.names(),
            policy=policy,
            retry_blocks=blocks,
            previous_hold=state.hold,
            paused=config.paused,
            now=now,
            reserved_indexes=[*state.removing, *cleaning_up(state.gang_surges)],
            update_multi_pod=config.effective.is_multi_pod,
        )
        self.start_again = False
        # Every start and signal of the pass goes out in one workflow task (the commands are
        # issued in the plan's order); awaiting each in turn would cost a task per Instance.
        sends: list[Awaitable[None]] = [
            self.start_instance(new.index, new.revision) for new in actions.create
        ]
        for index in actions.update:
            state.requested_updates[index] = config.revision_hash
            spec = self.instance_spec(index, config.revision_hash)
            sends.append(self.signal_instance(index, INSTANCE_UPDATE, UpdateRequest(spec=spec)))
        for new in actions.surge_create:
            source = new.replaces if new.replaces is not None else new.index
            state.gang_surges[new.index] = GangSurge(source=source, revision=new.revision, started_at=now)
            sends.append(self.start_instance(new.index, new.revision, gang_surge_of=source))
        for index in actions.delete:
            sends.append(
                self.signal_instance(index, INSTANCE_DELETE, InstanceDeleteRequest(reason="ScaleDown"))
            )
            state.removing.append(index)
        sends += self.finish_handovers(actions.handover_delete)
        await self.send_all(sends)
        if actions.retry_attempt and any(new.index in state.gang_surges for new in actions.surge_create):
            # This pass started the attempt the kept block waited for (unless the start must
            # be tried again: then the block is still due).
            state.gang_blocks = [
                start_retry_attempt(b) if b.target_revision == config.revision_hash else b
                for b in state.gang_blocks
            ]
        state.hold = actions.hold
        self.wake_at = actions.wake_at
        if self.start_again:
            # An ended Instance's workflow was still closing: try its index again shortly.
            retry = now + timedelta(seconds=1)
            self.wake_at = retry if self.wake_at is None else min(self.wake_at, retry)
        if actions.rollout_complete and not state.launched and not state.requested_updates:
            state.revisions = complete_rollout(state.revisions)
        limit, _ = history_limit(config.history_limit_annotation, config.cluster.revision_history_limit)
        names = self.names()
        running = {
            names.get(s.running_revision, s.running_revision)
            for s in state.instances.values()
            if s.running_revision
        }
        state.revisions = trim_history(state.revisions, running, limit)
        kept = {record.hash for record in state.revisions.history}
        state.specs = {digest: spec for digest, spec in state.specs.items() if digest in kept}
        block = blocks[0] if blocks else None
        if (
            block is not None
            and block.state == RetryBlockState.HELD
            and block.target_revision not in state.announced_held
        ):
            state.announced_held.append(block.target_revision)
            named = block.model_copy(
                update={"target_revision": names.get(block.target_revision, block.target_revision)}
            )
            await self.record(events.retry_held(config.namespace, config.ir_name, config.component, named))

    def finish_handovers(self, sources: tuple[int, ...]) -> list[Awaitable[None]]:
        """Drain and delete each source whose replacement serves (`GangSurgeCompleted`)."""
        state = self.state
        sends: list[Awaitable[None]] = []
        for source in sources:
            request = InstanceDeleteRequest(reason=GANG_SURGE_COMPLETED)
            sends.append(self.signal_instance(source, INSTANCE_DELETE, request))
            state.removing.append(source)
            # The replacement is a plain Instance from now on: a later failure of it is
            # retried like any other, not abandoned as a surge that never took over.
            for index, surge in state.gang_surges.items():
                if surge.source == source:
                    plain = UpdateRequest(spec=self.instance_spec(index, surge.revision))
                    sends.append(self.signal_instance(index, INSTANCE_UPDATE, plain))
        return sends

    def instance_spec(self, index: int, revision_hash: str, gang_surge_of: int | None = None) -> InstanceSpec:
        config = self.state.config
        component = self.state.specs.get(revision_hash, config.component_spec)
        identity = InstanceIdentity(
            namespace=config.namespace,
            isvc=config.isvc,
            component=config.component,
            index=index,
            revision=revision_hash,
            revision_name=self.names().get(revision_hash, config.revision_name),
            isvc_uid=config.isvc_uid,
            pairing_protocol=config.pairing_protocol,
            gang_surge_of=gang_surge_of,
            parent_workflow_id=workflow.info().workflow_id,
            pause_mode=config.effective_pause_mode,
        )
        return instance_spec(identity, ComponentSpec.model_validate(component), config.cluster, self.policy())

    async def start_instance(self, index: int, revision_hash: str, gang_surge_of: int | None = None) -> None:
        config = self.state.config
        workflow_id = instance_workflow_id(config.namespace, config.isvc, config.component, index)
        # Recorded before the start, so a pass while it is in flight counts it already.
        self.state.launched[index] = revision_hash
        try:
            await workflow.start_child_workflow(
                INSTANCE,
                self.instance_spec(index, revision_hash, gang_surge_of),
                id=workflow_id,
                # The Instance must outlive this run's continue-as-new; deletion is a signal.
                parent_close_policy=workflow.ParentClosePolicy.ABANDON,
                id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
                static_summary=f"Instance {index} of {config.ir_name} ({self.names().get(revision_hash)})",
            )
        except WorkflowAlreadyStartedError:
            if index in self.ended_indexes:
                # The Instance that had this index reported its end but its workflow has not
                # closed yet: nothing was started, so the next pass starts it again.
                self.state.launched.pop(index, None)
                self.state.gang_surges.pop(index, None)
                self.start_again = True
                return
            # Started by an earlier run of this workflow: it reports to us by workflow ID.
        self.ended_indexes = self.ended_indexes - {index}

    # --- requests -------------------------------------------------------------------

    async def answer_releases(self) -> None:
        state, config = self.state, self.state.config
        requests, state.pending_releases = state.pending_releases, []
        names = self.names()
        for requested in requests:
            # A release names the revision by its full name or its hash (or the hash's 8 hex).
            digest = next((h for h, n in names.items() if n == requested), requested)
            outcome = release_held(self.retry_blocks(), digest)
            block = outcome.block
            shown = (
                names.get(block.target_revision, block.target_revision) if block is not None else requested
            )
            if outcome.result == ReleaseResult.RELEASED and block is not None:
                event = events.retry_block_released(config.namespace, config.ir_name, config.component, shown)
                state.gang_blocks = [
                    b for b in state.gang_blocks if b.target_revision != block.target_revision
                ]
                await self.send_all(
                    [
                        self.signal_instance(
                            status.index,
                            INSTANCE_RELEASE_HELD,
                            InstanceReleaseRequest(revision=status.retry_block.target_revision),
                        )
                        for status in state.instances.values()
                        if status.retry_block is not None
                        and status.retry_block.target_revision == block.target_revision
                    ]
                )
                if block.target_revision in state.announced_held:
                    state.announced_held.remove(block.target_revision)
            elif outcome.result == ReleaseResult.NOT_HELD and block is not None:
                named = block.model_copy(update={"target_revision": shown})
                event = events.retry_block_release_skipped_not_held(
                    config.namespace, config.ir_name, config.component, named
                )
            else:
                event = events.retry_block_release_skipped_no_block(
                    config.namespace, config.ir_name, config.component, requested
                )
            await self.record(event)

    async def answer_resets(self) -> None:
        state, config = self.state, self.state.config
        requests, state.pending_resets = state.pending_resets, []
        for value in requests:
            try:
                request = parse_reset_request(value)
            except ResetRequestError as error:
                await self.record(
                    events.reset_rejected(config.namespace, config.ir_name, config.component, error)
                )
                continue
            outcome = plan_reset(request, self.facts())
            # A restart of a Failed Instance deletes its pods and clears its operation.
            restart = RestartRequest(reason="InstancesReset")
            await self.send_all(
                [self.signal_instance(index, INSTANCE_RESTART, restart) for index in outcome.reset]
            )
            for event in events.reset_events(config.namespace, config.ir_name, config.component, outcome):
                await self.record(event)

    # --- deletion -------------------------------------------------------------------

    async def tear_down(self) -> bool:
        """Drain and delete every Instance, then the InferenceReplica object; True when done."""
        state, config = self.state, self.state.config
        request = InstanceDeleteRequest(reason="InferenceServiceDeleted")
        leaving = [i for i in sorted(set(state.instances) | set(state.launched)) if i not in state.removing]
        state.removing.extend(leaving)
        await self.send_all([self.signal_instance(index, INSTANCE_DELETE, request) for index in leaving])
        if state.instances or state.launched:
            await self.publish(workflow.now())
            return False
        await kube_calls.delete_object(
            DeleteObjectInput(ref=self.ir_ref()),
            summary=f"delete InferenceReplica {config.ir_name}: every Instance drained and deleted",
        )
        await self.report(deleted=True)
        return True
