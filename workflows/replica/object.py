"""The InferenceReplica object the workflow owns: its spec, its finalizer and deletion, its
Events, and the PodGroup CRD check gang scheduling depends on.

The spec is written only when its rendering changes (`state.written_spec`), or when the
finalizer re-check is due (`FINALIZER_RECHECK`): an apply puts back `ome.io/ir-teardown` if
someone patched it off. The status is `workflows.replica.projection`'s.

Imported by the workflow modules inside `workflow.unsafe.imports_passed_through()`.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError

from models.inferencereplica import InferenceReplicaSpec
from models.kube_ops import (
    ApplyObjectInput,
    CrdExistsInput,
    DeleteObjectInput,
    ObjectRef,
    PatchObjectInput,
    ReadObjectInput,
)
from planning.objects import OME_API_VERSION
from planning.replica.events import PlannedEvent
from planning.replica.manifest import render_inference_replica
from planning.replica.publish import digest
from planning.replica.teardown import TEARDOWN_FINALIZER
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


IR_TEARDOWN = "ir-teardown"
"""`workflow.patched` id: the object carries `ome.io/ir-teardown` and a deletion holds it until
the component's pods and PodGroups are gone; histories from before deleted it last."""
FINALIZER_RECHECK = timedelta(minutes=5)
"""How often an apply (a read while unchanged) makes sure the finalizer is still there."""
RELEASE_CALL = timedelta(seconds=30)
"""A finalizer release whose read went stale is read again on the next pass, not retried."""


def desired_spec(state: ReplicaState, desired: int) -> InferenceReplicaSpec:
    """The object's spec with `desired` Instances and the pause in force."""
    config = state.config
    return config.ir_spec.model_copy(
        update={
            "replicas": desired,
            "paused": config.paused,
            # Unpaused, the default `Recover` is written out: an apply merges, so a `Freeze`
            # left out would linger on the object after resume.
            "pause_mode": config.effective_pause_mode or "Recover",
        }
    )


async def write_spec(state: ReplicaState, desired: int, now: datetime | None = None) -> None:
    """Apply the object with `desired` replicas and the pause, unless that is what it has and
    (given `now`) the finalizer re-check is not due."""
    config = state.config
    spec = desired_spec(state, desired)
    manifest = render_inference_replica(spec, config.isvc, config.namespace, config.isvc_uid)
    finalizer = workflow.patched(IR_TEARDOWN)
    if finalizer:
        manifest["metadata"]["finalizers"] = [TEARDOWN_FINALIZER]
    fingerprint = digest(manifest)
    recheck = (
        finalizer
        and now is not None
        and (state.spec_applied_at is None or now >= state.spec_applied_at + FINALIZER_RECHECK)
    )
    if fingerprint == state.written_spec and state.ir_uid is not None and not recheck:
        return
    if finalizer:
        state.spec_applied_at = workflow.now()
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


async def delete_object(state: ReplicaState, why: str = "every Instance drained and deleted") -> None:
    """Delete the InferenceReplica object: with its finalizer, it stays Terminating until released."""
    await kube_calls.delete_object(
        DeleteObjectInput(ref=ir_ref(state)), summary=f"delete InferenceReplica {state.config.ir_name}: {why}"
    )


async def release_finalizer(state: ReplicaState, why: str) -> bool:
    """Remove `ome.io/ir-teardown` (and only it) from the object; False when a concurrent
    write made the read stale, so the next pass tries again."""
    ref = ir_ref(state)
    found = await kube_calls.read_object(
        ReadObjectInput(ref=ref), summary=f"read InferenceReplica {state.config.ir_name} to release its finalizer"
    )
    metadata = (found.object or {}).get("metadata") or {}
    finalizers = list(metadata.get("finalizers") or [])
    if not found.found or TEARDOWN_FINALIZER not in finalizers:
        return True
    try:
        await kube_calls.patch_object(
            PatchObjectInput(
                ref=ref,
                patch={"metadata": {"finalizers": [f for f in finalizers if f != TEARDOWN_FINALIZER] or None}},
                resource_version=str(metadata.get("resourceVersion") or "") or None,
                missing_ok=True,
            ),
            summary=f"release finalizer {TEARDOWN_FINALIZER} of {state.config.ir_name}: {why}",
            schedule_to_close=RELEASE_CALL,
        )
    except ActivityError:
        return False
    return True


async def record(state: ReplicaState, event: PlannedEvent) -> None:
    """Record `event` on the InferenceReplica, or on its InferenceService when it says so."""
    config = state.config
    involved = ir_ref(state)
    if event.on_isvc:
        involved = isvc_ref(config.isvc, config.namespace, config.isvc_uid)
    await record_event(involved, event.reason, event.message, event.type)
