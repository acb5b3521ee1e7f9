"""The `InferenceService` workflow: one InferenceService from its first apply to its deletion.

`isvc/{ns}/{name}`. The spec enters through the `apply` update (update-with-start): its
validator runs admission (`models.admission.admit`), so a refused manifest is answered with
its reason codes and leaves nothing in history; an accepted change bumps the generation. A
workflow started directly with a manifest as its input runs the same admission first and
fails at once, non-retryably (`AdmissionDenied`), having created nothing.

Each pass: write the InferenceService object (so owner references have a real owner), read
its runtime, plan its components (`planning.service.components`: effective spec, mode,
revision), then per component keep its objects (`planning.service.objects`): an
`InferenceReplica` child workflow for OMENative (parent close policy ABANDON, steered by
signals), or a plain Deployment; a Service; and for OMENative a PodDisruptionBudget. The
InferenceReplicas report with `replica_changed`; their totals and conditions go into
`status.components.<c>.lifecycle` and the `<Component>Ready` conditions
(`planning.service.status`).

A Deployment-mode component's `<Component>Ready` comes from its Deployment's status
(`planning.service.deployment`). How the workflow learns of it: event-driven, by the
watcher (`workers.watch.deployments`), which watches the product's Deployments and signals
`deployment_changed` with the Deployment's counts whenever they change, the same
level-triggered way pods reach Instances; no polling while nothing changes. The workflow
also reads the Deployment right after applying it (so the status starts from the truth,
and a watcher signal older than that read is dropped by resourceVersion), and re-reads it
when no news came for a while: while a Deployment has not converged (rolled out, every
desired pod available) after 15 s, doubling to 5 minutes; once converged only on the
5-minute safety timer. That bounds the cost of a lost signal, or of running without the
watcher, to one GET per Deployment per back-off step, and a Deployment stuck unconverged
settles at one read per 5 minutes.

Rollout groups (`spec.rollout.groups`): a change that gives a grouped component a new
revision while an older one serves opens a `Rollout` child (`workflows.service.rollouts`),
which paces the group's InferenceReplicas through this workflow: their counts go to the run,
the run's allowances come back as each InferenceReplica's `Coordination`.

Signals: `pause`, `resume`, `scale`, `release_held`, `reset_instances`, `delete`; from the
watcher `deployment_changed`; from the children `replica_changed` and `rollout_changed`.
Queries `status`, `rollout_status`, `explain <component>`, `preview <manifest>`.

A `scale` is checked by the next pass (`planning.service.scale`): a component that does
not exist or does not run (`MultiNode`), or replicas that are not a whole number within
`[minReplicas, maxReplicas]`, are refused with a Warning Event `ScaleRejected` on the
InferenceService (`kubectl describe isvc`, `kubectl get events`) and the refusal stays in
the `status` query's `last_rejected_request` (signals have no reply; these are the two
places an operator looks). Handlers only record; the loop acts.

This module holds admission, the handlers and the loop (the rollout and migration requests'
handlers in `workflows.service.steering`); the contract is
`workflows.service.messages`, the components' objects and InferenceReplica children
`workflows.service.components`, the rollout runs `workflows.service.rollouts`, the phase and
status `workflows.service.projection` (the workflow class inherits the last two's bases).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from models.admission import admit
    from models.inferenceservice import InferenceService
    from models.isvc_status import InferenceServiceStatus
    from models.kube_ops import DeleteObjectInput
    from models.runtime import ServingRuntimeSpec
    from planning.replica.template import ClusterLifecycle
    from planning.service.deployment import DeploymentObserved
    from planning.service.pause_signal import discards_pending, on_pause, on_resume
    from planning.service.relay import ISVC_FINALIZER, manifest_digest
    from workflows import history_budget, kube_calls, search_attributes, waiting
    from workflows.names import INFERENCE_SERVICE, isvc_workflow_id
    from workflows.replica.messages import SIGNAL_REPLICA_CHANGED, ReplicaReport
    from workflows.rollout.messages import SIGNAL_ROLLOUT_CHANGED, RolloutReport
    from workflows.service import canary_requests, rollout_views, rollouts
    from workflows.service.canary_requests import DISCARDED, CanaryAsk
    from workflows.service.events import record_pause_events
    from workflows.service.homes import SIGNAL_MEMBER_APPLY, SIGNAL_MEMBER_CHANGED, MemberApply, MemberReport
    from workflows.service.messages import (
        ADMISSION_DENIED,
        CONTINUED_STATE_KEY,
        QUERY_APPLIED,
        QUERY_EXPLAIN,
        QUERY_PREVIEW,
        QUERY_ROLLOUT_STATUS,
        QUERY_STATUS,
        SIGNAL_DELETE,
        SIGNAL_DEPLOYMENT_CHANGED,
        SIGNAL_PAUSE,
        SIGNAL_RELEASE_HELD,
        SIGNAL_RESET_INSTANCES,
        SIGNAL_RESUME,
        SIGNAL_RUNTIME_CHANGED,
        SIGNAL_SCALE,
        UPDATE_APPLY,
        AppliedView,
        ApplyOrigin,
        ApplyResult,
        ExplainView,
        Forward,
        PreviewView,
        ReleaseHeldRequest,
        ResetInstancesRequest,
        RolloutStatusView,
        ScaleRequest,
        ServiceState,
        ServiceStatusView,
    )
    from workflows.service.placement import placed_by_clusters
    from workflows.service.projection import identity
    from workflows.service.steering import ServiceSteering

OBSERVED_OBJECT_GENERATION = "isvc-observed-object-generation"
"""Patch: `status.observedGeneration` is the object's `metadata.generation` (issue 15); runs
that started before keep writing the workflow's own count, as their histories did."""
SAFETY_RECHECK = timedelta(minutes=5)
"""Every change arrives as a message; the timer only re-reads a runtime that was missing and
the Deployments of Deployment-mode components (a lost watcher signal is repaired by then)."""
IDLE_RECHECK = timedelta(hours=1)
"""`SAFETY_RECHECK` once everything converged, in runs under `ISVC_IDLE_RECHECK`: a lost signal
of a converged service costs at most an hour, and the idle service one timer an hour (issue
17: at most one Temporal action per idle Instance per hour, for a 20-Instance service too)."""
ISVC_IDLE_RECHECK = "isvc-idle-recheck"
"""`workflow.patched` id: the converged service's re-check every `IDLE_RECHECK`."""
ISVC_KEPT_TIMER = "isvc-kept-timer"
"""`workflow.patched` id, asked once at the start of each run: the loop's timer outlives the
wait that set it (`waiting.Waits`); histories from before cancelled and restarted it per wake."""
ISVC_HANDS_OVER_EARLY = "isvc-hands-over-early"
"""`workflow.patched` id of `history_budget.hands_over`: runs from it on continue as new at
2,000 events or 1 MB; histories from before went on to the server's suggestion."""
ISVC_SERVES_UNTIL_HANDED_OVER = "isvc-serves-until-handed-over"
"""`workflow.patched` id, asked when continue-as-new is suggested while an Update still runs:
the loop goes on serving until the last handler is done (a canary request's answer comes
through it); histories from before waited for the handlers, and such an Update for its 60 s."""
DEPLOYMENT_RECHECK = timedelta(seconds=15)
"""First re-read of a Deployment still converging with no news; doubles up to SAFETY_RECHECK."""


def _same_spec(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two manifests ask for the same thing (status and server-set fields aside)."""

    def essence(manifest: dict[str, Any]) -> str:
        metadata = manifest.get("metadata") or {}
        return json.dumps(
            [manifest.get("spec"), metadata.get("labels"), metadata.get("annotations")], sort_keys=True
        )

    return essence(a) == essence(b)


@dataclass(frozen=True)
class Admitted:
    """Admission's answer for a manifest replacing the current one."""

    allowed: bool
    summary: str
    reasons: tuple[str, ...]
    """Reason codes of a refusal (`FieldValueInvalid`, ...)."""
    warnings: tuple[str, ...]

    def error(self) -> ApplicationError:
        """The refusal as the update and a direct start answer it."""
        return ApplicationError(
            f"InferenceService refused by admission:\n{self.summary}"[:4000],
            list(self.reasons),
            type=ADMISSION_DENIED,
            non_retryable=True,
        )


@workflow.defn(name=INFERENCE_SERVICE)
class InferenceServiceWorkflow(ServiceSteering):
    @workflow.init
    def __init__(self, arg: dict[str, Any]) -> None:
        if CONTINUED_STATE_KEY in arg:
            self.state = ServiceState.model_validate(arg[CONTINUED_STATE_KEY])
        else:
            # Tests and operators may pass cluster-wide lifecycle settings next to the manifest.
            manifest = arg["manifest"] if "manifest" in arg else arg
            cluster = (
                ClusterLifecycle.model_validate(arg["cluster"]) if "cluster" in arg else ClusterLifecycle()
            )
            self.state = ServiceState(
                manifest=manifest,
                cluster=cluster,
                # A multi-cluster home's member (`workflows.service.placement`).
                home=arg.get("home"),
                placement_parent=arg.get("placement_parent"),
                source_generation=arg.get("source_generation", 0),
            )
        self.lock = asyncio.Lock()
        self.seq = 0
        self.waits = waiting.Waits(keep=False)
        """The loop's timer; kept across waits from `ISVC_KEPT_TIMER` on (decided in `run`)."""
        # Set when the wait for news timed out: the next pass re-reads the Deployments.
        self.recheck = False

    # --- the spec -------------------------------------------------------------------

    def _admit(self, manifest: dict[str, Any]) -> Admitted:
        """Admission of `manifest` replacing the current one, in this workflow."""
        state = self.state
        old = state.manifest if state.admitted else None
        runtime = ServingRuntimeSpec.model_validate(state.runtime_spec) if state.runtime_spec else None
        admission = admit(manifest, old, runtime)
        warnings = tuple(finding.message for finding in admission.warnings)
        expected = workflow.info().workflow_id
        namespace, name = identity(manifest)
        own = isvc_workflow_id(namespace, name, state.home)
        if admission.allowed and own != expected:
            message = (
                f'metadata.namespace/name "{namespace}/{name}" does not belong to workflow {expected}; '
                f"apply it to workflow {own} (FieldValueInvalid)"
            )
            return Admitted(False, message, ("FieldValueInvalid",), warnings)
        return Admitted(admission.allowed, admission.summary(), tuple(admission.reasons), warnings)

    @workflow.update(name=UPDATE_APPLY)
    async def apply(self, manifest: dict[str, Any], origin: ApplyOrigin | None = None) -> ApplyResult:
        """`origin` is set by the controller: the object generation the manifest was read from.
        A relay older than the object generation held is late and changes nothing; one the
        workflow wrote itself (same digest) neither."""
        async with self.lock:
            state = self.state
            warnings = list(self._admit(manifest).warnings)
            if origin is not None:
                if origin.uid and state.isvc_uid and origin.uid != state.isvc_uid:
                    state.object_generation = 0  # a new object of the same name: its generations start over
                late = origin.object_generation < state.object_generation or (
                    # A temporal apply waits to be written over this very generation: it is the
                    # newer spec; what else changed on the object comes back with the relay of
                    # the generation the workflow writes.
                    origin.object_generation == state.object_generation and state.temporal_write_pending
                )
                if late:
                    return ApplyResult(
                        accepted=True, generation=state.generation, changed=False, warnings=warnings, superseded=True
                    )
                state.object_generation = origin.object_generation
                state.spec_from_object = True
            changed = not state.admitted or not _same_spec(manifest, state.manifest)
            if changed and origin is None:
                state.spec_from_object = False
                state.temporal_write_pending = True
            if state.transient or state.scale_requests:
                # A transient scale lasts until the next apply sets the count again; one
                # received before this apply and not yet taken is overridden by it too.
                state.transient = {}
                state.scale_requests = []
                self.seq += 1
            if changed:
                state.manifest = manifest
                state.admitted = True
                state.generation += 1
                self.seq += 1
            return ApplyResult(accepted=True, generation=state.generation, changed=changed, warnings=warnings)

    @apply.validator
    def validate_apply(self, manifest: dict[str, Any], origin: ApplyOrigin | None = None) -> None:
        if self.state.deleting:
            raise ApplicationError(
                "the InferenceService is being deleted; apply again once its workflow has completed",
                type=ADMISSION_DENIED,
            )
        admitted = self._admit(manifest)
        if not admitted.allowed:
            raise admitted.error()

    # --- user signals ---------------------------------------------------------------

    @workflow.signal(name=SIGNAL_PAUSE)
    def pause(self, mode: Any = None) -> None:
        """No input (or `"true"`) pauses fleet changes; `"freeze"` stops repairs too (§5).
        `{"mode": ..., "discard_pending_actions": true}` also drops pending promote and rollback
        requests. Any other value is refused, and a freeze is never downgraded: the Event says why."""
        state = self.state
        outcome = on_pause(state.pause, mode)
        state.pause = outcome.mode
        state.pause_events.append(outcome.event)
        if discards_pending(mode) and outcome.mode is not None:
            # Not yet delivered: dropped here; already with the run: it drops them (§5).
            state.rollout.canary_requests = [r for r in state.rollout.canary_requests if r.action not in DISCARDED]
            canary_requests.queue(state, canary_requests.request_of("discard", None))
        self.seq += 1

    @workflow.signal(name=SIGNAL_RESUME)
    def resume(self, retry: str | None = None) -> None:
        """Removes either depth; without a pause it is refused (Event `ResumeRefused`). With a
        canary revision (`engine=<hash>` or `<hash>`) it retries that canary instead (§3.1)."""
        if retry is not None:
            self.ask_canary_by_signal("retry", CanaryAsk(revision=retry))
            return
        state = self.state
        outcome = on_resume(state.pause)
        state.pause = outcome.mode
        state.pause_events.append(outcome.event)
        self.seq += 1

    @workflow.signal(name=SIGNAL_SCALE)
    def scale(self, request: ScaleRequest) -> None:
        # Checked by the next pass against the components as planned then; a refusal becomes
        # a ScaleRejected Event and `last_rejected_request` (`take_scale_requests`).
        self.state.scale_requests.append(request)
        self.seq += 1

    @workflow.signal(name=SIGNAL_RELEASE_HELD)
    def release_held(self, request: ReleaseHeldRequest) -> None:
        self.state.forwards.append(
            Forward(component=request.component, signal=SIGNAL_RELEASE_HELD, value=request.revision)
        )
        self.seq += 1

    @workflow.signal(name=SIGNAL_RESET_INSTANCES)
    def reset_instances(self, request: ResetInstancesRequest) -> None:
        self.state.forwards.append(
            Forward(component=request.component, signal=SIGNAL_RESET_INSTANCES, value=request.instances)
        )
        self.seq += 1

    @workflow.signal(name=SIGNAL_RUNTIME_CHANGED)
    def runtime_changed(self) -> None:
        """From the controller: the runtime this service uses changed; the next pass re-reads it."""
        self.state.runtime_stale = True
        self.seq += 1

    @workflow.signal(name=SIGNAL_DELETE)
    def delete(self, request: dict[str, Any] | None = None) -> None:
        """From a user (no input), or from the controller with `{"uid": ...}` of the object that
        was deleted: a delete for an older object of the same name is ignored."""
        uid = (request or {}).get("uid") if isinstance(request, dict) else None
        if uid and self.state.isvc_uid and uid != self.state.isvc_uid:
            workflow.logger.info("delete of object %s ignored: this workflow owns object %s", uid, self.state.isvc_uid)
            return
        self.state.deleting = True
        self.seq += 1

    @workflow.signal(name=SIGNAL_MEMBER_APPLY)
    def member_apply(self, copy: MemberApply) -> None:
        """The placement source's copy of the spec for this home (`workflows.service.homes`)."""
        if not self.state.deleting and self.take_copy(copy, self._admit(copy.manifest)):
            self.seq += 1

    @workflow.signal(name=SIGNAL_MEMBER_CHANGED)
    def member_changed(self, report: MemberReport) -> None:
        home = self.placement_tracking().homes.get(report.cluster)
        if home is not None:
            home.report = report
            self.seq += 1

    @workflow.signal(name=SIGNAL_REPLICA_CHANGED)
    def replica_changed(self, report: ReplicaReport) -> None:
        self.state.replicas[report.component] = report
        self.seq += 1

    @workflow.signal(name=SIGNAL_ROLLOUT_CHANGED)
    def rollout_changed(self, report: RolloutReport) -> None:
        if rollouts.on_report(self.state.rollout, report):
            canary_requests.note_refusals(self.state)
            self.seq += 1

    @workflow.signal(name=SIGNAL_DEPLOYMENT_CHANGED)
    def deployment_changed(self, observed: DeploymentObserved) -> None:
        if self.observe(observed):
            self.seq += 1

    @workflow.query(name=QUERY_STATUS)
    def status(self) -> ServiceStatusView:
        namespace, name = identity(self.state.manifest)
        return ServiceStatusView(
            name=name,
            namespace=namespace,
            generation=self.state.generation,
            phase=self.phase(),
            paused=self.state.paused,
            pause=self.state.pause.value if self.state.pause is not None else None,
            deleting=self.state.deleting,
            transient_replicas=dict(self.state.transient),
            status=InferenceServiceStatus.model_validate(self.status_body()),
            deployments=dict(self.state.deployments),
            last_rejected_request=self.state.last_rejected,
        )

    @workflow.query(name=QUERY_APPLIED)
    def applied(self) -> AppliedView:
        state = self.state
        return AppliedView(
            generation=state.generation,
            object_generation=state.object_generation,
            digest=manifest_digest(state.manifest),
            deleting=state.deleting,
        )

    @workflow.query(name=QUERY_ROLLOUT_STATUS)
    def rollout_status(self) -> RolloutStatusView:
        return rollout_views.status_view(self.state, InferenceService.model_validate(self.state.manifest))

    @workflow.query(name=QUERY_EXPLAIN)
    def explain(self, component: str) -> ExplainView:
        isvc = InferenceService.model_validate(self.state.manifest)
        return rollout_views.explain_view(self.state, isvc, component, workflow.now())

    @workflow.query(name=QUERY_PREVIEW)
    def preview(self, manifest: dict[str, Any]) -> PreviewView:
        """What `apply` of `manifest` would run: refused as `apply` would refuse it, or the
        rollout plan it would open, computed by the same planning; nothing changes."""
        admitted = self._admit(manifest)
        if not admitted.allowed:
            return PreviewView(accepted=False, reasons=list(admitted.reasons), warnings=list(admitted.warnings))
        new = InferenceService.model_validate(manifest)
        current = InferenceService.model_validate(self.state.manifest) if self.state.admitted else None
        shown = rollout_views.preview_view(self.state, current, new, self.plans(new))
        return shown.model_copy(update={"warnings": list(admitted.warnings)})

    # --- main loop ------------------------------------------------------------------

    @workflow.run
    async def run(self, arg: dict[str, Any]) -> ServiceStatusView:
        started_at_size = history_budget.start_size()
        state = self.state
        self.waits.keep = workflow.patched(ISVC_KEPT_TIMER)
        if not state.observes_object and workflow.patched(OBSERVED_OBJECT_GENERATION):
            state.observes_object = True
        if not state.admitted:
            admitted = self._admit(state.manifest)
            if not admitted.allowed:
                raise admitted.error()
            state.admitted = True
            state.generation = max(state.generation, 1)
        _, name = identity(state.manifest)
        workflow.upsert_search_attributes(
            [
                search_attributes.INFERENCE_SERVICE.value_set(name),
                search_attributes.PHASE.value_set(self.phase()),
            ]
        )
        while True:
            seen = self.seq
            async with self.lock:
                finished = await self.reconcile()
            if finished:
                return self.status()
            handing_over = history_budget.hands_over(ISVC_HANDS_OVER_EARLY, started_at_size)
            if handing_over and (workflow.all_handlers_finished() or not workflow.patched(ISVC_SERVES_UNTIL_HANDED_OVER)):
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new({CONTINUED_STATE_KEY: state.model_dump(mode="json")})
            # A canary Update still waits for its run's answer, which only this loop forwards.
            await self.wait_for_news(seen, handing_over)

    def recheck_interval(self) -> timedelta:
        """How long to wait for news before re-reading: Deployments still converging are
        re-read with a back-off (15 s doubling to 5 minutes) in case a watcher signal was lost;
        a placement source re-lists the WorkloadClusters (`workflows.service.placement`)."""
        if self.state.placement is not None:
            return self.relist_interval()
        if self.deployments_converged():
            return IDLE_RECHECK if workflow.patched(ISVC_IDLE_RECHECK) else SAFETY_RECHECK
        step = DEPLOYMENT_RECHECK * int(2 ** min(self.state.deployment_rechecks, 5))
        return min(step, SAFETY_RECHECK)

    async def wait_for_news(self, seen: int, handing_over: bool = False) -> None:
        """Until news, or the re-check; while handing over, until the last handler is done too."""
        interval = self.recheck_interval()
        news = (lambda: self.seq != seen or workflow.all_handlers_finished()) if handing_over else (lambda: self.seq != seen)
        if await self.waits.wait_for_news(news, None, interval):
            self.recheck = True
            if interval < SAFETY_RECHECK:
                self.state.deployment_rechecks += 1

    async def reconcile(self) -> bool:
        state = self.state
        if state.pause_events:
            await record_pause_events(state, self.ref())
        isvc = InferenceService.model_validate(state.manifest)
        if placed_by_clusters(isvc) and state.home is None:
            return await self.reconcile_placement(isvc)
        if state.deleting:
            finished = await self.tear_down()
            if finished:
                await self.report_to_source(deleted=True)
            return finished
        await self.read_endpoint(isvc, again=self.recheck)
        if state.applied_generation != state.generation or state.runtime_missing:
            await self.write_object(isvc)
            await self.read_runtime(isvc)
            state.runtime_stale = False
            if state.runtime_missing is None:
                await self.write_components(isvc)
                state.applied_generation = state.generation
                state.observed_generation = state.object_generation
        elif state.runtime_stale:
            await self.refresh_runtime(isvc)
        recheck, self.recheck = self.recheck, False
        if state.runtime_missing is None:
            self.take_scale_requests(isvc)
            await self.keep_deployments(isvc, recheck)
            await self.steer_rollout(isvc)
            await self.configure_replicas(isvc)
            await self.pass_on_requests()
        await self.record_rejections()
        await self.finish_retired()
        await self.write_status()
        await self.report_to_source()
        return False

    async def reconcile_placement(self, isvc: InferenceService) -> bool:
        """The placement source's pass (`workflows.service.placement`)."""
        recheck, self.recheck = self.recheck, False
        if self.state.deleting:
            if not await self.tear_down_homes():
                return False
            await kube_calls.delete_object(
                DeleteObjectInput(ref=self.ref(), release_finalizer=ISVC_FINALIZER),
                summary=f"delete InferenceService {isvc.namespace}/{isvc.name}: every home drained and gone",
            )
            workflow.upsert_search_attributes([search_attributes.PHASE.value_set("Deleted")])
            return True
        await self.place(isvc, relist=recheck)
        await self.record_rejections()
        await self.write_status()
        return False
