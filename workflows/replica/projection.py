"""The InferenceReplica workflow's view of itself: its facts, status, object and Events.

`ReplicaProjection` is the base of `workflows.replica.workflow.InferenceReplicaWorkflow`. It
folds the Instances' reports and this workflow's own outstanding requests into the facts the
rules read (`facts`, `retry_blocks`), and projects them outward: the InferenceReplica object
(`write_spec`), its status (`build_status`, `publish`), the totals and condition the parent
InferenceService reads (`report`), the UI's phase, and Kubernetes Events (`record`).
Nothing here starts or signals an Instance; that is `workflows.replica.instances`.

Imported by the workflow module inside `workflow.unsafe.imports_passed_through()`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from dataclasses import replace
from datetime import datetime

from temporalio import workflow

from models.inferencereplica import InferenceReplicaStatus
from models.instance import InstancePhase, RetryBlock
from models.kube_ops import (
    ApplyObjectInput,
    CrdExistsInput,
    ObjectRef,
    PatchStatusInput,
)
from planning.objects import OME_API_VERSION
from planning.replica import events
from planning.replica.budget import UpdatePolicy, minimum_serving, update_policy
from planning.replica.conditions import (
    PlannedCondition,
    component_condition,
    gang_scheduling_condition,
    ready_condition,
    ready_timeout_condition,
    rollout_progress,
)
from planning.replica.facts import InstanceFacts, facts_from_status, replica_counts
from planning.replica.manifest import render_inference_replica
from planning.replica.publish import condition_key, decide_publish, digest
from planning.replica.reconcile import aggregate_blocks, with_target
from planning.replica.retry import current_blocks
from planning.replica.scale import desired_replicas
from planning.replica.status import project_status, with_transitions
from planning.replica.template import instance_ready_timeout_seconds
from workflows import kube_calls, search_attributes
from workflows.events import isvc_ref, record_event
from workflows.parent import signal_parent
from workflows.replica.messages import SIGNAL_REPLICA_CHANGED, ReplicaReport, ReplicaState

P = InstancePhase


class ReplicaProjection:
    """Facts and projections over `self.state`; the workflow subclass owns the messages."""

    state: ReplicaState
    wake_at: datetime | None
    """When the last plan said its decision can change (a back-off ends, a paced status
    write is due); None: no need."""

    async def send_all(self, sends: Sequence[Awaitable[object]]) -> None:
        """Await `sends` together, so their commands leave in one workflow task, in order."""
        await asyncio.gather(*sends)

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

    # --- projection -----------------------------------------------------------------

    def ir_ref(self) -> ObjectRef:
        config = self.state.config
        return ObjectRef(
            api_version=OME_API_VERSION,
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
                # Unpaused, the default `Recover` is written out: an apply merges, so a `Freeze`
                # left out would linger on the object after resume.
                "pause_mode": config.effective_pause_mode or "Recover",
            }
        )
        manifest = render_inference_replica(spec, config.isvc, config.namespace, config.isvc_uid)
        fingerprint = digest(manifest)
        if fingerprint == state.written_spec and state.ir_uid is not None:
            return
        result = await kube_calls.apply_object(
            ApplyObjectInput(manifest=manifest, plural="inferencereplicas"),
            summary=f"write InferenceReplica {config.ir_name}: {desired} Instance(s) of {config.revision_name}"
            + (f" (paused, {config.effective_pause_mode})" if config.paused else ""),
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
        """Write the status, tell the parent, and keep the UI's phase current.

        Paced by `planning.replica.publish`: a large component's count-only changes are
        written at most every few seconds; a held-back write sets `wake_at`.
        """
        state, config = self.state, self.state.config
        status, component = self.build_status(now)
        state.conditions = status.conditions
        body = status.to_manifest()
        fingerprint = digest(body)
        phase = self.phase(status)
        key = digest(
            [condition_key(status.conditions), (component.type, component.status, component.reason), phase]
        )
        decision = decide_publish(
            changed=fingerprint != state.written_status or key != state.published_key,
            urgent=key != state.published_key,
            last_written_at=state.status_written_at,
            instances=len(state.instances),
            now=now,
        )
        if decision.wake_at is not None:
            self.wake_at = decision.wake_at if self.wake_at is None else min(self.wake_at, decision.wake_at)
        if not decision.write:
            return
        state.status_written_at = now
        state.published_key = key
        # The status write and the report to the parent go out in the same workflow task.
        sends: list[Awaitable[object]] = []
        if fingerprint != state.written_status:
            state.written_status = fingerprint
            ready = status.condition("Ready")
            hold = status.rollout_hold
            sends.append(
                kube_calls.patch_status(
                    PatchStatusInput(ref=self.ir_ref(), status=body, missing_ok=True),
                    summary=f"status of {config.ir_name}: {status.ready_replicas}/{state.last_desired} Ready"
                    + (f", {ready.reason}" if ready is not None else "")
                    + (f", hold {hold.gate}: {hold.reason}" if hold is not None else ""),
                )
            )
        sends.append(self.report(deleted=False, status=status, component=component))
        await self.send_all(sends)

    async def report(
        self,
        deleted: bool,
        status: InferenceReplicaStatus | None = None,
        component: PlannedCondition | None = None,
    ) -> None:
        """Tell the parent the totals and its `<Component>Ready` condition (never the rows:
        per-Instance rows are not mirrored on the InferenceService, spec reference §7)."""
        state, config = self.state, self.state.config
        now = workflow.now()
        if status is None or component is None:
            status, component = self.build_status(now)
        # The InferenceService keeps its own transition times (planning.service.status).
        (condition,) = with_transitions([], [component], now, config.generation)
        phase = "Deleted" if deleted else self.phase(status)
        report = ReplicaReport(
            component=config.component,
            status=status.model_copy(update={"instance_statuses": []}),
            condition=condition,
            phase=phase,
            deleted=deleted,
        )
        fingerprint = digest(report.model_dump(mode="json", exclude={"condition": {"last_transition_time"}}))
        if fingerprint == state.reported:
            return
        state.reported = fingerprint
        workflow.upsert_search_attributes([search_attributes.PHASE.value_set(phase)])
        parent = config.parent_workflow_id
        if parent is None:
            return
        await signal_parent(parent, SIGNAL_REPLICA_CHANGED, report)

    async def record(self, event: events.PlannedEvent) -> None:
        config = self.state.config
        involved = self.ir_ref()
        if event.on_isvc:
            involved = isvc_ref(config.isvc, config.namespace, config.isvc_uid)
        await record_event(involved, event.reason, event.message, event.type)
