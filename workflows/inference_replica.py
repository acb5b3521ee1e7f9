"""The `InferenceReplica` workflow: one OMENative component's Instances.

`irep/{ns}/{isvc}-{component}`, started by the InferenceService workflow as a child (parent
close policy ABANDON: neither the parent's continue-as-new nor its end may take the Instances
down; deletion is an explicit `delete` signal). Each pass is observe -> plan -> act -> wait:

- observe: the Instances' `instance_changed` reports, the parent's `configure`, and the user
  requests the parent forwards (`reset_instances`, `release_held`, `delete`);
- plan: `planning.replica_reconcile.reconcile` (count, rollout within the budget, hold),
  `planning.replica_reset`, `planning.replica_retry`, `planning.replica_conditions`;
- act: start `Instance` children, signal them `update` / `restart` / `delete` /
  `release_held`, write the InferenceReplica object and its status, record Events, and tell
  the parent the component's totals and condition (`replica_changed`);
- wait: for the next message, or the moment the plan said the decision can change.

What this workflow asked for and has not heard back yet (an update signalled, an Instance
started, a delete sent) is folded into its view at once, so a second pass before the
report arrives neither repeats the request nor spends the budget twice.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import ActivityError, WorkflowAlreadyStartedError

with workflow.unsafe.imports_passed_through():
    from models.inferencereplica import InferenceReplicaStatus
    from models.inferenceservice import ComponentSpec
    from models.instance import (
        PARENT_SIGNAL_INSTANCE_CHANGED,
        InstancePhase,
        InstanceSpec,
        InstanceStatus,
        RestartRequest,
        RetryBlock,
        RetryBlockState,
        UpdateRequest,
    )
    from models.instance import SIGNAL_DELETE as INSTANCE_DELETE
    from models.instance import SIGNAL_RELEASE_HELD as INSTANCE_RELEASE_HELD
    from models.instance import SIGNAL_RESTART as INSTANCE_RESTART
    from models.instance import SIGNAL_UPDATE as INSTANCE_UPDATE
    from models.instance import DeleteRequest as InstanceDeleteRequest
    from models.instance import ReleaseHeldRequest as InstanceReleaseRequest
    from models.kube_ops import (
        ApplyObjectInput,
        CrdExistsInput,
        DeleteObjectInput,
        ObjectRef,
        PatchStatusInput,
        RecordEventInput,
    )
    from planning import replica_events as events
    from planning.replica_budget import UpdatePolicy, minimum_serving, update_policy
    from planning.replica_conditions import (
        PlannedCondition,
        component_condition,
        gang_scheduling_condition,
        ready_condition,
        ready_timeout_condition,
        rollout_progress,
    )
    from planning.replica_facts import InstanceFacts, facts_from_status, replica_counts
    from planning.replica_reconcile import aggregate_blocks, reconcile, with_target
    from planning.replica_reset import ResetRequestError, parse_reset_request, plan_reset
    from planning.replica_retry import ReleaseResult, current_blocks, release_held
    from planning.replica_revisions import complete_rollout, history_limit, observe_template, trim_history
    from planning.replica_scale import desired_replicas
    from planning.replica_status import project_status, with_transitions
    from planning.replica_template import InstanceIdentity, instance_ready_timeout_seconds, instance_spec
    from planning.service_objects import render_inference_replica
    from workflows import kube_calls, search_attributes
    from workflows.names import INFERENCE_REPLICA, INSTANCE, instance_workflow_id
    from workflows.service_calls import (
        API_VERSION,
        QUERY_STATUS,
        SIGNAL_CONFIGURE,
        SIGNAL_DELETE,
        SIGNAL_RELEASE_HELD,
        SIGNAL_REPLICA_CHANGED,
        SIGNAL_RESET_INSTANCES,
        ReplicaConfig,
        ReplicaReport,
        ReplicaState,
    )

SAFETY_RECHECK = timedelta(minutes=5)
"""Everything reaches this workflow as a message; the timer only covers a lost one."""

P = InstancePhase


@workflow.defn(name=INFERENCE_REPLICA)
class InferenceReplicaWorkflow:
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
        now = workflow.now()
        wake = now + SAFETY_RECHECK
        if self.wake_at is not None:
            wake = min(wake, self.wake_at)
        timeout = max((wake - now).total_seconds(), 0.001)
        try:
            await workflow.wait_condition(lambda: self.seq != seen, timeout=timedelta(seconds=timeout))
        except TimeoutError:
            pass

    # --- one pass -------------------------------------------------------------------

    def policy(self) -> UpdatePolicy:
        config = self.state.config
        return update_policy(config.effective.lifecycle, config.cluster.update_policy)

    def desired(self) -> int:
        config = self.state.config
        effective = config.effective
        return desired_replicas(
            effective.min_replicas, effective.max_replicas, None, config.transient_replicas
        ).desired

    def names(self) -> dict[str, str]:
        """Revision hash -> ControllerRevision-style name, for status and events."""
        return {record.hash: record.name for record in self.state.revisions.history}

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
        await self.act(desired, now)
        await self.write_spec(desired)
        await self.publish(now)
        return False

    def facts(self) -> list[InstanceFacts]:
        """What the rules read: reports, overlaid with what we asked for and have not heard back."""
        state = self.state
        policy = self.policy()
        facts: dict[int, InstanceFacts] = {}
        for index, status in state.instances.items():
            fact = facts_from_status(status)
            requested = state.requested_updates.get(index)
            if requested is not None and fact.target_revision != requested:
                fact = with_target(fact, requested, policy)
            if index in state.removing:
                fact = replace(fact, phase=P.DELETING, operation="Delete")
            facts[index] = fact
        for index, revision in state.launched.items():
            facts.setdefault(
                index,
                InstanceFacts(
                    index=index,
                    phase=P.CREATING,
                    target_revision=revision,
                    operation="Create",
                    has_pods=False,
                ),
            )
        return [facts[index] for index in sorted(facts)]

    def retry_blocks(self) -> list[RetryBlock]:
        """The update revision's block, from the Instances that run its attempts."""
        instances = self.state.instances.values()
        ready_on = {s.running_revision for s in instances if s.ready and s.running_revision}
        blocks = aggregate_blocks([status.retry_block for status in instances])
        return current_blocks(blocks, self.state.config.revision_hash, {r for r in ready_on if r})

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
        for new in actions.create:
            await self.start_instance(new.index, new.revision)
        for index in actions.update:
            state.requested_updates[index] = config.revision_hash
            spec = self.instance_spec(index, config.revision_hash)
            await self.signal_instance(index, INSTANCE_UPDATE, UpdateRequest(spec=spec))
        for index in actions.delete:
            await self.signal_instance(index, INSTANCE_DELETE, InstanceDeleteRequest(reason="ScaleDown"))
            state.removing.append(index)
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
                for status in state.instances.values():
                    own = status.retry_block
                    if own is not None and own.target_revision == block.target_revision:
                        release = InstanceReleaseRequest(revision=own.target_revision)
                        await self.signal_instance(status.index, INSTANCE_RELEASE_HELD, release)
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
            for index in outcome.reset:
                # A restart of a Failed Instance deletes its pods and clears its operation.
                await self.signal_instance(index, INSTANCE_RESTART, RestartRequest(reason="InstancesReset"))
            for event in events.reset_events(config.namespace, config.ir_name, config.component, outcome):
                await self.record(event)

    # --- deletion -------------------------------------------------------------------

    async def tear_down(self) -> bool:
        """Drain and delete every Instance, then the InferenceReplica object; True when done."""
        state, config = self.state, self.state.config
        for index in sorted(set(state.instances) | set(state.launched)):
            if index not in state.removing:
                request = InstanceDeleteRequest(reason="InferenceServiceDeleted")
                await self.signal_instance(index, INSTANCE_DELETE, request)
                state.removing.append(index)
        if state.instances or state.launched:
            await self.publish(workflow.now())
            return False
        await kube_calls.delete_object(
            DeleteObjectInput(ref=self.ir_ref()),
            summary=f"delete InferenceReplica {config.ir_name}: every Instance drained and deleted",
        )
        await self.report(deleted=True)
        return True

    # --- projection -----------------------------------------------------------------

    def ir_ref(self) -> ObjectRef:
        config = self.state.config
        return ObjectRef(
            api_version=API_VERSION,
            kind="InferenceReplica",
            name=config.ir_name,
            namespace=config.namespace,
            plural="inferencereplicas",
            uid=self.state.ir_uid,
        )

    async def write_spec(self, desired: int) -> None:
        state, config = self.state, self.state.config
        spec = config.ir_spec.model_copy(
            update={
                "replicas": desired,
                "paused": config.paused,
                "pause_mode": "Recover" if config.paused else None,
            }
        )
        manifest = render_inference_replica(spec, config.isvc, config.namespace, config.isvc_uid)
        fingerprint = json.dumps(manifest, sort_keys=True)
        if fingerprint == state.written_spec and state.ir_uid is not None:
            return
        result = await kube_calls.apply_object(
            ApplyObjectInput(manifest=manifest, plural="inferencereplicas"),
            summary=f"write InferenceReplica {config.ir_name}: {desired} Instance(s) of {config.revision_name}"
            + (" (paused)" if config.paused else ""),
        )
        state.ir_uid = result.ref.uid or state.ir_uid
        state.written_spec = fingerprint

    async def check_gang_scheduling(self) -> None:
        if self.state.podgroup_crd is None and self.state.config.effective.is_multi_pod:
            found = await kube_calls.crd_exists(
                CrdExistsInput(), summary="check the PodGroup CRD for gang scheduling"
            )
            self.state.podgroup_crd = found.exists

    def build_status(self, now: datetime) -> tuple[InferenceReplicaStatus, PlannedCondition]:
        """The InferenceReplica status, and the InferenceService's `<Component>Ready` condition."""
        state, config = self.state, self.state.config
        policy = self.policy()
        desired = state.last_desired if state.last_desired is not None else self.desired()
        facts = [fact for fact in self.facts() if fact.index not in state.removing]
        counts = replica_counts(facts, config.revision_hash, now, policy.min_ready_seconds)
        minimum = minimum_serving(policy, desired)
        progress = rollout_progress(facts, config.revision_hash, policy.partition) if facts else None
        planned = [
            ready_condition(desired, counts, minimum, progress),
            gang_scheduling_condition(config.effective.is_multi_pod, bool(state.podgroup_crd)),
            ready_timeout_condition(instance_ready_timeout_seconds(config.effective, config.cluster)),
        ]
        names = self.names()
        status = project_status(
            isvc=config.isvc,
            component=config.component,
            generation=config.generation,
            instances=list(state.instances.values()),
            counts=counts,
            revisions=state.revisions,
            retry_blocks=[
                block.model_copy(
                    update={"target_revision": names.get(block.target_revision, block.target_revision)}
                )
                for block in self.retry_blocks()
            ],
            hold=state.hold,
            conditions=planned,
            previous_conditions=state.conditions,
            now=now,
        )
        return status, component_condition(config.component, desired, counts, minimum)

    def phase(self, status: InferenceReplicaStatus) -> str:
        """One word for the UI's `OmePhase` column."""
        ready = status.condition("Ready")
        if self.state.deleting:
            return "Deleting"
        if self.state.config.paused:
            return "Paused"
        if ready is None:
            return "Progressing"
        if ready.reason == "RolloutInProgress":
            return "Updating"
        if ready.reason == "InstanceFailed":
            return "Failed"
        return "Ready" if ready.status == "True" else "Progressing"

    async def publish(self, now: datetime) -> None:
        """Write the status, tell the parent, and keep the UI's phase current."""
        state, config = self.state, self.state.config
        status, _ = self.build_status(now)
        state.conditions = status.conditions
        body = status.to_manifest()
        fingerprint = json.dumps(body, sort_keys=True)
        if fingerprint != state.written_status:
            state.written_status = fingerprint
            ready = status.condition("Ready")
            hold = status.rollout_hold
            await kube_calls.patch_status(
                PatchStatusInput(ref=self.ir_ref(), status=body, missing_ok=True),
                summary=f"status of {config.ir_name}: {status.ready_replicas}/{state.last_desired} Ready"
                + (f", {ready.reason}" if ready is not None else "")
                + (f", hold {hold.gate}: {hold.reason}" if hold is not None else ""),
            )
        await self.report(deleted=False)

    async def report(self, deleted: bool) -> None:
        state, config = self.state, self.state.config
        now = workflow.now()
        status, component = self.build_status(now)
        # The InferenceService keeps its own transition times (planning.service_status).
        (condition,) = with_transitions([], [component], now, config.generation)
        phase = "Deleted" if deleted else self.phase(status)
        report = ReplicaReport(
            component=config.component, status=status, condition=condition, phase=phase, deleted=deleted
        )
        fingerprint = json.dumps(
            report.model_dump(mode="json", exclude={"condition": {"last_transition_time"}}), sort_keys=True
        )
        if fingerprint == state.reported:
            return
        state.reported = fingerprint
        workflow.upsert_search_attributes([search_attributes.PHASE.value_set(phase)])
        parent = config.parent_workflow_id
        if parent is None:
            return
        try:
            await workflow.get_external_workflow_handle(parent).signal(SIGNAL_REPLICA_CHANGED, report)
        except Exception as error:  # noqa: BLE001 - a gone parent must not stop the Instances' care
            workflow.logger.warning("could not report to %s: %s", parent, error)

    async def record(self, event: events.PlannedEvent) -> None:
        config = self.state.config
        involved = self.ir_ref()
        if event.on_isvc:
            involved = ObjectRef(
                api_version=API_VERSION,
                kind="InferenceService",
                name=config.isvc,
                namespace=config.namespace,
                uid=config.isvc_uid,
            )
        try:
            await kube_calls.record_event(
                RecordEventInput(
                    involved=involved, reason=event.reason, message=event.message[:1000], type=event.type
                ),
                summary=f"event {event.reason}: {event.message[:160]}",
            )
        except ActivityError as error:  # an Event is a projection: losing one must not stop the rollout
            workflow.logger.warning("event %s not recorded: %s", event.reason, error)
