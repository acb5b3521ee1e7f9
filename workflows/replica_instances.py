"""The InferenceReplica workflow's hands on its Instances: start, update, restart, release, delete.

`ReplicaInstances` sits between `workflows.replica_projection.ReplicaProjection` (facts and
projections) and `workflows.inference_replica.InferenceReplicaWorkflow` (messages and the
loop). It carries out what the rules planned (`planning.replica_reconcile.reconcile`,
`planning.replica_reset`, `planning.replica_retry`) as `Instance` child starts and signals,
in the order the plan lists them, and folds every request it sends into the workflow state at
once so a second pass before the Instance answers neither repeats it nor spends the budget
twice.

Imported by the workflow module inside `workflow.unsafe.imports_passed_through()`.
"""

from __future__ import annotations

from collections.abc import Awaitable
from datetime import datetime
from typing import Any

from temporalio import workflow
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError

from models.inferenceservice import ComponentSpec
from models.instance import SIGNAL_DELETE as INSTANCE_DELETE
from models.instance import SIGNAL_RELEASE_HELD as INSTANCE_RELEASE_HELD
from models.instance import SIGNAL_RESTART as INSTANCE_RESTART
from models.instance import SIGNAL_UPDATE as INSTANCE_UPDATE
from models.instance import DeleteRequest as InstanceDeleteRequest
from models.instance import InstanceSpec, RestartRequest, RetryBlockState, UpdateRequest
from models.instance import ReleaseHeldRequest as InstanceReleaseRequest
from models.kube_ops import DeleteObjectInput
from planning import replica_events as events
from planning.replica_reconcile import reconcile
from planning.replica_reset import ResetRequestError, parse_reset_request, plan_reset
from planning.replica_retry import ReleaseResult, release_held
from planning.replica_revisions import complete_rollout, history_limit, trim_history
from planning.replica_template import InstanceIdentity, instance_spec
from workflows import kube_calls
from workflows.names import INSTANCE, instance_workflow_id
from workflows.replica_projection import ReplicaProjection


class ReplicaInstances(ReplicaProjection):
    """Acts on the Instance children; the workflow subclass decides when."""

    wake_at: datetime | None
    """When the last plan said its decision can change (e.g. a back-off ends); None: no need."""

    async def act(self, desired: int, now: datetime) -> None:
        state, config = self.state, self.state.config
        policy = self.policy()
        current = state.revisions.record(state.revisions.current)
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
            reserved_indexes=state.removing,
        )
        # Every start and signal of the pass goes out in one workflow task (the commands are
        # issued in the plan's order); awaiting each in turn would cost a task per Instance.
        sends: list[Awaitable[None]] = [
            self.start_instance(new.index, new.revision) for new in actions.create
        ]
        for index in actions.update:
            state.requested_updates[index] = config.revision_hash
            spec = self.instance_spec(index, config.revision_hash)
            sends.append(self.signal_instance(index, INSTANCE_UPDATE, UpdateRequest(spec=spec)))
        for index in actions.delete:
            sends.append(
                self.signal_instance(index, INSTANCE_DELETE, InstanceDeleteRequest(reason="ScaleDown"))
            )
            state.removing.append(index)
        await self.send_all(sends)
        state.hold = actions.hold
        self.wake_at = actions.wake_at
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

    def instance_spec(self, index: int, revision_hash: str) -> InstanceSpec:
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
            parent_workflow_id=workflow.info().workflow_id,
        )
        return instance_spec(identity, ComponentSpec.model_validate(component), config.cluster, self.policy())

    async def start_instance(self, index: int, revision_hash: str) -> None:
        config = self.state.config
        workflow_id = instance_workflow_id(config.namespace, config.isvc, config.component, index)
        try:
            await workflow.start_child_workflow(
                INSTANCE,
                self.instance_spec(index, revision_hash),
                id=workflow_id,
                # The Instance must outlive this run's continue-as-new; deletion is a signal.
                parent_close_policy=workflow.ParentClosePolicy.ABANDON,
                id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
                static_summary=f"Instance {index} of {config.ir_name} ({self.names().get(revision_hash)})",
            )
        except WorkflowAlreadyStartedError:
            # Started by an earlier run of this workflow: it reports to us by workflow ID.
            pass
        self.state.launched[index] = revision_hash

    async def signal_instance(self, index: int, name: str, payload: Any) -> None:
        config = self.state.config
        workflow_id = instance_workflow_id(config.namespace, config.isvc, config.component, index)
        try:
            await workflow.get_external_workflow_handle(workflow_id).signal(name, payload)
        except Exception as error:  # noqa: BLE001 - an Instance that already ended needs nothing
            workflow.logger.warning("signal %s to %s failed: %s", name, workflow_id, error)

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
