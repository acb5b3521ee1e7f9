"""The Instance's PodGroup (gang scheduling, spec reference §9): make it, or find why not.

Workflow-side steps over `workflows.kube_calls`, used by `workflows/instance/operations.py`. A
multi-pod Instance's pods name a scheduler-plugins PodGroup of the Instance's name, so that
name must hold *our* PodGroup before they are created: one still terminating (a finalizer
holds an earlier one) is waited for, one of another owner is never adopted. The rules that
classify what holds the name live in `planning.instance.pods.pod_group_standing`.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from models.instance import InstanceFailure, InstanceSpec
    from models.kube_ops import ApplyObjectInput, DeleteObjectInput, ObjectRef, ReadObjectInput
    from planning.instance import rules as policy
    from planning.instance.pods import (
        POD_GROUP_API_VERSION,
        PodGroupStanding,
        describe_owner,
        pod_group_standing,
        render_pod_group,
    )
    from workflows import kube_calls


def pod_group_ref(spec: InstanceSpec) -> ObjectRef:
    return ObjectRef(
        api_version=POD_GROUP_API_VERSION,
        kind="PodGroup",
        name=spec.instance_name,
        namespace=spec.namespace,
        plural="podgroups",
    )


async def settle_pod_group(spec: InstanceSpec) -> PodGroupStanding | InstanceFailure:
    """Apply the Instance's PodGroup unless the name is held: OURS once it is in place.

    TERMINATING: a PodGroup of this name (ours from an earlier incarnation or Instance, or
    anyone's) is being deleted; the caller waits and asks again. Another owner's PodGroup
    gives the "PodGroup name taken" failure, naming it, the owner found and the fix. An
    `ActivityError` (the CRD went away, Forbidden) reaches the caller, which decides.
    """
    found = await kube_calls.read_object(
        ReadObjectInput(ref=pod_group_ref(spec)), summary=f"read PodGroup {spec.instance_name}"
    )
    existing = found.object if found.found else None
    standing = pod_group_standing(spec, existing)
    if standing == PodGroupStanding.TERMINATING:
        return standing
    if standing == PodGroupStanding.TAKEN and existing is not None:
        return InstanceFailure(
            reason=policy.POD_GROUP_NAME_TAKEN,
            message=policy.pod_group_taken_message(spec, describe_owner(existing)),
            time=workflow.now(),
        )
    group = render_pod_group(spec)
    if group is None:  # not a gang (single pod, or gang scheduling off): nothing to make
        return PodGroupStanding.ABSENT
    await kube_calls.apply_object(
        ApplyObjectInput(manifest=group, plural="podgroups"),
        summary=f"apply PodGroup {spec.instance_name} (minMember {spec.pod_count})",
    )
    return PodGroupStanding.OURS


async def delete_own_pod_group(spec: InstanceSpec) -> None:
    """Delete the Instance's PodGroup, never another owner's that holds the name."""
    ref = pod_group_ref(spec)
    found = await kube_calls.read_object(
        ReadObjectInput(ref=ref), summary=f"read PodGroup {spec.instance_name}"
    )
    existing = found.object if found.found else None
    if existing is None or pod_group_standing(spec, existing) != PodGroupStanding.OURS:
        return
    # The uid precondition spares a PodGroup someone made on the name since our read.
    uid = (existing.get("metadata") or {}).get("uid") or None
    await kube_calls.delete_object(
        DeleteObjectInput(ref=ref.model_copy(update={"uid": uid})),
        summary=f"delete PodGroup {spec.instance_name}",
    )
