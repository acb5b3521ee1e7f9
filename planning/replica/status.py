"""The InferenceReplica's status as `kubectl` users read it (spec reference §7, §8).

`kubectl get irep` shows `COMPONENT DESIRED CURRENT READY AVAILABLE` from
`.spec.component`, `.spec.replicas`, `.status.replicas`, `.status.readyReplicas` and
`.status.availableReplicas`; `kubectl describe irep` shows the conditions. The workflow
owns the truth and writes this projection: counts, revisions, one row per Instance
(DenseV1 `instanceStatuses`), retry blocks, conditions with their transition times, and
`rolloutHold`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from models.inferencereplica import (
    Condition,
    InferenceReplicaStatus,
    InstanceRow,
    LastFailure,
    OperationRow,
    PodCounts,
    RetryBlockRow,
    RolloutHoldRow,
)
from models.instance import InstanceStatus, RetryBlock
from planning.objects import component_labels
from planning.replica.conditions import PlannedCondition
from planning.replica.facts import ReplicaCounts
from planning.replica.hold import RolloutHold
from planning.replica.revisions import RevisionState


def label_selector(isvc: str, component: str) -> str:
    """`status.labelSelector` for the scale subresource: every pod of the component."""
    return ",".join(f"{key}={value}" for key, value in sorted(component_labels(isvc, component).items()))


def instance_row(status: InstanceStatus) -> InstanceRow:
    failure = status.last_failure
    operation = status.operation
    return InstanceRow(
        index=status.index,
        phase=status.phase.value,
        incarnation=status.incarnation,
        running_revision=status.running_revision,
        target_revision=status.target_revision,
        pods=PodCounts(
            total=status.total_pods,
            ready=status.ready_pods,
            serving=status.serving_pods,
            available=status.available_pods,
        ),
        ready_since=status.ready_since,
        # The row keeps the fields status shows of the Instance's own, fuller records.
        last_failure=LastFailure.model_validate(failure, from_attributes=True) if failure is not None else None,
        operation=OperationRow.model_validate(operation, from_attributes=True) if operation is not None else None,
        active_ordinal=status.active_ordinal,
        node_names=status.node_names or None,
    )


def retry_block_row(block: RetryBlock) -> RetryBlockRow:
    """The Instance's retry block as `status.retryBlocks` shows it."""
    return RetryBlockRow.model_validate(block.model_dump())


def hold_row(hold: RolloutHold | None) -> RolloutHoldRow | None:
    if hold is None:
        return None
    return RolloutHoldRow(gate=hold.gate.value, reason=hold.reason, target=hold.target, since=hold.since)


def with_transitions(
    previous: Sequence[Condition], planned: Sequence[PlannedCondition], now: datetime, generation: int | None
) -> list[Condition]:
    """Conditions with `lastTransitionTime` kept while the status is unchanged."""
    before = {condition.type: condition for condition in previous}
    result: list[Condition] = []
    for condition in planned:
        old = before.get(condition.type)
        changed = old is None or old.status != condition.status
        result.append(
            Condition(
                type=condition.type,
                status=condition.status,
                reason=condition.reason,
                message=condition.message,
                last_transition_time=now if changed or old is None else old.last_transition_time,
                observed_generation=generation,
            )
        )
    return result


def project_status(
    *,
    isvc: str,
    component: str,
    generation: int | None,
    instances: Sequence[InstanceStatus],
    counts: ReplicaCounts,
    revisions: RevisionState,
    retry_blocks: Sequence[RetryBlock],
    hold: RolloutHold | None,
    conditions: Sequence[PlannedCondition],
    previous_conditions: Sequence[Condition],
    now: datetime,
    row_of: Callable[[InstanceStatus], InstanceRow] = instance_row,
) -> InferenceReplicaStatus:
    """The status; `row_of`: `instance_row`, or one that keeps its rows (`workflows.replica.memo`)."""
    return InferenceReplicaStatus(
        observed_generation=generation,
        replicas=counts.replicas,
        ready_replicas=counts.ready,
        serving_replicas=counts.serving,
        available_replicas=counts.available,
        updated_replicas=counts.updated,
        updated_ready_replicas=counts.updated_ready,
        current_revision=revisions.current,
        update_revision=revisions.update,
        collision_count=0,
        label_selector=label_selector(isvc, component),
        instance_statuses=[row_of(status) for status in sorted(instances, key=lambda s: s.index)],
        retry_blocks=[retry_block_row(block) for block in retry_blocks],
        conditions=with_transitions(previous_conditions, conditions, now, generation),
        rollout_hold=hold_row(hold),
    )


def get_irep_columns(
    component: str, desired: int, status: InferenceReplicaStatus
) -> tuple[str, int, int, int, int]:
    """What `kubectl get irep` prints after NAME: COMPONENT DESIRED CURRENT READY AVAILABLE."""
    return (component, desired, status.replicas, status.ready_replicas, status.available_replicas)
