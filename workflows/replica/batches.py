"""Pod batching glue (spec reference §14): which of a pass's starts and removals go now.

The rule is `planning.replica.batching.admit`; this module prices the InferenceReplica's
Instances in pods and logs each scale-down wave the way OME does (`OMENative scale-down
wave`). Deferred Instances are simply not started or told to delete in this pass: the next
pass plans them again, woken by an Instance's report or by `scaleDownRequeueInterval`.

Histories from before pod batching started and removed every Instance a pass planned, and
their inputs lack the batch sizes (so they read the chart's 100 on replay): a wave that would
defer something asks `workflow.patched(POD_BATCHING)` first, in the pass, and without the
patch admits everything, as that code did (no deferral, so no requeue timer either).

Imported by the workflow modules inside `workflow.unsafe.imports_passed_through()`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from temporalio import workflow

from models.inferenceservice import ComponentSpec
from planning.replica.batching import Candidate, Wave, admit, deletion_cost
from planning.replica.template import pod_template
from workflows import metrics
from workflows.replica.messages import ReplicaState

POD_BATCHING = "pod-batching"
"""`workflow.patched` id: starts and removals go in pod batches (§14); histories from before
started and removed, in one pass, every Instance it planned."""


def pods_per_instance(state: ReplicaState, revision_hash: str) -> int:
    """How many pods an Instance of `revision_hash` runs: the leader (or only pod) and its workers."""
    config = state.config
    component = ComponentSpec.model_validate(state.specs.get(revision_hash, config.component_spec))
    return 1 + pod_template(component, config.isvc, config.component).worker_count


def removal_cost(state: ReplicaState, index: int) -> int:
    """Instance `index`'s pods, live or Terminating (1 once only cleanup remains)."""
    status = state.instances.get(index)
    if status is not None:
        return deletion_cost(status.total_pods)
    launched = state.launched.get(index)
    return pods_per_instance(state, launched) if launched is not None else 1


def active_removals(state: ReplicaState) -> list[Candidate]:
    """Instances told to go that have not reported their end: deletion work in flight."""
    present = set(state.instances) | set(state.launched)
    return [Candidate(index, removal_cost(state, index)) for index in state.removing if index in present]


def scale_down_wave(state: ReplicaState, indexes: Sequence[int]) -> Wave:
    """Which of `indexes` (in removal order) may start draining now, beside the work in flight."""
    candidates = [Candidate(index, removal_cost(state, index)) for index in indexes]
    wave = patched(admit(candidates, state.config.cluster.scale_down_pod_batch_size, active_removals(state)))
    if candidates:
        workflow.logger.info(
            "OMENative scale-down wave component=%s podBudget=%s activePodCost=%d activeInstances=%d "
            "admittedInstances=%d deferredInstances=%d",
            state.config.component,
            wave.pod_budget if wave.pod_budget is not None else "unbounded",
            wave.active_pod_cost,
            wave.active_instances,
            len(wave.admitted),
            len(wave.deferred),
        )
    # Every pass, so the gauges fall back to 0 once the removals are done.
    admitted_pods = sum(c.pods for c in candidates if c.index in wave.admitted)
    config = state.config
    metrics.scale_down_wave(
        config.namespace, config.isvc, config.component,
        deferred=len(wave.deferred), batch_pods=admitted_pods, oversized=wave.oversized,
    )
    return wave


def scale_up_wave(state: ReplicaState, starts: Sequence[tuple[int, str]]) -> Wave:
    """Which of `starts` (index, revision hash; in plan order) may be started in this pass."""
    candidates = [Candidate(index, pods_per_instance(state, revision)) for index, revision in starts]
    return patched(admit(candidates, state.config.cluster.scale_up_pod_batch_size))


def patched(wave: Wave) -> Wave:
    """`wave`, or everything admitted on a history from before pod batching (`POD_BATCHING`).

    The patch is asked only when the budget defers something: otherwise batching changes
    nothing, and a pass that defers nothing leaves no marker."""
    if not wave.deferred or workflow.patched(POD_BATCHING):
        return wave
    return Wave(wave.admitted + wave.deferred, (), None, wave.active_pod_cost, wave.active_instances)


def requeue_at(state: ReplicaState, now: datetime, waves: Sequence[Wave]) -> datetime | None:
    """When to look again for deferred Instances: `scaleDownRequeueInterval` (None: only news)."""
    interval = state.config.cluster.scale_down_requeue_interval_seconds
    if interval is None or not any(wave.deferred for wave in waves):
        return None
    return now + timedelta(seconds=interval)
