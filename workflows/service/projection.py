"""The InferenceService workflow's projection: its object reference, phase and status.

`ServiceProjection` is the base of `workflows.service.workflow.InferenceServiceWorkflow`.
It turns the carried `ServiceState` (the InferenceReplicas' reports, the Deployment-mode
components' Deployments as last observed, the runtime lookup, the components' modes) into
`status` (`planning.service.status`), the one-word phase shown in the UI and the `status`
query, and writes the status subresource when it changed. A Deployment-mode component's
`<Component>Ready` comes from its Deployment's status (`planning.service.deployment`) and
counts toward `Ready` exactly as an InferenceReplica's does.

Imported by the workflow module inside `workflow.unsafe.imports_passed_through()`.
"""

from __future__ import annotations

import json
from typing import Any

from temporalio import workflow

from models.inferencereplica import Condition
from models.inferenceservice import InferenceService
from models.kube_ops import ObjectRef, PatchStatusInput
from models.runtime import ServingRuntimeSpec
from planning.replica.conditions import PlannedCondition
from planning.service.deployment import DeploymentObserved, rolling_out
from planning.service.rollout import conditions as rollout_conditions
from planning.service.rollout import rollout_status
from planning.service.status import (
    DELETING,
    ComponentReport,
    deployment_component_report,
    isvc_status,
    lifecycle_status,
    merge_patch,
    multinode_component_report,
)
from workflows import kube_calls, search_attributes
from workflows.events import isvc_ref
from workflows.service import rollouts
from workflows.service.messages import ServiceState


def runs_deployment(mode: str | None) -> bool:
    """Whether a component in `mode` runs as a plain Deployment (RawDeployment and the like:
    anything that is neither an InferenceReplica nor the MultiNode mode left alone)."""
    return mode is not None and mode not in ("OMENative", "MultiNode")


def identity(manifest: dict[str, Any]) -> tuple[str, str]:
    """(namespace, name) of an InferenceService manifest; the namespace defaults as kubectl's."""
    metadata = manifest.get("metadata") or {}
    return str(metadata.get("namespace") or "default"), str(metadata.get("name") or "")


MULTINODE_SHOWN = "isvc-multinode-shown"
"""`workflow.patched` id: a component pinned to MultiNode is named in `Ready` and
`<Component>Ready` (`MultiNodeNotSupported`, with the fix). Runs from before left it out, and
their `Ready` read "the InferenceService declares no component"."""


class ServiceProjection:
    """Phase and status over `self.state`; the workflow subclass owns the messages."""

    state: ServiceState

    def ref(self) -> ObjectRef:
        namespace, name = identity(self.state.manifest)
        return isvc_ref(name, namespace, self.state.isvc_uid)

    def runtime(self) -> ServingRuntimeSpec | None:
        spec = self.state.runtime_spec
        return ServingRuntimeSpec.model_validate(spec) if spec is not None else None

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
        deployments = self.deployment_targets()
        if any(report.phase == "Updating" for report in reports) or any(
            rolling_out(desired, observed) for _, desired, observed in deployments
        ):
            return "Updating"
        ready = next((c for c in state.conditions if c.type == "Ready"), None)
        if ready is not None and ready.status == "True":
            return "Ready"
        return "Creating" if state.applied_generation == 0 or not (reports or deployments) else "Progressing"

    def deployment_targets(self) -> list[tuple[str, int, DeploymentObserved | None]]:
        """(component, replicas written, latest observation) of each Deployment-mode component."""
        state = self.state
        return [
            (component, state.deployment_replicas[component], state.deployments.get(component))
            for component, mode in sorted(state.modes.items())
            if runs_deployment(mode) and component in state.deployment_replicas
        ]

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
        for component, desired, observed in self.deployment_targets():
            reports.append(deployment_component_report(component, desired, observed))
        for component, mode in state.modes.items():
            if state.multinode_shown and mode == "MultiNode" and component not in state.retiring:
                reports.append(multinode_component_report(component))
        # One order whatever runs each component, so conditions don't move between passes.
        reports.sort(key=lambda report: report.name)
        blocking = DELETING if state.deleting else None
        if blocking is None and state.runtime_missing is not None:
            blocking = PlannedCondition("RuntimeResolved", "False", "RuntimeNotFound", state.runtime_missing)
        waiting = [c for c in state.sent_configs if c not in state.replicas]
        if blocking is None and waiting:
            blocking = PlannedCondition(
                "ComponentsReporting",
                "False",
                "ComponentsStarting",
                f"waiting for the first report of {', '.join(waiting)}",
            )
        isvc = InferenceService.model_validate(state.manifest)
        grouped = bool(isvc.spec.rollout and isvc.spec.rollout.groups)
        run = rollouts.run_seen(state.rollout)
        extra = rollout_conditions(run, isvc.spec.rollout) if grouped or run is not None else []
        # observedGeneration is the object's generation, as Kubernetes means it, once known.
        observed = (state.observed_generation if state.observes_object else 0) or state.applied_generation or None
        body = isvc_status(observed, reports, state.conditions, workflow.now(), blocking, extra)
        for component, mode in state.modes.items():
            body["components"].setdefault(component, {})["deploymentMode"] = mode
        shown = rollout_status(run)
        if shown is not None:
            body["rollout"] = shown
        report = state.rollout.report
        for component, canary in (report.canary if report is not None else {}).items():
            # A canary group's primary: rolloutPhase, canary and traffic (spec reference §1.5-§2.6).
            body["components"].setdefault(component, {}).update(canary)
        return body

    async def write_status(self) -> None:
        state = self.state
        if not state.multinode_shown and "MultiNode" in state.modes.values():
            state.multinode_shown = workflow.patched(MULTINODE_SHOWN)
        body = self.status_body()
        state.conditions = [Condition.model_validate(c) for c in body["conditions"]]
        fingerprint = json.dumps(body, sort_keys=True)
        if fingerprint == state.written_status:
            return
        # A merge patch keeps what it does not name: what this body no longer shows goes as null.
        patch = merge_patch(json.loads(state.written_status) if state.written_status else None, body)
        state.written_status = fingerprint
        ready = next((c for c in state.conditions if c.type == "Ready"), None)
        phase = self.phase()
        workflow.upsert_search_attributes([search_attributes.PHASE.value_set(phase)])
        await kube_calls.patch_status(
            PatchStatusInput(ref=self.ref(), status=patch, missing_ok=True),
            summary=f"status: {phase}, Ready={ready.status if ready else 'Unknown'} "
            f"({ready.reason if ready else 'no report yet'})",
        )
