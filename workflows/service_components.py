"""The InferenceService workflow's components: their objects and InferenceReplica children.

`ServiceComponents` sits between `workflows.service_projection.ServiceProjection` and
`workflows.inference_service.InferenceServiceWorkflow`. Per component planned by
`planning.service_components` it keeps the objects `planning.service_objects` renders: an
`InferenceReplica` child workflow for OMENative (parent close policy ABANDON, steered by the
`configure`, `release_held`, `reset_instances` and `delete` signals), or a plain Deployment;
a Service; and for OMENative a PodDisruptionBudget. A component the spec drops drains its
Instances before its objects go; deletion drains every component first.

Imported by the workflow module inside `workflow.unsafe.imports_passed_through()`.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import WorkflowAlreadyStartedError

from models.inferenceservice import InferenceService
from models.kube_ops import ApplyObjectInput, DeleteObjectInput, ObjectRef, ReadObjectInput
from models.resolution import inference_replica_spec
from planning.replica_budget import update_policy
from planning.replica_revisions import REVISION_HISTORY_ANNOTATION
from planning.service_components import ComponentPlan, multinode_message, plan_components
from planning.service_objects import render_deployment, render_pdb, render_service, service_name
from workflows import kube_calls, search_attributes
from workflows.names import INFERENCE_REPLICA, irep_workflow_id
from workflows.service_calls import API_VERSION, SIGNAL_CONFIGURE, SIGNAL_DELETE, ReplicaConfig, isvc_object
from workflows.service_projection import ServiceProjection, identity


class ServiceComponents(ServiceProjection):
    """Writes the InferenceService's objects and steers its InferenceReplicas."""

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
        namespace, name = identity(state.manifest)
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
        namespace, name = identity(state.manifest)
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
