"""The InferenceReplica object the workflow owns: its spec, its deletion, its Events, and the
PodGroup CRD check gang scheduling depends on.

The spec is written only when its rendering changes (`state.written_spec`); the status is
`workflows.replica.projection`'s.

Imported by the workflow modules inside `workflow.unsafe.imports_passed_through()`.
"""

from __future__ import annotations

from models.kube_ops import ApplyObjectInput, CrdExistsInput, DeleteObjectInput, ObjectRef
from planning.objects import OME_API_VERSION
from planning.replica.events import PlannedEvent
from planning.replica.manifest import render_inference_replica
from planning.replica.publish import digest
from workflows import kube_calls
from workflows.events import isvc_ref, record_event
from workflows.replica.messages import ReplicaState


def ir_ref(state: ReplicaState) -> ObjectRef:
    """The InferenceReplica object (with its uid once written)."""
    config = state.config
    return ObjectRef(
        api_version=OME_API_VERSION,
        kind="InferenceReplica",
        name=config.ir_name,
        namespace=config.namespace,
        plural="inferencereplicas",
        uid=state.ir_uid,
    )


async def write_spec(state: ReplicaState, desired: int) -> None:
    """Apply the object with `desired` replicas and the pause, unless that is what it has."""
    config = state.config
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


async def check_gang_scheduling(state: ReplicaState) -> None:
    """Learn once whether the PodGroup CRD is installed, for a multi-pod component."""
    if state.podgroup_crd is None and state.config.effective.is_multi_pod:
        found = await kube_calls.crd_exists(CrdExistsInput(), summary="check the PodGroup CRD for gang scheduling")
        state.podgroup_crd = found.exists


async def delete_object(state: ReplicaState) -> None:
    """Delete the InferenceReplica object: the last act of a deletion."""
    await kube_calls.delete_object(
        DeleteObjectInput(ref=ir_ref(state)),
        summary=f"delete InferenceReplica {state.config.ir_name}: every Instance drained and deleted",
    )


async def record(state: ReplicaState, event: PlannedEvent) -> None:
    """Record `event` on the InferenceReplica, or on its InferenceService when it says so."""
    config = state.config
    involved = ir_ref(state)
    if event.on_isvc:
        involved = isvc_ref(config.isvc, config.namespace, config.isvc_uid)
    await record_event(involved, event.reason, event.message, event.type)
