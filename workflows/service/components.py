"""The InferenceService workflow's components: their objects and InferenceReplica children.

`ServiceComponents` sits between `workflows.service.projection.ServiceProjection` and
`workflows.service.workflow.InferenceServiceWorkflow`. Per component planned by
`planning.service.components` it keeps the objects `planning.service.objects` renders: an
`InferenceReplica` child workflow for OMENative (parent close policy ABANDON, steered by the
`configure`, `release_held`, `reset_instances` and `delete` signals), or a plain Deployment;
a Service; and for OMENative a PodDisruptionBudget. A component the spec drops drains its
Instances before its objects go; deletion drains every component first.

A Deployment is read right after each apply, kept at its count (a `scale` re-applies it),
and its observations (those reads, the watcher's `deployment_changed` signals, the
re-check reads) are kept newest by resourceVersion for `planning.service.deployment`.
`scale` requests are checked here (`planning.service.scale`) and `release_held` /
`reset_instances` passed on; a refused one is remembered for the `status` query and
recorded as a Warning Event on the InferenceService.

Imported by the workflow module inside `workflow.unsafe.imports_passed_through()`.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, WorkflowAlreadyStartedError

from models.inferenceservice import InferenceService
from models.kube_ops import (
    ApplyObjectInput,
    ApplyObjectResult,
    DeleteObjectInput,
    KubeErrorType,
    ObjectRef,
    ReadObjectInput,
)
from models.resolution import inference_replica_spec, multinode_message
from planning.objects import OME_API_VERSION, service_name
from planning.replica.budget import update_policy
from planning.replica.revisions import REVISION_HISTORY_ANNOTATION
from planning.replica.template import ClusterLifecycle
from planning.service.components import ComponentPlan, plan_components
from planning.service.deployment import DeploymentObserved, converged, newer, observe_deployment
from planning.service.objects import render_deployment, render_pdb, render_service
from planning.service.relay import ISVC_FINALIZER
from planning.service.scale import (
    REQUEST_REJECTED,
    SCALE_REJECTED,
    ScalableComponent,
    check_scale,
    forward_refusal,
)
from workflows import kube_calls, search_attributes
from workflows.events import record_event
from workflows.names import INFERENCE_REPLICA, irep_workflow_id, rollout_workflow_id
from workflows.parent import deliver
from workflows.replica.messages import SIGNAL_CONFIGURE, SIGNAL_DELETE, ReplicaConfig
from workflows.rollout.messages import SIGNAL_CLOSE
from workflows.service import canary_requests, rollouts
from workflows.service.messages import SIGNAL_SCALE, RejectedRequest, isvc_object
from workflows.service.projection import ServiceProjection, identity, runs_deployment

REFUSED_WRITES = (KubeErrorType.FORBIDDEN.value, KubeErrorType.INVALID.value)
"""An object write the API server refuses for good (e.g. its admission webhook denies it)."""


def _refusal(error: ActivityError) -> str:
    cause = error.cause
    text = cause.message if isinstance(cause, ApplicationError) else str(error)
    return f"the API server refused the InferenceService write; the workflow runs the spec it holds: {text}"[:1000]


def config_fingerprint(config: ReplicaConfig) -> str:
    """What was sent, to send nothing twice; a config outside a rollout run, or inside one
    before its group (or a stable revision, or a rollback) reached the InferenceReplica, has
    the same fingerprint as before, so a running service resends nothing. Cluster settings
    added later are left out while at their defaults, for the same reason."""
    coordination = config.coordination
    exclude: dict[str, Any] = {}
    defaults = ClusterLifecycle()
    cluster = {name for name in CLUSTER_ADDITIONS if getattr(config.cluster, name) == getattr(defaults, name)}
    if cluster:
        exclude["cluster"] = cluster
    if config.home is None:
        exclude["home"] = True
    if coordination is None:
        exclude["coordination"] = True
    else:
        unset = {name for name in COORDINATION_ADDITIONS if getattr(coordination, name) is None}
        if unset:
            exclude["coordination"] = unset
    return config.model_dump_json(exclude=exclude or None)


COORDINATION_ADDITIONS = ("group", "group_phase", "stable", "rollback_to")
"""Coordination fields added after runs existed: left out of the fingerprint while unset."""
CLUSTER_ADDITIONS = (
    "scale_up_pod_batch_size",
    "scale_down_pod_batch_size",
    "scale_down_requeue_interval_seconds",
    "auto_migrate_max_attempts",
    "pod_relist_seconds",
)
"""Cluster settings added after services ran (§14 pod batching, §13 automatic relocation):
left out of the fingerprint while at the chart's values, so a running service resends nothing."""


class ServiceComponents(ServiceProjection):
    """Writes the InferenceService's objects and steers its InferenceReplicas."""

    async def write_object(self, isvc: InferenceService) -> ApplyObjectResult:
        """Write the object: the spec is the user's, whichever way it came in. A manifest from
        the `temporal` CLI is written as `kubectl apply` would write it (spec replaced, the
        last-applied annotation kept); one relayed from the object is already there. Either
        way a spec someone wrote after the generation the workflow knows is never overwritten:
        that write is `superseded`, and the controller brings the newer spec as an `apply`."""
        state = self.state
        source = "kubectl" if state.spec_from_object else "temporal"
        manifest = isvc_object(state.manifest, isvc.namespace)
        if state.home is not None:
            # A member's copy: its source owns it, and nothing watches it to release a finalizer.
            manifest["metadata"].pop("finalizers")
        request = ApplyObjectInput(
            manifest=manifest,
            plural="inferenceservices",
            replace_spec=True,
            last_applied=not state.spec_from_object,
            expect_generation=state.object_generation or None,
        )
        summary = (
            f"write InferenceService {isvc.namespace}/{isvc.name} (generation {state.generation}, spec from {source})"
        )
        try:
            result = await kube_calls.apply_object(request, summary=summary)
        except ActivityError as error:
            if kube_calls.error_type(error) not in REFUSED_WRITES:
                raise
            # The API server (its admission webhook) refused the write: say so and go on with
            # the spec the workflow holds rather than fail the whole service.
            await record_event(self.ref(), "SpecWriteRefused", _refusal(error), "Warning")
            state.temporal_write_pending = False
            return ApplyObjectResult(ref=self.ref(), action="unchanged", generation=state.object_generation or None)
        state.temporal_write_pending = False
        state.isvc_uid = result.ref.uid or state.isvc_uid
        if result.action == "superseded":
            if source == "temporal":
                await self.note_superseded(result.generation or 0)
        elif result.generation is not None:
            state.object_generation = result.generation
        return result

    async def note_superseded(self, newer: int) -> None:
        """One Warning Event per newer object generation that stopped the write of a spec that
        came through the `temporal` CLI."""
        state = self.state
        if newer <= state.superseded_at:
            return
        state.superseded_at = newer
        await record_event(
            self.ref(),
            "SpecSuperseded",
            f"the spec applied through Temporal (workflow generation {state.generation}) was not written: "
            f"the object holds a newer spec (generation {newer}) written since, which the controller relays "
            "to this workflow in its turn",
            "Warning",
        )

    async def read_runtime(self, isvc: InferenceService) -> None:
        """The ServingRuntime of that name in the namespace, else the ClusterServingRuntime."""
        state = self.state
        state.runtime_missing = None
        if isvc.spec.runtime is None:
            state.runtime_spec = None
            return
        runtime = isvc.spec.runtime.name
        for kind, plural, namespace in (
            ("ServingRuntime", "servingruntimes", isvc.namespace),
            ("ClusterServingRuntime", "clusterservingruntimes", None),
        ):
            ref = ObjectRef(
                api_version=OME_API_VERSION, kind=kind, name=runtime, namespace=namespace, plural=plural
            )
            found = await kube_calls.read_object(ReadObjectInput(ref=ref), summary=f"read {kind} {runtime}")
            if found.found and found.object is not None:
                state.runtime_spec = found.object.get("spec") or {}
                return
        state.runtime_missing = (
            f"spec.runtime.name {runtime!r} names no ServingRuntime in namespace {isvc.namespace} and no "
            "ClusterServingRuntime; create the runtime and the InferenceService starts within 5 minutes"
        )

    async def refresh_runtime(self, isvc: InferenceService) -> None:
        """The controller said the runtime changed: read it again, and when what the service
        runs with changed, plan the components again (a new revision rolls as any change does)."""
        state = self.state
        before = (state.runtime_spec, state.runtime_missing)
        await self.read_runtime(isvc)
        state.runtime_stale = False
        if (state.runtime_spec, state.runtime_missing) != before and state.runtime_missing is None:
            await self.write_components(isvc)

    def plans(self, isvc: InferenceService) -> list[ComponentPlan]:
        return plan_components(isvc, self.runtime())

    async def write_components(self, isvc: InferenceService) -> None:
        state = self.state
        uid = state.isvc_uid
        plans = self.plans(isvc)
        running = {(plan.name, plan.mode) for plan in plans}
        for component, mode in list(state.modes.items()):
            if (component, mode) not in running:
                await self.retire(isvc, component, mode)
        for plan in plans:
            state.modes[plan.name] = plan.mode
            name = service_name(isvc.name, plan.name)
            if plan.mode == "MultiNode":
                workflow.logger.warning(multinode_message(plan.name))
                continue
            if plan.omenative:
                policy = update_policy(plan.effective.lifecycle, state.cluster.update_policy)
                pdb = render_pdb(plan, isvc.name, isvc.namespace, uid, policy)
                await kube_calls.apply_object(
                    ApplyObjectInput(manifest=pdb),
                    summary=f"apply PodDisruptionBudget {name} (maxUnavailable {pdb['spec']['maxUnavailable']})",
                )
            else:
                await self.write_deployment(isvc, plan)
            await kube_calls.apply_object(
                ApplyObjectInput(manifest=render_service(plan, isvc.name, isvc.namespace, uid)),
                summary=f"apply Service {name} (serving pods of {plan.name})",
            )
        components = ",".join(plan.name for plan in self.plans(isvc))
        workflow.upsert_search_attributes([search_attributes.COMPONENT.value_set(components)])

    # --- Deployment-mode components ------------------------------------------------------

    def deployment_plans(self, isvc: InferenceService) -> list[ComponentPlan]:
        return [plan for plan in self.plans(isvc) if runs_deployment(plan.mode)]

    def deployment_desired(self, plan: ComponentPlan) -> int:
        return self.state.transient.get(plan.name, plan.min_replicas)

    async def write_deployment(self, isvc: InferenceService, plan: ComponentPlan) -> None:
        """Apply the component's Deployment, then read it: its status starts from the truth."""
        replicas = self.deployment_desired(plan)
        name = service_name(isvc.name, plan.name)
        await kube_calls.apply_object(
            ApplyObjectInput(
                manifest=render_deployment(plan, isvc.name, isvc.namespace, self.state.isvc_uid, replicas)
            ),
            summary=f"apply Deployment {name} ({replicas} replica(s), revision {plan.revision_name})",
        )
        self.state.deployment_replicas[plan.name] = replicas
        await self.read_deployment(isvc, plan.name, "after apply")

    async def read_deployment(self, isvc: InferenceService, component: str, why: str) -> None:
        name = service_name(isvc.name, component)
        ref = ObjectRef(api_version="apps/v1", kind="Deployment", name=name, namespace=isvc.namespace)
        found = await kube_calls.read_object(
            ReadObjectInput(ref=ref), summary=f"read Deployment {name} status ({why})"
        )
        observed = observe_deployment(found.object) if found.found and found.object is not None else None
        if observed is None:
            observed = DeploymentObserved(
                namespace=isvc.namespace, isvc=isvc.name, component=component, exists=False
            )
        self.observe(observed)

    def observe(self, observed: DeploymentObserved) -> bool:
        """Keep a Deployment observation unless an older one; True when something changed."""
        state = self.state
        held = state.deployments.get(observed.component)
        if not runs_deployment(state.modes.get(observed.component)) or not newer(observed, held):
            return False
        state.deployments[observed.component] = observed
        if observed.same_state(held):
            return False
        state.deployment_rechecks = 0
        return True

    async def keep_deployments(self, isvc: InferenceService, recheck: bool) -> None:
        """Bring each Deployment to its count (a `scale`, or an apply ending one); on a
        re-check pass, read the Deployments in case a watcher signal was lost."""
        for plan in self.deployment_plans(isvc):
            if self.state.deployment_replicas.get(plan.name) != self.deployment_desired(plan):
                await self.write_deployment(isvc, plan)
            elif recheck:
                await self.read_deployment(isvc, plan.name, "re-check")

    def deployments_converged(self) -> bool:
        state = self.state
        return all(
            converged(state.deployment_replicas.get(component, 0), state.deployments.get(component))
            for component, mode in state.modes.items()
            if runs_deployment(mode)
        )

    # --- scale requests ---------------------------------------------------------------

    def take_scale_requests(self, isvc: InferenceService) -> None:
        """Apply the `scale` signals received since the last pass, or record why not."""
        state = self.state
        requests, state.scale_requests = state.scale_requests, []
        if not requests:
            return
        components: dict[str, ScalableComponent] = {
            plan.name: ScalableComponent(plan.mode, plan.min_replicas, plan.max_replicas)
            for plan in self.plans(isvc)
        }
        for request in requests:
            verdict = check_scale(request.component, request.replicas, components)
            if verdict.replicas is not None:
                state.transient[request.component] = verdict.replicas
                continue
            self.reject(SIGNAL_SCALE, request.model_dump(mode="json"), SCALE_REJECTED, verdict.message)

    def reject(self, signal: str, request: dict[str, Any], reason: str, message: str) -> None:
        """Remember a refused request for the `status` query and its Event for this pass."""
        workflow.logger.warning("%s", message)
        rejected = RejectedRequest(
            signal=signal, request=request, reason=reason, message=message, at=workflow.now()
        )
        self.state.last_rejected = rejected
        self.state.unrecorded_rejections.append(rejected)

    async def record_rejections(self) -> None:
        """A Warning Event per refused request, on the InferenceService (`kubectl describe`)."""
        state = self.state
        rejections, state.unrecorded_rejections = state.unrecorded_rejections, []
        for rejected in rejections:
            # A lost Event still leaves the refusal in the status query.
            await record_event(self.ref(), rejected.reason, rejected.message, "Warning", action=rejected.signal)

    # --- retiring components ------------------------------------------------------------

    async def retire(self, isvc: InferenceService, component: str, mode: str) -> None:
        """A component the spec dropped (or moved to another mode): its Instances drain first."""
        state = self.state
        del state.modes[component]
        state.deployments.pop(component, None)
        state.deployment_replicas.pop(component, None)
        if mode == "OMENative" and component in state.sent_configs:
            del state.sent_configs[component]
            state.retiring[component] = mode
            state.replicas.pop(component, None)
            handle = workflow.get_external_workflow_handle(
                irep_workflow_id(isvc.namespace, isvc.name, component, state.home)
            )
            await handle.signal(SIGNAL_DELETE)
            state.delete_sent.append(component)
            return
        await self.delete_objects(isvc.namespace, isvc.name, component, mode)

    async def finish_retired(self) -> None:
        """Remove the objects of retired components whose InferenceReplica has finished."""
        state = self.state
        namespace, name = identity(state.manifest)
        for component, mode in list(state.retiring.items()):
            report = state.replicas.get(component)
            if report is None or not report.deleted:
                continue
            # A component that now runs in another mode keeps its Service (same name, new pods).
            await self.delete_objects(namespace, name, component, mode, service=component not in state.modes)
            del state.retiring[component]
            del state.replicas[component]
            state.delete_sent.remove(component)

    async def delete_objects(
        self, namespace: str, name: str, component: str, mode: str, service: bool = True
    ) -> None:
        object_name = service_name(name, component)
        kinds = [("policy/v1", "PodDisruptionBudget")] if mode == "OMENative" else [("apps/v1", "Deployment")]
        if service:
            kinds.append(("v1", "Service"))
        for api_version, kind in kinds:
            ref = ObjectRef(api_version=api_version, kind=kind, name=object_name, namespace=namespace)
            await kube_calls.delete_object(DeleteObjectInput(ref=ref), summary=f"delete {kind} {object_name}")

    def replica_config(self, isvc: InferenceService, plan: ComponentPlan) -> ReplicaConfig:
        state = self.state
        rollout = isvc.spec.rollout
        annotations = isvc.metadata.annotations or {}
        return ReplicaConfig(
            namespace=isvc.namespace,
            isvc=isvc.name,
            isvc_uid=state.isvc_uid,
            component=plan.name,
            generation=state.generation,
            component_spec=plan.effective.model_dump(mode="json", exclude_none=True),
            ir_spec=inference_replica_spec(isvc, self.runtime(), plan.name),
            revision_hash=plan.revision_hash,
            revision_name=plan.revision_name,
            pairing_protocol=rollout.pairing_protocol
            if rollout is not None and plan.name != "router"
            else None,
            paused=state.paused,
            pause_mode=state.replica_pause_mode,
            transient_replicas=state.transient.get(plan.name),
            history_limit_annotation=annotations.get(REVISION_HISTORY_ANNOTATION),
            cluster=state.cluster,
            home=state.home,
            parent_workflow_id=workflow.info().workflow_id,
            coordination=rollouts.coordination(state.rollout, plan.name),
        )

    async def steer_rollout(self, isvc: InferenceService) -> None:
        """Open (or supersede) a rollout run when a change moves grouped components, and tell
        the active run what it has not heard yet (`workflows.service.rollouts`)."""
        plans = self.plans(isvc)
        change = rollouts.decide(self.state, isvc, plans)
        if change.open or change.supersede:
            await rollouts.open_run(self.state, isvc, plans, change)
        elif self.state.rollout.run is None:
            rollouts.at_rest(self.state, isvc)
        await rollouts.forward(self.state, isvc, plans)
        for refused in canary_requests.refuse_without_run(self.state):
            self.reject(refused.signal, refused.request, refused.reason, refused.message)

    async def configure_replicas(self, isvc: InferenceService) -> None:
        """Start each OMENative component's InferenceReplica, or send it its new configuration."""
        state = self.state
        for plan in self.plans(isvc):
            if not plan.omenative:
                continue
            config = self.replica_config(isvc, plan)
            fingerprint = config_fingerprint(config)
            if state.sent_configs.get(plan.name) == fingerprint:
                continue
            workflow_id = irep_workflow_id(isvc.namespace, isvc.name, plan.name, state.home)
            if plan.name not in state.sent_configs:
                try:
                    await workflow.start_child_workflow(
                        INFERENCE_REPLICA,
                        config,
                        id=workflow_id,
                        # Continue-as-new and the end of this run must not touch the Instances:
                        # deletion is an explicit `delete` signal that drains them first.
                        parent_close_policy=workflow.ParentClosePolicy.ABANDON,
                        static_summary=f"InferenceReplica {isvc.name}-{plan.name} ({plan.revision_name})",
                    )
                    state.sent_configs[plan.name] = fingerprint
                    continue
                except WorkflowAlreadyStartedError:
                    pass  # started by an earlier run: configure it like any running one
            await workflow.get_external_workflow_handle(workflow_id).signal(SIGNAL_CONFIGURE, config)
            state.sent_configs[plan.name] = fingerprint

    async def pass_on_requests(self) -> None:
        state = self.state
        namespace, name = identity(state.manifest)
        forwards, state.forwards = state.forwards, []
        for forward in forwards:
            signal, component = forward.signal, forward.component
            refusal = forward_refusal(signal, component, state.modes)
            if refusal is not None or component not in state.sent_configs:
                message = refusal or f"{signal} refused: component {component} has no InferenceReplica yet"
                self.reject(signal, {"component": component, "value": forward.value}, REQUEST_REJECTED, message)
                continue
            handle = workflow.get_external_workflow_handle(irep_workflow_id(namespace, name, component, state.home))
            await handle.signal(signal, forward.value)

    async def tear_down(self) -> bool:
        """Drain every Instance (their InferenceReplicas delete them), then remove the objects."""
        state = self.state
        namespace, name = identity(state.manifest)
        if state.rollout.run is not None:
            # A run still open (a rolled-back canary holds its components) ends with the service.
            await deliver(rollout_workflow_id(namespace, name, state.rollout.run, state.home), SIGNAL_CLOSE, None)
            state.rollout.run = None
        for component in state.sent_configs:
            if component not in state.delete_sent:
                handle = workflow.get_external_workflow_handle(irep_workflow_id(namespace, name, component, state.home))
                await handle.signal(SIGNAL_DELETE)
                state.delete_sent.append(component)
        draining = [c for c in state.delete_sent if not (c in state.replicas and state.replicas[c].deleted)]
        if draining:
            await self.write_status()
            return False
        for component, mode in {**state.retiring, **state.modes}.items():
            await self.delete_objects(namespace, name, component, mode)
        await kube_calls.delete_object(
            DeleteObjectInput(ref=self.ref(), release_finalizer=ISVC_FINALIZER),
            summary=f"delete InferenceService {namespace}/{name}: every Instance drained, its pods gone",
        )
        workflow.upsert_search_attributes([search_attributes.PHASE.value_set("Deleted")])
        return True
