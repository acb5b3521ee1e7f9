"""Kubernetes Events of an InferenceReplica, with the spec's reasons and message formats.

Formats are verbatim from the spec reference (§9, §11, §12, §15). Where OME names the
annotation that carried a request, the message keeps that wording, so operators who know
OME's messages recognise them; the request itself arrives here as a Temporal signal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from models.instance import RetryBlock
from planning.replica.reset import ResetOutcome, ResetRequestError

EventType = Literal["Normal", "Warning"]


@dataclass(frozen=True)
class PlannedEvent:
    """An Event to record on an object (the InferenceReplica unless `on_isvc`)."""

    type: EventType
    reason: str
    message: str
    on_isvc: bool = False


def _subject(namespace: str, ir_name: str, component: str) -> str:
    return f"InferenceReplica {namespace}/{ir_name} component={component}"


def retry_held(namespace: str, ir_name: str, component: str, block: RetryBlock) -> PlannedEvent:
    """§11 `RetryHeld`, raised when the last allowed attempt fails."""
    message = (
        f"{_subject(namespace, ir_name, component)} update to revision {block.target_revision} held after "
        f"{block.attempts_started} failed attempt(s) (last failure: {block.reason}); publish a corrected "
        "revision or raise lifecycle.updateRetry limits"
    )
    return PlannedEvent("Warning", "RetryHeld", message, on_isvc=True)


def retry_block_released(namespace: str, ir_name: str, component: str, revision: str) -> PlannedEvent:
    message = (
        f"{_subject(namespace, ir_name, component)}: Held retryBlock for revision {revision} removed at "
        "operator request (ome.io/release-held-revision annotation)"
    )
    return PlannedEvent("Normal", "RetryBlockReleased", message)


def retry_block_release_skipped_no_block(
    namespace: str, ir_name: str, component: str, requested: str
) -> PlannedEvent:
    message = (
        f'{_subject(namespace, ir_name, component)}: release requested for revision "{requested}" but no '
        "retryBlock exists for it; nothing to release"
    )
    return PlannedEvent("Normal", "RetryBlockReleaseSkipped", message)


def retry_block_release_skipped_not_held(
    namespace: str, ir_name: str, component: str, block: RetryBlock
) -> PlannedEvent:
    message = (
        f"{_subject(namespace, ir_name, component)}: retryBlock for revision {block.target_revision} is "
        f"{block.state.value}, not Held; nothing to release"
    )
    return PlannedEvent("Normal", "RetryBlockReleaseSkipped", message)


def _indexes(indexes: Sequence[int]) -> str:
    return ",".join(str(index) for index in indexes)


def reset_events(namespace: str, ir_name: str, component: str, outcome: ResetOutcome) -> list[PlannedEvent]:
    """§12 `InstancesReset` and `InstancesResetSkipped` for one answered request."""
    subject = _subject(namespace, ir_name, component)
    events: list[PlannedEvent] = []
    if outcome.none_failed:
        return [
            PlannedEvent("Normal", "InstancesResetSkipped", f"{subject}: none is Failed; nothing to reset")
        ]
    if outcome.reset:
        events.append(
            PlannedEvent(
                "Normal",
                "InstancesReset",
                f"{subject}: reset instance(s) {_indexes(outcome.reset)} at operator request "
                "(ome.io/reset-instances annotation): pods deleted and preserved operation cleared; "
                "the lifecycle passes rebuild them",
            )
        )
    if outcome.skipped:
        listed = ", ".join(f"{index} ({why})" for index, why in outcome.skipped)
        events.append(
            PlannedEvent(
                "Normal", "InstancesResetSkipped", f"{subject}: reset skipped for instance(s) {listed}"
            )
        )
    return events


def reset_rejected(namespace: str, ir_name: str, component: str, error: ResetRequestError) -> PlannedEvent:
    message = (
        f'{_subject(namespace, ir_name, component)}: ome.io/reset-instances="{error.value}" rejected: '
        f'"{error.token}" is not a non-negative instance index; nothing reset'
    )
    return PlannedEvent("Warning", "InstancesResetRejected", message)


def scaled(component: str, before: int, after: int, source: str) -> PlannedEvent:
    """A Normal event telling why the Instance count changed."""
    return PlannedEvent(
        "Normal",
        "Scaled",
        f"OMENative component={component}: Instances {before} -> {after} ({source})",
    )


# --- teardown (§15) --------------------------------------------------------------------


def teardown_selector(isvc: str, component: str) -> str:
    """How OME names the owned objects it waits for: the pods' parent and component labels."""
    return f'parent="{isvc}", component="{component}"'


def manual_escape(namespace: str, ir_name: str) -> str:
    """The command that releases the finalizer by hand (every finalizer of the object)."""
    return (
        f"kubectl patch inferencereplica {ir_name} -n {namespace} --type=merge "
        """-p '{"metadata":{"finalizers":null}}'"""
    )


def teardown_deadline_exceeded(
    namespace: str, ir_name: str, isvc: str, component: str, deadline: str, pods: int
) -> PlannedEvent:
    """§15 `TeardownDeadlineExceeded`: the finalizer goes although `pods` owned pods remain."""
    message = (
        f"teardown deadline {deadline} exceeded ({pods} owned pod(s) observed; selector: "
        f"{teardown_selector(isvc, component)}); releasing finalizer ome.io/ir-teardown to background GC; "
        f"manual escape: {manual_escape(namespace, ir_name)}"
    )
    return PlannedEvent("Warning", "TeardownDeadlineExceeded", message)


def teardown_blocked(
    namespace: str, ir_name: str, isvc: str, component: str, pods: int, pod_groups: int, deadline_invalid: bool
) -> PlannedEvent:
    """§15 `TeardownBlocked`, repeated while owned objects remain and no valid deadline frees it."""
    why = (
        "lifecycle.teardown.deadline configured but invalid"
        if deadline_invalid
        else "no lifecycle.teardown.deadline configured"
    )
    message = (
        f"teardown blocked: {pods} owned pod(s) and {pod_groups} owned PodGroup(s) remain (selector: "
        f"{teardown_selector(isvc, component)}); finalizer ome.io/ir-teardown holds until cleanup completes "
        f"({why}); manual escape: {manual_escape(namespace, ir_name)}"
    )
    return PlannedEvent("Warning", "TeardownBlocked", message)
