"""The `InferenceService` workflow: one InferenceService from its first apply to its deletion.

`isvc/{ns}/{name}`. The spec enters through the `apply` update (update-with-start): its
validator runs admission (`models.admission.admit`), so a refused manifest is answered with
its reason codes and leaves nothing in history; an accepted change bumps the generation. A
workflow started directly with a manifest as its input runs the same admission first and
fails at once, non-retryably (`AdmissionDenied`), having created nothing.

Each pass: write the InferenceService object (so owner references have a real owner), read
its runtime, plan its components (`planning.service_components`: effective spec, mode,
revision), then per component keep its objects (`planning.service_objects`): an
`InferenceReplica` child workflow for OMENative (parent close policy ABANDON, steered by
signals), or a plain Deployment; a Service; and for OMENative a PodDisruptionBudget. The
InferenceReplicas report with `replica_changed`; their totals and conditions go into
`status.components.<c>.lifecycle` and the `<Component>Ready` conditions
(`planning.service_status`).

Signals: `pause`, `resume`, `scale`, `release_held`, `reset_instances`, `delete`. Query `status`.
"""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError

with workflow.unsafe.imports_passed_through():
    from models.admission import admit
    from models.inferencereplica import Condition
    from models.inferenceservice import InferenceService
    from models.isvc_status import InferenceServiceStatus
    from models.kube_ops import (
        ApplyObjectInput,
        DeleteObjectInput,
        ObjectRef,
        PatchStatusInput,
        ReadObjectInput,
    )
    from models.resolution import inference_replica_spec
    from models.runtime import ServingRuntimeSpec
    from planning.replica_budget import update_policy
    from planning.replica_conditions import PlannedCondition
    from planning.replica_revisions import REVISION_HISTORY_ANNOTATION
    from planning.replica_scale import ScaleRequestError, validate_scale_request
    from planning.replica_template import ClusterLifecycle
    from planning.service_components import ComponentPlan, multinode_message, plan_components
    from planning.service_objects import render_deployment, render_pdb, render_service, service_name
    from planning.service_status import ComponentReport, isvc_status, lifecycle_status
    from workflows import kube_calls, search_attributes
    from workflows.names import INFERENCE_REPLICA, INFERENCE_SERVICE, irep_workflow_id, isvc_workflow_id
    from workflows.service_calls import (
        ADMISSION_DENIED,
        API_VERSION,
        CONTINUED_STATE_KEY,
        QUERY_STATUS,
        SIGNAL_CONFIGURE,
        SIGNAL_DELETE,
        SIGNAL_PAUSE,
        SIGNAL_RELEASE_HELD,
        SIGNAL_REPLICA_CHANGED,
        SIGNAL_RESET_INSTANCES,
        SIGNAL_RESUME,
        SIGNAL_SCALE,
        UPDATE_APPLY,
        ApplyResult,
        ReleaseHeldRequest,
        ReplicaConfig,
        ReplicaReport,
        ResetInstancesRequest,
        ScaleRequest,
        ServiceState,
        ServiceStatusView,
        isvc_object,
    )

SAFETY_RECHECK = timedelta(minutes=5)
"""Every change arrives as a message; the timer only re-reads a runtime that was missing."""


def _identity(manifest: dict[str, Any]) -> tuple[str, str]:
    metadata = manifest.get("metadata") or {}
    return str(metadata.get("namespace") or "default"), str(metadata.get("name") or "")


def _same_spec(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two manifests ask for the same thing (status and server-set fields aside)."""

    def essence(manifest: dict[str, Any]) -> str:
        metadata = manifest.get("metadata") or {}
        return json.dumps(
            [manifest.get("spec"), metadata.get("labels"), metadata.get("annotations")], sort_keys=True
        )

    return essence(a) == essence(b)


def admission_error(summary: str, reasons: list[str]) -> ApplicationError:
    return ApplicationError(
        f"InferenceService refused by admission:\n{summary}"[:4000],
        reasons,
        type=ADMISSION_DENIED,
        non_retryable=True,
    )


@workflow.defn(name=INFERENCE_SERVICE)
class InferenceServiceWorkflow:
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
            self.state = ServiceState(manifest=manifest, cluster=cluster)
        self.lock = asyncio.Lock()
        self.seq = 0

    # --- the spec -------------------------------------------------------------------

    def _admit(self, manifest: dict[str, Any]) -> tuple[bool, str, list[str], list[str]]:
        """(allowed, summary, denial reasons, warnings) for `manifest` replacing the current one."""
        state = self.state
        old = state.manifest if state.admitted else None
        runtime = ServingRuntimeSpec.model_validate(state.runtime_spec) if state.runtime_spec else None
        admission = admit(manifest, old, runtime)
        warnings = [finding.message for finding in admission.warnings]
        expected = workflow.info().workflow_id
        namespace, name = _identity(manifest)
        if admission.allowed and isvc_workflow_id(namespace, name) != expected:
            message = (
                f'metadata.namespace/name "{namespace}/{name}" does not belong to workflow {expected}; '
                f"apply it to workflow {isvc_workflow_id(namespace, name)} (FieldValueInvalid)"
            )
            return False, message, ["FieldValueInvalid"], warnings
        return admission.allowed, admission.summary(), admission.reasons, warnings

    @workflow.update(name=UPDATE_APPLY)
    async def apply(self, manifest: dict[str, Any]) -> ApplyResult:
        async with self.lock:
            state = self.state
            _, _, _, warnings = self._admit(manifest)
            changed = not state.admitted or not _same_spec(manifest, state.manifest)
            if state.transient:
                # A transient scale lasts until the next apply sets the count again.
                state.transient = {}
                self.seq += 1
            if changed:
                state.manifest = manifest
                state.admitted = True
                state.generation += 1
                self.seq += 1
            return ApplyResult(accepted=True, generation=state.generation, changed=changed, warnings=warnings)

    @apply.validator
    def validate_apply(self, manifest: dict[str, Any]) -> None:
        if self.state.deleting:
            raise ApplicationError(
                "the InferenceService is being deleted; apply again once its workflow has completed",
                type=ADMISSION_DENIED,
            )
        allowed, summary, reasons, _ = self._admit(manifest)
        if not allowed:
            raise admission_error(summary, reasons)

    # --- user signals ---------------------------------------------------------------

    @workflow.signal(name=SIGNAL_PAUSE)
    def pause(self) -> None:
        self.state.paused = True
        self.seq += 1

    @workflow.signal(name=SIGNAL_RESUME)
    def resume(self) -> None:
        self.state.paused = False
        self.seq += 1

    @workflow.signal(name=SIGNAL_SCALE)
    def scale(self, request: ScaleRequest) -> None:
        try:
            self.state.transient[request.component] = validate_scale_request(request.replicas)
        except ScaleRequestError as error:
            workflow.logger.warning("scale ignored: %s", error)
            return
        self.seq += 1

    @workflow.signal(name=SIGNAL_RELEASE_HELD)
    def release_held(self, request: ReleaseHeldRequest) -> None:
        self.state.forwards.append((request.component, SIGNAL_RELEASE_HELD, {"value": request.revision}))
        self.seq += 1

    @workflow.signal(name=SIGNAL_RESET_INSTANCES)
    def reset_instances(self, request: ResetInstancesRequest) -> None:
        self.state.forwards.append((request.component, SIGNAL_RESET_INSTANCES, {"value": request.instances}))
        self.seq += 1

    @workflow.signal(name=SIGNAL_DELETE)
    def delete(self) -> None:
        self.state.deleting = True
        self.seq += 1

    @workflow.signal(name=SIGNAL_REPLICA_CHANGED)
    def replica_changed(self, report: ReplicaReport) -> None:
        self.state.replicas[report.component] = report
        self.seq += 1

    @workflow.query(name=QUERY_STATUS)
    def status(self) -> ServiceStatusView:
        namespace, name = _identity(self.state.manifest)
        return ServiceStatusView(
            name=name,
            namespace=namespace,
            generation=self.state.generation,
            phase=self.phase(),
            paused=self.state.paused,
            deleting=self.state.deleting,
            transient_replicas=dict(self.state.transient),
            status=InferenceServiceStatus.model_validate(self.status_body()),
        )

    # --- main loop ------------------------------------------------------------------

    @workflow.run
    async def run(self, arg: dict[str, Any]) -> ServiceStatusView:
        state = self.state
        if not state.admitted:
            allowed, summary, reasons, _ = self._admit(state.manifest)
            if not allowed:
                raise admission_error(summary, reasons)
            state.admitted = True
            state.generation = max(state.generation, 1)
        _, name = _identity(state.manifest)
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
            if workflow.info().is_continue_as_new_suggested():
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new({CONTINUED_STATE_KEY: state.model_dump(mode="json")})
            await self.wait_for_news(seen)

    async def wait_for_news(self, seen: int) -> None:
        try:
            await workflow.wait_condition(lambda: self.seq != seen, timeout=SAFETY_RECHECK)
        except TimeoutError:
            pass

    def phase(self) -> str:
        """One word for the UI's `OmePhase` column and the `status` query."""
        state = self.state
        if state.deleting:
            return "Deleting"
        if state.paused:
            return "Paused"
        reports = [report for report in state.replicas.values() if not report.deleted]
        if any(report.phase == "Failed" for report in reports):
            return "Failed"
        if any(report.phase == "Updating" for report in reports):
            return "Updating"
        ready = next((c for c in state.conditions if c.type == "Ready"), None)
        if ready is not None and ready.status == "True":
            return "Ready"
        return "Creating" if state.applied_generation == 0 or not reports else "Progressing"

    async def reconcile(self) -> bool:
        state = self.state
        if state.deleting:
            return await self.tear_down()
        isvc = InferenceService.model_validate(state.manifest)
        if state.applied_generation != state.generation or state.runtime_missing:
            await self.write_object(isvc)
            await self.read_runtime(isvc)
            if state.runtime_missing is None:
                await self.write_components(isvc)
                state.applied_generation = state.generation
        if state.runtime_missing is None:
            await self.configure_replicas(isvc)
            await self.pass_on_requests()
        await self.finish_retired()
        await self.write_status()
        return False

    # --- acting on the cluster ------------------------------------------------------

    def ref(self) -> ObjectRef:
        namespace, name = _identity(self.state.manifest)
        return ObjectRef(
            api_version=API_VERSION,
            kind="InferenceService",
            name=name,
            namespace=namespace,
            plural="inferenceservices",
            uid=self.state.isvc_uid,
        )

    async def write_object(self, isvc: InferenceService) -> None:
        result = await kube_calls.apply_object(
            ApplyObjectInput(
                manifest=isvc_object(self.state.manifest, isvc.namespace), plural="inferenceservices"
            ),
            summary=f"write InferenceService {isvc.namespace}/{isvc.name} (generation {self.state.generation})",
        )
        self.state.isvc_uid = result.ref.uid or self.state.isvc_uid

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
                api_version=API_VERSION, kind=kind, name=runtime, namespace=namespace, plural=plural
            )
            found = await kube_calls.read_object(ReadObjectInput(ref=ref), summary=f"read {kind} {runtime}")
            if found.found and found.object is not None:
                state.runtime_spec = found.object.get("spec") or {}
                return
        state.runtime_missing = (
            f"spec.runtime.name {runtime!r} names no ServingRuntime in namespace {isvc.namespace} and no "
            "ClusterServingRuntime; create the runtime and the InferenceService starts within 5 minutes"
        )

    def runtime(self) -> ServingRuntimeSpec | None:
        spec = self.state.runtime_spec
        return ServingRuntimeSpec.model_validate(spec) if spec is not None else None

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
                replicas = state.transient.get(plan.name, plan.min_replicas)
                await kube_calls.apply_object(
                    ApplyObjectInput(
                        manifest=render_deployment(plan, isvc.name, isvc.namespace, uid, replicas)
                    ),
                    summary=f"apply Deployment {name} ({replicas} replica(s), revision {plan.revision_name})",
                )
            await kube_calls.apply_object(
                ApplyObjectInput(manifest=render_service(plan, isvc.name, isvc.namespace, uid)),
                summary=f"apply Service {name} (serving pods of {plan.name})",
            )
        components = ",".join(plan.name for plan in self.plans(isvc))
        workflow.upsert_search_attributes([search_attributes.COMPONENT.value_set(components)])

    async def retire(self, isvc: InferenceService, component: str, mode: str) -> None:
        """A component the spec dropped (or moved to another mode): its Instances drain first."""
        state = self.state
        del state.modes[component]
        if mode == "OMENative" and component in state.sent_configs:
            del state.sent_configs[component]
            state.retiring[component] = mode
            state.replicas.pop(component, None)
            handle = workflow.get_external_workflow_handle(
                irep_workflow_id(isvc.namespace, isvc.name, component)
            )
            await handle.signal(SIGNAL_DELETE)
            state.delete_sent.append(component)
            return
        await self.delete_objects(isvc.namespace, isvc.name, component, mode)

    async def finish_retired(self) -> None:
        """Remove the objects of retired components whose InferenceReplica has finished."""
        state = self.state
        namespace, name = _identity(state.manifest)
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
            transient_replicas=state.transient.get(plan.name),
            history_limit_annotation=annotations.get(REVISION_HISTORY_ANNOTATION),
            cluster=state.cluster,
            parent_workflow_id=workflow.info().workflow_id,
        )

    async def configure_replicas(self, isvc: InferenceService) -> None:
        """Start each OMENative component's InferenceReplica, or send it its new configuration."""
        state = self.state
        for plan in self.plans(isvc):
            if not plan.omenative:
                continue
            config = self.replica_config(isvc, plan)
            fingerprint = config.model_dump_json()
            if state.sent_configs.get(plan.name) == fingerprint:
                continue
            workflow_id = irep_workflow_id(isvc.namespace, isvc.name, plan.name)
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
        namespace, name = _identity(state.manifest)
        forwards, state.forwards = state.forwards, []
        for component, signal, payload in forwards:
            if component not in state.sent_configs:
                workflow.logger.warning(
                    "%s ignored: component %r does not run on OMENative", signal, component
                )
                continue
            handle = workflow.get_external_workflow_handle(irep_workflow_id(namespace, name, component))
            await handle.signal(signal, payload["value"])

    async def tear_down(self) -> bool:
        """Drain every Instance (their InferenceReplicas delete them), then remove the objects."""
        state = self.state
        namespace, name = _identity(state.manifest)
        for component in state.sent_configs:
            if component not in state.delete_sent:
                handle = workflow.get_external_workflow_handle(irep_workflow_id(namespace, name, component))
                await handle.signal(SIGNAL_DELETE)
                state.delete_sent.append(component)
        draining = [c for c in state.delete_sent if not (c in state.replicas and state.replicas[c].deleted)]
        if draining:
            await self.write_status()
            return False
        for component, mode in {**state.retiring, **state.modes}.items():
            await self.delete_objects(namespace, name, component, mode)
        await kube_calls.delete_object(
            DeleteObjectInput(ref=self.ref()),
            summary=f"delete InferenceService {namespace}/{name}: every Instance drained, its pods gone",
        )
        workflow.upsert_search_attributes([search_attributes.PHASE.value_set("Deleted")])
        return True

    # --- status ---------------------------------------------------------------------

    def status_body(self) -> dict[str, Any]:
        state = self.state
        reports: list[ComponentReport] = []
        for component, report in sorted(state.replicas.items()):
            if report.deleted or component in state.retiring:
                continue
            condition = report.condition
            reports.append(
                ComponentReport(
                    name=component,
                    condition=PlannedCondition(
                        condition.type, condition.status, condition.reason, condition.message
                    ),
                    lifecycle=lifecycle_status(report.status),
                )
            )
        blocking = None
        if state.runtime_missing is not None:
            blocking = PlannedCondition("RuntimeResolved", "False", "RuntimeNotFound", state.runtime_missing)
        waiting = [c for c in state.sent_configs if c not in state.replicas]
        if blocking is None and waiting:
            blocking = PlannedCondition(
                "ComponentsReporting",
                "False",
                "ComponentsStarting",
                f"waiting for the first report of {', '.join(waiting)}",
            )
        body = isvc_status(
            state.applied_generation or None, reports, state.conditions, workflow.now(), blocking
        )
        for component, mode in state.modes.items():
            body["components"].setdefault(component, {})["deploymentMode"] = mode
        return body

    async def write_status(self) -> None:
        state = self.state
        body = self.status_body()
        state.conditions = [Condition.model_validate(c) for c in body["conditions"]]
        fingerprint = json.dumps(body, sort_keys=True)
        if fingerprint == state.written_status:
            return
        state.written_status = fingerprint
        ready = next((c for c in state.conditions if c.type == "Ready"), None)
        phase = self.phase()
        workflow.upsert_search_attributes([search_attributes.PHASE.value_set(phase)])
        await kube_calls.patch_status(
            PatchStatusInput(ref=self.ref(), status=body, missing_ok=True),
            summary=f"status: {phase}, Ready={ready.status if ready else 'Unknown'} "
            f"({ready.reason if ready else 'no report yet'})",
        )
