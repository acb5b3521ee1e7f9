"""A drain's progress: what a look at the node changes, what to do next, what answers change.

Public API (each returns a new `DrainState`, or the decision, never mutating its argument):
- `observe(state, pods, now)`: the node as listed now: Instances on it, pods to evict,
  pods left and ignored, and the phase.
- `next_actions(state, now, may_start_migrations) -> Actions`: the migrations to start
  (one per component at a time: the InferenceReplica runs them one by one, and a queued
  migration's deadline runs while it waits), the pods to evict, when to look again, and
  whether the node is drained.
- `migration_started`, `migration_ended`, `eviction_answered`, `eviction_failed`: record the
  outcomes.
- `timed_out(state, now)`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from models.kube_ops import EvictPodResult, NodePod
from models.migration import MigrationPhase, MigrationProgress
from planning.drain import backoff, texts
from planning.drain.pods import classify
from planning.drain.state import DrainState, InstanceKey, InstanceMove, PodEviction
from planning.drain.texts import DrainPhase

RECHECK_WHILE_LEAVING = timedelta(seconds=5)
"""Nothing tells a drain that a pod has gone: while pods terminate or were just evicted it
looks again at this pace (`kubectl drain` polls every second)."""
RECHECK_WHILE_MIGRATING = timedelta(minutes=1)
"""While only migrations run, their ends wake the drain; this look is the safety net that
notices an Instance leaving (or arriving) by other means."""


@dataclass(frozen=True)
class Actions:
    migrate: list[InstanceKey] = field(default_factory=list)
    evict: list[PodEviction] = field(default_factory=list)
    look_again_at: datetime | None = None
    drained: bool = False


def observe(state: DrainState, pods: list[NodePod], now: datetime, node_ready: bool = True) -> DrainState:
    contents = classify(pods)
    instances: dict[str, InstanceMove] = {}
    for key, move in state.instances.items():
        # An Instance no longer on the node has left it: by our migration or otherwise.
        instances[key] = move.model_copy(update={"on_node": False, "pods": []})
    for instance, instance_pods in contents.instances.items():
        known = instances.get(instance.label) or InstanceMove(instance=instance)
        instances[instance.label] = known.model_copy(
            update={"on_node": True, "pods": [p.name for p in instance_pods]}
        )
    evictions: dict[str, PodEviction] = {}
    for pod in contents.evict:
        known_eviction = state.evictions.get(pod.key)
        if known_eviction is None or known_eviction.uid != pod.uid:
            known_eviction = PodEviction(namespace=pod.namespace, name=pod.name, uid=pod.uid)
        evictions[pod.key] = known_eviction
    gone = sorted(set(state.evictions) - set(evictions))
    updated = state.model_copy(
        update={
            "instances": instances,
            "evictions": evictions,
            "evicted": sorted(set(state.evicted) | set(gone)),
            "pods_left": contents.product_pods,
            "pods_stuck": [] if node_ready else sorted(p.key for p in contents.terminating),
            "pods_ignored": [p.key for p in contents.ignored],
            "observed_at": now,
        }
    )
    if updated.phase.holding or updated.phase.final or updated.phase == DrainPhase.CORDONING:
        return updated
    return updated.model_copy(update={"phase": _moving_phase(updated)})


def _moving_phase(state: DrainState) -> DrainPhase:
    if any(m.on_node or m.migration_id for m in state.instances.values()):
        return DrainPhase.MIGRATING
    return DrainPhase.EVICTING


def in_flight(state: DrainState) -> list[InstanceMove]:
    return [m for m in state.instances.values() if m.migration_id is not None]


def is_drained(state: DrainState) -> bool:
    return set(state.pods_left) <= set(state.pods_stuck) and not in_flight(state)


def next_actions(state: DrainState, now: datetime, may_start_migrations: bool = True) -> Actions:
    busy_components = {m.instance.component_label for m in in_flight(state)}
    migrate: list[InstanceKey] = []
    wakes: list[datetime] = []
    for label in sorted(state.instances):
        move = state.instances[label]
        if not move.on_node or move.migration_id is not None:
            continue
        if move.retry_at is not None and move.retry_at > now:
            wakes.append(move.retry_at)
            continue
        component = move.instance.component_label
        if may_start_migrations and component not in busy_components:
            migrate.append(move.instance)
            busy_components.add(component)
    evict: list[PodEviction] = []
    for key in sorted(state.evictions):
        eviction = state.evictions[key]
        if eviction.retry_at is not None and eviction.retry_at > now:
            wakes.append(eviction.retry_at)
        else:
            evict.append(eviction)
    leaving = set(state.pods_left) - _instance_pod_keys(state) - set(state.pods_stuck)
    if evict or leaving:
        # Pods evicted now or terminating: look again soon to see them gone.
        wakes.append(now + RECHECK_WHILE_LEAVING)
    elif in_flight(state) or migrate:
        wakes.append(now + RECHECK_WHILE_MIGRATING)
    drained = is_drained(state) and not migrate and not evict
    return Actions(migrate=migrate, evict=evict, look_again_at=min(wakes) if wakes else None, drained=drained)


def _instance_pod_keys(state: DrainState) -> set[str]:
    return {f"{m.instance.namespace}/{pod}" for m in state.instances.values() for pod in m.pods}


def migration_started(state: DrainState, instance: InstanceKey, workflow_id: str) -> DrainState:
    move = state.instances[instance.label]
    instances = dict(state.instances)
    instances[instance.label] = move.model_copy(
        update={"migration_id": workflow_id, "attempts": move.attempts + 1, "retry_at": None, "retry_why": ""}
    )
    return state.model_copy(update={"instances": instances, "migrations_started": state.migrations_started + 1})


def migration_ended(state: DrainState, instance: InstanceKey, result: MigrationProgress, now: datetime) -> DrainState:
    """Record how a migration ended. Whether the Instance moved is what the next look at the
    node says; the back-off set here applies only if it is still there."""
    move = state.instances[instance.label]
    completed = result.phase == MigrationPhase.COMPLETED
    reason = None if completed else (result.reason or result.phase.value)
    delay, why = backoff.migration_retry(reason, result.message, move.attempts)
    instances = dict(state.instances)
    instances[instance.label] = move.model_copy(
        update={
            "migration_id": None,
            "retry_at": now + delay,
            "retry_why": why,
            "last_reason": reason,
            "last_message": result.message,
            "moved_to": result.surge_instance if completed else move.moved_to,
        }
    )
    return state.model_copy(update={"instances": instances})


def eviction_answered(state: DrainState, eviction: PodEviction, result: EvictPodResult, now: datetime) -> DrainState:
    current = state.evictions.get(eviction.key)
    if current is None or current.uid != eviction.uid:
        return state
    attempts = current.attempts + 1
    evictions = dict(state.evictions)
    if result.outcome == "blocked":
        evictions[eviction.key] = current.model_copy(
            update={"attempts": attempts, "blocked": result.message, "retry_at": now + backoff.eviction_retry(attempts)}
        )
    else:
        # Evicted (or already gone): wait for the next look to see it leave; evicting again
        # before then would only be answered "already terminating".
        evictions[eviction.key] = current.model_copy(
            update={"attempts": attempts, "blocked": "", "retry_at": now + RECHECK_WHILE_LEAVING * 2}
        )
    return state.model_copy(update={"evictions": evictions})


def eviction_failed(state: DrainState, eviction: PodEviction, message: str, now: datetime) -> DrainState:
    """An eviction the API server refused with an error (403, a webhook's refusal): the pod
    waits, with the error as the reason, and is tried again after a back-off."""
    current = state.evictions.get(eviction.key)
    if current is None or current.uid != eviction.uid:
        return state
    attempts = current.attempts + 1
    evictions = dict(state.evictions)
    evictions[eviction.key] = current.model_copy(
        update={
            "attempts": attempts,
            "blocked": texts.eviction_failed(message)[:500],
            "retry_at": now + backoff.eviction_failed_retry(attempts),
        }
    )
    return state.model_copy(update={"evictions": evictions})


def timed_out(state: DrainState, now: datetime) -> bool:
    return state.deadline is not None and now >= state.deadline
