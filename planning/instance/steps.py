"""What the Instance does next: the choice of its main loop's step, as pure decisions.

The `Instance` workflow observes (pod summaries and requests recorded in its `InstanceState`),
asks `next_step` what to do, sets the state fields the decision implies (`Step.changes`),
carries the step out, and, when the step is `Do.WAIT`, sleeps until news or `next_wake`.

- Creating (or Pending, when no pause holds the rebuild back): create the pods, unless the
  retry block holds the target revision (spec reference §8/§11).
- Ready: a requested restart first; then an update the gate lets start (`update_may_start`:
  not paused, not refused, not held, rebuild back-off over); then pod failures, confirmed with
  a fresh list (`confirmed_failure_step`) before anything is recreated.
- Failed, the failure ladder: a requested restart, a new revision, a due retry, a due
  rebuild, a released hold, pods that came up after all; otherwise it rests.

A delete or drain request is no step of its own: the workflow takes those first, each pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from models.instance import InstancePhase
from models.pods import PodSummary
from planning.instance import rules as policy
from planning.instance.health import assess_ready
from planning.instance.pause import (
    PodFailureAction,
    hold_update,
    on_pod_failure,
    pending_may_rebuild,
    repairs_allowed,
    retry_timers_run,
)
from planning.instance.pods import in_place_possible
from planning.instance.rules import UpdateWay
from planning.instance.state import InstanceState, current_levels

P = InstancePhase


class Do(StrEnum):
    """What the workflow carries out."""

    CREATE = "Create"
    """Create (or rebuild on its stable names) the pods at the target revision."""
    FAIL = "Fail"
    """Go Failed without an attempt: the retry block holds the target revision."""
    RESTART = "Restart"
    """Recreate every pod of a Ready Instance with a new incarnation."""
    UPDATE = "Update"
    """Move a Ready Instance to the target revision the `Step.way` says."""
    REFUSE_UPDATE = "RefuseUpdate"
    """An InPlaceOnly update that cannot be done in place: say so, keep running."""
    CONFIRM_FAILURE = "ConfirmFailure"
    """A pod looks failed: list afresh, then act on `confirmed_failure_step`."""
    GO_PENDING = "GoPending"
    """Restart policy None and every pod lost: rest Pending until the rebuild may start."""
    ACCEPT_RESTARTS = "AcceptRestarts"
    """Restart policy None: the kubelet restarted containers; the new counts are the baseline."""
    LOOK_AGAIN = "LookAgain"
    """Nothing to act on after all: the loop looks again at once."""
    RECREATE = "Recreate"
    """A Failed Instance goes back to Creating."""
    RESUME_SERVING = "ResumeServing"
    """A Failed Instance whose pods came up after all: back into rotation."""
    WAIT = "Wait"
    """Nothing to do now: wait for news or `next_wake`."""


class Why(StrEnum):
    """The reason for a step, for tests and for whoever reads the code."""

    CREATING = "Creating"
    PENDING_REBUILD = "PendingRebuild"
    PENDING_PAUSED = "PendingPaused"
    RETRY_BLOCKED = "RetryBlocked"
    RESTART_REQUESTED = "RestartRequested"
    NEW_REVISION = "NewRevision"
    IN_PLACE_IMPOSSIBLE = "InPlaceImpossible"
    HEALTHY = "Healthy"
    POD_FAILED = "PodFailed"
    ALL_PODS_LOST = "AllPodsLost"
    CONTAINER_RESTARTED = "ContainerRestarted"
    FROZEN = "Frozen"
    NO_FAILURE = "NoFailure"
    RETRY_DUE = "RetryDue"
    REBUILD_DUE = "RebuildDue"
    RELEASED = "Released"
    PODS_READY = "PodsReady"
    DRAINING = "Draining"
    RESTING = "Resting"
    BUSY = "Busy"
    """A phase with no step of its own (an operation is under way)."""


@dataclass(frozen=True)
class Step:
    """One decision of the main loop: what to do, why, and the bookkeeping that goes with it."""

    do: Do
    why: Why
    changes: dict[str, Any] = field(default_factory=dict)
    """`InstanceState` fields to set before acting (a taken update, a cleared request, ...)."""
    way: UpdateWay | None = None
    """For `Do.UPDATE`: in place, by surge, or by recreating."""
    reason: str | None = None
    """For `Do.RESTART`: the restart's reason, as events and the drain show it."""


def update_taken(state: InstanceState) -> dict[str, Any]:
    """The changes that make the newest requested spec the target; a new revision starts a
    fresh retry story (no rebuild back-off, no failures in a row)."""
    new = state.pending_update
    if new is None:
        return {}
    changes: dict[str, Any] = {"spec": new, "pending_update": None}
    if new.revision != state.spec.revision:
        changes.update(rebuild_at=None, failures_in_a_row=0)
    return changes


def _with(state: InstanceState, changes: dict[str, Any]) -> InstanceState:
    """`state` as it will be once `changes` are set (a copy; `state` itself when none)."""
    return state.model_copy(update=changes) if changes else state


def _retry_started(state: InstanceState, now: datetime) -> dict[str, Any]:
    """A Backoff retry block whose time has come: the attempt about to start is its retry."""
    block = state.retry_block
    if block is not None and policy.retry_due(block, now):
        return {"retry_block": policy.start_retry(block)}
    return {}


def next_step(state: InstanceState, now: datetime) -> Step:
    """The step of a loop pass, once delete and drain requests and releases are taken."""
    phase = state.phase
    if phase == P.CREATING or (phase == P.PENDING and pending_may_rebuild(state.pause_mode)):
        return create_step(state, now)
    if phase == P.READY:
        return ready_step(state, now)
    if phase == P.FAILED:
        return failed_step(state, now)
    # A Pending Instance (restart policy None, its pods lost) is not rebuilt during a pause.
    return Step(Do.WAIT, Why.PENDING_PAUSED if phase == P.PENDING else Why.BUSY)


def create_step(state: InstanceState, now: datetime) -> Step:
    """Create at the newest target; a restart asked for meanwhile has nothing left to do."""
    changes = update_taken(state) | {"pending_restart": None}
    target = _with(state, changes)
    if policy.blocks_attempt(target.retry_block, target.spec.revision, now):
        return Step(Do.FAIL, Why.RETRY_BLOCKED, changes)
    why = Why.CREATING if state.phase == P.CREATING else Why.PENDING_REBUILD
    return Step(Do.CREATE, why, changes | _retry_started(target, now))


def update_may_start(state: InstanceState, now: datetime) -> bool:
    """The update gate of a Ready Instance: a new target revision, no pause (§5), not refused
    before, not held or backing off (§8), and any rebuild back-off over."""
    revision = state.spec.revision
    return (
        revision != state.running_revision
        and not hold_update(state.pause_mode)
        and revision != state.refused_revision
        and not policy.blocks_attempt(state.retry_block, revision, now)
        and (state.rebuild_at is None or state.rebuild_at <= now)
    )


def update_step(state: InstanceState, now: datetime, changes: dict[str, Any]) -> Step:
    """How a Ready Instance moves to its (taken) target: `state` is as after `changes`."""
    running = state.running_spec or state.spec
    target = state.spec
    way = policy.choose_update_way(running, target, in_place_possible(running, target))
    if way == UpdateWay.REFUSE:
        return Step(
            Do.REFUSE_UPDATE, Why.IN_PLACE_IMPOSSIBLE, changes | {"refused_revision": target.revision}
        )
    return Step(Do.UPDATE, Why.NEW_REVISION, changes | _retry_started(state, now), way=way)


def _observed(state: InstanceState) -> tuple[PodSummary, ...]:
    return state.pods.pods if state.pods is not None else ()


def ready_step(state: InstanceState, now: datetime) -> Step:
    """A Ready Instance: a requested restart, an update, a pod failure, or nothing."""
    if state.pending_restart is not None:
        restart = state.pending_restart
        return Step(Do.RESTART, Why.RESTART_REQUESTED, {"pending_restart": None}, reason=restart.reason)
    changes = update_taken(state)
    target = _with(state, changes)
    if update_may_start(target, now):
        return update_step(target, now, changes)
    if target.spec.revision == target.running_revision:
        # Running the target revision: the target spec is what runs (fields beside the revision).
        changes = changes | {"running_spec": target.spec}
    check = assess_ready(_observed(state), state.members, state.restart_baseline, now)
    if not check.failed_pods:
        return Step(Do.WAIT, Why.HEALTHY, changes)
    restart_policy = target.spec.effective_restart_policy
    if on_pod_failure(state.pause_mode, restart_policy, check.lost_all) == PodFailureAction.WAIT:
        # Frozen (§5): no repair starts; the failure is looked at again on resume.
        return Step(Do.WAIT, Why.FROZEN, changes)
    return Step(Do.CONFIRM_FAILURE, Why.POD_FAILED, changes)


def confirmed_failure_step(state: InstanceState, pods: tuple[PodSummary, ...], now: datetime) -> Step:
    """What a Ready Instance does about the failure a fresh pod list (`pods`) confirms."""
    check = assess_ready(pods, state.members, state.restart_baseline, now)
    if not check.failed_pods or check.failure is None:
        return Step(Do.LOOK_AGAIN, Why.NO_FAILURE)
    action = on_pod_failure(state.pause_mode, state.spec.effective_restart_policy, check.lost_all)
    if action == PodFailureAction.WAIT:
        return Step(Do.WAIT, Why.FROZEN)
    failure = check.failure
    changes: dict[str, Any] = {"last_failure": failure}
    if action == PodFailureAction.RESTART:
        return Step(Do.RESTART, Why.POD_FAILED, changes, reason=failure.reason)
    if action == PodFailureAction.PENDING:
        # Restart policy None: a lost Instance is rebuilt (not during a pause: it rests Pending).
        return Step(Do.GO_PENDING, Why.ALL_PODS_LOST, changes)
    baseline = {pod.name: pod.restart_count for pod in pods if pod.name in state.members}
    return Step(Do.ACCEPT_RESTARTS, Why.CONTAINER_RESTARTED, changes | {"restart_baseline": baseline})


def failed_step(state: InstanceState, now: datetime) -> Step:
    """The failure ladder of a Failed Instance, first rung that applies."""
    if state.pending_restart is not None:
        changes = {"pending_restart": None, "incarnation": state.incarnation + 1}
        return Step(Do.RECREATE, Why.RESTART_REQUESTED, changes)
    changes = update_taken(state)
    target = _with(state, changes)
    if target.spec.revision != state.spec.revision:
        return Step(Do.RECREATE, Why.NEW_REVISION, changes)
    # Recreating a Failed Instance is a repair: it goes on at `Recover`, not at `Freeze` (§5).
    if repairs_allowed(state.pause_mode):
        repair = _repair(target, now)
        if repair is not None:
            return Step(Do.RECREATE, repair[0], changes | repair[1])
    if target.members and current_levels(target, now).ready:
        # A failed restart whose pods came up after all: back into rotation, unless draining.
        if target.draining:
            return Step(Do.WAIT, Why.DRAINING, changes)
        return Step(Do.RESUME_SERVING, Why.PODS_READY, changes)
    return Step(Do.WAIT, Why.RESTING, changes)


def _repair(state: InstanceState, now: datetime) -> tuple[Why, dict[str, Any]] | None:
    """Why a Failed Instance is recreated now, if it is, and the bookkeeping that goes with it."""
    if policy.retry_due(state.retry_block, now):
        return Why.RETRY_DUE, {}
    if state.retry_block is not None:
        return None
    if state.rebuild_at is not None and state.rebuild_at <= now:
        return Why.REBUILD_DUE, {"rebuild_at": None}
    failure = state.last_failure
    if failure is not None and failure.counting:
        # Released: the hold is gone, so the revision gets a fresh attempt now.
        return Why.RELEASED, {"last_failure": failure.model_copy(update={"counting": False})}
    return None


def next_wake(state: InstanceState, now: datetime) -> datetime | None:
    """When a waiting Instance must look again without news: a retry or rebuild coming due,
    a pod turning available, or its headless Service to try again. A retry or rebuild the pause
    holds back is no reason to wake (it would only spin)."""
    wakes: list[datetime] = []
    block = state.retry_block
    timers = retry_timers_run(state.pause_mode, state.phase)
    if timers and block is not None and block.state == "Backoff" and block.next_retry_at is not None:
        wakes.append(block.next_retry_at)
    if timers and state.rebuild_at is not None:
        wakes.append(state.rebuild_at)
    available_at = current_levels(state, now).next_available_at
    if available_at is not None:
        wakes.append(available_at)
    if state.service_retry_at is not None:
        wakes.append(state.service_retry_at)
    return min(wakes) if wakes else None
