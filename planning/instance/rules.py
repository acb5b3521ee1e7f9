"""The Instance's rules with numbers in them: phases, deadlines, retries, strategies.

- Phase transitions of spec reference §9, checked so a bug cannot invent one.
- The readiness clock (§9/§10): `instanceReadyTimeout` from the start of an attempt; holds
  (quota, room, a terminating PodGroup, an unknown node, a pause) stop it and grant a full window
  when they end.
- The retry block (§8/§11): counting failures retried per `updateRetry`, then `Held` until
  a new revision replaces it or someone releases it; other failures rebuild after back-off,
  except a Create of a revision the Instance already ran, which waits for its pods.
- The PodGroup name (§9): re-check pace while it terminates, the message when it is taken.
- Which update strategy applies to an Instance and a pair of revisions (§7).
- Force-delete evidence for pods stuck on dead nodes, and the drain deadline of a deletion (§15).
- The exact event messages the spec gives.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from models.duration import format_duration
from models.instance import (
    ForceDeletePolicy,
    InstancePhase,
    InstanceSpec,
    RetryBlock,
    RetryBlockState,
    UpdateRetryPolicy,
    UpdateStrategyType,
)
from models.pods import PodSummary

P = InstancePhase
ALLOWED_TRANSITIONS: dict[InstancePhase, frozenset[InstancePhase]] = {
    P.CREATING: frozenset({P.READY, P.FAILED, P.DELETING}),
    P.READY: frozenset({P.UPDATING, P.RESTARTING, P.MIGRATING, P.DELETING, P.PENDING}),
    P.UPDATING: frozenset({P.READY, P.FAILED, P.DELETING}),
    P.RESTARTING: frozenset({P.READY, P.FAILED, P.DELETING}),
    P.MIGRATING: frozenset({P.READY, P.FAILED, P.DELETING}),
    P.PENDING: frozenset({P.CREATING, P.DELETING}),
    P.FAILED: frozenset({P.CREATING, P.READY, P.UPDATING, P.DELETING}),
    P.DELETING: frozenset(),
}
"""§9's table, plus Deleting from every phase: a delete request wins over any operation."""


def check_transition(current: InstancePhase, new: InstancePhase) -> None:
    """Raise `ValueError` for a transition §9 does not allow (staying put is always fine)."""
    if current == new:
        return
    if new not in ALLOWED_TRANSITIONS[current]:
        allowed = ", ".join(sorted(ALLOWED_TRANSITIONS[current])) or "nothing"
        raise ValueError(
            f"Instance phase {current} cannot become {new}; from {current} it can become {allowed}"
        )


# --- readiness clock -------------------------------------------------------------------


@dataclass(frozen=True)
class ReadinessClock:
    """Start of the current readiness window, and the hold that stopped it, if any."""

    started_at: datetime
    held_since: datetime | None = None
    hold: str | None = None

    def observe(self, holds: list[str], now: datetime) -> ReadinessClock:
        """Stop the clock on a new hold; restart it with a full window when holds end."""
        if holds:
            if self.held_since is None:
                return ReadinessClock(self.started_at, now, holds[0])
            return ReadinessClock(self.started_at, self.held_since, holds[0])
        if self.held_since is not None:
            return ReadinessClock(now)
        return self

    def deadline(self, timeout_seconds: float | None) -> datetime | None:
        """When the attempt fails for `DeadlineExceeded`; None while held or without timeout."""
        if timeout_seconds is None or timeout_seconds <= 0 or self.held_since is not None:
            return None
        return self.started_at + timedelta(seconds=timeout_seconds)


# --- retry block -----------------------------------------------------------------------


def record_counting_failure(
    block: RetryBlock | None,
    policy: UpdateRetryPolicy | None,
    revision: str,
    reason: str,
    now: datetime,
) -> RetryBlock:
    """The retry block after a counting failure of `revision`'s current attempt.

    Without a policy the first counting failure holds (§11). A block of another revision
    does not carry over: a new revision starts fresh.
    """
    if block is None or block.target_revision != revision or block.state == RetryBlockState.HELD:
        attempts = 1 if block is None or block.target_revision != revision else block.attempts_started
        first = now if block is None or block.target_revision != revision else block.first_failure_at
    else:
        attempts = block.attempts_started
        first = block.first_failure_at
    if policy is None or attempts >= policy.max_attempts or not policy.attempt_delays_seconds:
        return RetryBlock(
            target_revision=revision,
            state=RetryBlockState.HELD,
            attempts_started=attempts,
            first_failure_at=first,
            last_failure_at=now,
            reason=reason,
        )
    delays = policy.attempt_delays_seconds
    delay = delays[min(attempts - 1, len(delays) - 1)]
    return RetryBlock(
        target_revision=revision,
        state=RetryBlockState.BACKOFF,
        attempts_started=attempts,
        next_retry_at=now + timedelta(seconds=delay),
        first_failure_at=first,
        last_failure_at=now,
        reason=reason,
    )


def start_retry(block: RetryBlock) -> RetryBlock:
    """A Backoff block whose time has come: the next attempt is running."""
    return block.model_copy(
        update={
            "state": RetryBlockState.RETRY_IN_PROGRESS,
            "attempts_started": block.attempts_started + 1,
            "next_retry_at": None,
        }
    )


def retry_due(block: RetryBlock | None, now: datetime) -> bool:
    return (
        block is not None
        and block.state == RetryBlockState.BACKOFF
        and block.next_retry_at is not None
        and block.next_retry_at <= now
    )


def blocks_attempt(block: RetryBlock | None, revision: str, now: datetime) -> bool:
    """True when `revision` may not start an attempt now (held, or still backing off)."""
    if block is None or block.target_revision != revision:
        return False
    if block.state == RetryBlockState.HELD:
        return True
    return block.state == RetryBlockState.BACKOFF and not retry_due(block, now)


def release_matches(block: RetryBlock | None, requested: str) -> bool:
    """A release names the full revision or its 8-character hash prefix (§11)."""
    if block is None or block.state != RetryBlockState.HELD or not requested:
        return False
    return block.target_revision == requested or (
        len(requested) >= 8 and block.target_revision.startswith(requested)
    )


REBUILD_BASE_SECONDS = 60.0
REBUILD_CAP_SECONDS = 600.0


def rebuild_delay_seconds(failures_in_a_row: int) -> float:
    """Back-off before rebuilding after a non-counting failure: 1m, 2m, 4m ... capped at 10m.

    Such failures (crash loops, missed deadlines, lost nodes) never hold the revision, so
    the back-off only keeps a broken Instance from churning the scheduler.
    """
    exponent = max(0, failures_in_a_row - 1)
    return float(min(REBUILD_BASE_SECONDS * float(2**exponent), REBUILD_CAP_SECONDS))


def keeps_failed_attempt(running_revision: str | None, target_revision: str, pods_created: bool) -> bool:
    """True when a failed Create keeps its pods and stays Failed until they are ready (§9).

    An Instance that already ran the target revision is not rebuilt after back-off: its pods
    (kept, not deleted) bring it back to Ready when they come up, and only a restart or a new
    revision starts a fresh attempt. An attempt that created no pod has nothing to wait for,
    so it is rebuilt after back-off as any other.
    """
    return pods_created and running_revision is not None and running_revision == target_revision


# --- PodGroup --------------------------------------------------------------------------

POD_GROUP_NAME_TAKEN = "PodGroupNameTaken"
POD_GROUP_RECHECK_FIRST_SECONDS = 5.0
POD_GROUP_RECHECK_CAP_SECONDS = 60.0


def pod_group_recheck_seconds(checks: int) -> float:
    """When to look again at a terminating PodGroup: 5s, 10s, 20s, 40s, then every minute.

    No watcher reports PodGroups, so the Instance polls; a finalizer usually lets go within
    seconds, and one that holds longer should not cost a read every few seconds.
    """
    exponent = max(0, checks - 1)
    return float(
        min(POD_GROUP_RECHECK_FIRST_SECONDS * float(2 ** min(exponent, 16)), POD_GROUP_RECHECK_CAP_SECONDS)
    )


SERVICE_RECHECK_FIRST_SECONDS = 30.0
SERVICE_RECHECK_CAP_SECONDS = 300.0


def service_recheck_seconds(tries: int) -> float:
    """When to try again a headless Service a full quota refused, after `tries` refusals: 30s,
    60s, 120s, 240s, then every 5 minutes. A quota frees without any event the Instance hears."""
    exponent = max(0, tries - 1)
    return float(min(SERVICE_RECHECK_FIRST_SECONDS * float(2 ** min(exponent, 16)), SERVICE_RECHECK_CAP_SECONDS))


def pod_group_taken_message(spec: InstanceSpec, owner: str) -> str:
    name = spec.instance_name
    return (
        f"PodGroup {spec.namespace}/{name} already exists and does not belong to this Instance "
        f"(found owner: {owner}); its pods would join another gang. Delete that PodGroup "
        f"(kubectl delete podgroup {name} -n {spec.namespace}) or rename whatever created it; "
        "the Instance retries after back-off"
    )[:1000]


# --- update strategies -----------------------------------------------------------------


class UpdateWay(StrEnum):
    IN_PLACE = "InPlace"
    SURGE = "Surge"
    RECREATE = "Recreate"
    REFUSE = "Refuse"


def choose_update_way(running: InstanceSpec, target: InstanceSpec, in_place_possible: bool) -> UpdateWay:
    """Which way this Instance moves from `running` to `target` (§7, §9).

    A multi-pod SurgeThenDrain surge is done by the InferenceReplica at a new index (the
    replacement carries `gang_surge_of`); an update signal reaching a multi-pod Instance
    under SurgeThenDrain recreates it on its own names instead.
    """
    strategy = target.update_strategy_type
    if strategy in (UpdateStrategyType.IN_PLACE_IF_POSSIBLE, UpdateStrategyType.IN_PLACE_ONLY):
        if in_place_possible:
            return UpdateWay.IN_PLACE
        if strategy == UpdateStrategyType.IN_PLACE_ONLY:
            return UpdateWay.REFUSE
        return UpdateWay.RECREATE
    if strategy == UpdateStrategyType.SURGE_THEN_DRAIN and not target.multi_pod and not running.multi_pod:
        return UpdateWay.SURGE
    return UpdateWay.RECREATE


def next_ordinal(active_ordinal: int) -> int:
    """Single-pod SurgeThenDrain alternates the pod ordinal between 0 and 1 (§9)."""
    return 1 - active_ordinal


# --- force delete ----------------------------------------------------------------------


def dead_node_evidence(pod: PodSummary, policy: ForceDeletePolicy | None, now: datetime) -> str | None:
    """Why `pod`, Terminating past its own deadline, sits on a dead node, or None (§15).

    Finalizers are not looked at here: `force_delete_evidence` refuses a pod that has them,
    `finalizer_block_evidence` is the same evidence for one that has. Ready=True nodes are
    never dead."""
    if policy is None or not pod.terminating or pod.deletion_timestamp is None:
        return None
    if now <= pod.deletion_timestamp + timedelta(seconds=policy.overdue_slack_seconds):
        return None
    threshold = timedelta(seconds=policy.node_unreachable_threshold_seconds)
    if pod.node_ready == "True" and not pod.node_missing:
        return None
    if pod.node_missing:
        return "node-gone"
    if pod.node_unreachable_since is not None and now - pod.node_unreachable_since >= threshold:
        return "node-unreachable-taint"
    if pod.node_ready in ("False", "Unknown") and pod.node_ready_since is not None:
        if now - pod.node_ready_since >= threshold:
            return "node-not-ready"
    return None


def force_delete_evidence(pod: PodSummary, policy: ForceDeletePolicy | None, now: datetime) -> str | None:
    """Why `pod` may be force-deleted now, or None: never a pod that has finalizers (§15)."""
    return None if pod.finalizers else dead_node_evidence(pod, policy, now)


def finalizer_block_evidence(pod: PodSummary, policy: ForceDeletePolicy | None, now: datetime) -> str | None:
    """The evidence that would force-delete `pod` but for its finalizers, which OME never
    strips (`PodDeleteBlockedByFinalizer`); None otherwise."""
    return dead_node_evidence(pod, policy, now) if pod.finalizers else None


def force_delete_due_at(
    pod: PodSummary, policy: ForceDeletePolicy | None, with_finalizers: bool = False
) -> datetime | None:
    """The earliest moment `dead_node_evidence` could hold for `pod`: a timer worth setting.
    A pod with finalizers has none unless `with_finalizers` (to report it blocked)."""
    if policy is None or not pod.terminating or pod.deletion_timestamp is None:
        return None
    if pod.finalizers and not with_finalizers:
        return None
    overdue = pod.deletion_timestamp + timedelta(seconds=policy.overdue_slack_seconds)
    if pod.node_missing:
        return overdue
    since = [t for t in (pod.node_unreachable_since, pod.node_ready_since) if t is not None]
    if pod.node_ready == "True" or not since:
        return None
    return max(overdue, min(since) + timedelta(seconds=policy.node_unreachable_threshold_seconds))


def drain_deadline(delete_started_at: datetime, instance_ready_timeout_seconds: float | None) -> datetime | None:
    """When an Instance's deletion becomes overdue (§15): its start + `instanceReadyTimeout`.
    An overdue drain never fails the Instance; it keeps waiting for its pods."""
    if instance_ready_timeout_seconds is None or instance_ready_timeout_seconds <= 0:
        return None
    return delete_started_at + timedelta(seconds=instance_ready_timeout_seconds)


# --- event messages (exact formats from the spec reference) ----------------------------


def retry_held_message(spec: InstanceSpec, attempts: int, reason: str) -> str:
    ir = f"{spec.isvc}-{spec.component}"
    revision = spec.revision_name or spec.revision
    return (
        f"InferenceReplica {spec.namespace}/{ir} component={spec.component} update to revision {revision} "
        f"held after {attempts} failed attempt(s) (last failure: {reason}); "
        "publish a corrected revision or raise lifecycle.updateRetry limits"
    )


def in_place_refused_message(spec: InstanceSpec) -> str:
    return (
        f"OMENative component={spec.component} instance={spec.index} rejected update: "
        "InPlaceOnly strategy but diff exceeds container images"
    )


def instance_failed_message(spec: InstanceSpec, reason: str, message: str) -> str:
    return f"OMENative component={spec.component} instance={spec.index} failed ({reason}): {message}"[:1000]


def gang_surge_abandoned_message(spec: InstanceSpec, reason: str) -> str:
    return (
        f"OMENative component={spec.component} instance={spec.index}: gang surge of instance="
        f"{spec.gang_surge_of} to revision {spec.revision_name or spec.revision} abandoned ({reason}); "
        f"instance={spec.gang_surge_of} stays on its revision"
    )


def terminal_pod_recycled_message(spec: InstanceSpec, pod: str) -> str:
    return f"OMENative component={spec.component} instance={spec.index}: recreated terminal pod {pod}"


def force_deleted_message(spec: InstanceSpec, pod: PodSummary, evidence: str, now: datetime) -> str:
    return (
        f"OMENative component={spec.component} instance={spec.index}: force-deleted stuck-Terminating pod "
        f"{pod.name} on node {pod.node_name} (evidence={evidence}, {_overdue(pod, now)} past the "
        "pod's own deletion deadline)"
    )


def _overdue(pod: PodSummary, now: datetime) -> str:
    """How long past the pod's own deletion deadline (its deletionTimestamp) `now` is."""
    return format_duration((now - pod.deletion_timestamp).total_seconds() if pod.deletion_timestamp else 0.0)


def delete_blocked_by_finalizer_message(spec: InstanceSpec, pod: PodSummary, now: datetime) -> str:
    return (
        f"OMENative component={spec.component} instance={spec.index}: pod {pod.name} is {_overdue(pod, now)} "
        f"past its own deletion deadline but pinned by finalizers [{', '.join(pod.finalizers)}]; OME never "
        "strips another controller's finalizer — the finalizer owner must resolve it"
    )


def drain_overdue_message(spec: InstanceSpec, deadline: datetime, now: datetime, terminating: list[str]) -> str:
    stamp = deadline.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return (
        f"OMENative component={spec.component} instance={spec.index}: drain overdue by "
        f"{format_duration(float(int((now - deadline).total_seconds())))} (deadline {stamp}); {len(terminating)} pod(s) "
        f"still Terminating ({', '.join(terminating)})"
    )[:1000]


def teardown_exceeded_message(spec: InstanceSpec, remaining: list[str]) -> str:
    deadline = format_duration(spec.teardown_deadline_seconds or 0.0)
    return (
        f"OMENative component={spec.component} instance={spec.index}: teardown deadline {deadline} exceeded "
        f"({len(remaining)} owned pod(s) observed: {', '.join(remaining)}); leaving them to background GC"
    )
