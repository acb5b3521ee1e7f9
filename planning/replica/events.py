"""Kubernetes Events of an InferenceReplica, with the spec's reasons and message formats.

Formats are verbatim from the spec reference (§9, §11, §12). Where OME names the
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
