"""How an Instance's pods are doing: readiness levels, failures, holds and losses.

Three levels (spec reference §9): a pod is *ready* when its containers are; it *serves* when
also its `ome.io/serving` gate is True; it is *available* when it serves, is listed on the
Instance's headless Service, is not terminating and has been ready `minReadySeconds`. The
Instance counts at a level when at least its desired pod count qualifies.

Failures are classified from pod and node state (§10/§11): a container stuck in a waiting
reason longer than `stuckPodGracePeriod`, a pod unschedulable longer than
`unschedulableGracePeriod`. Only the revision's own faults *count* toward holding it. Some
waits are not failures but *holds* that stop the readiness clock (quota, room, an unknown
node); and pods that died for reasons outside the revision (terminal, deleted, node lost)
are *losses* that rebuild or recycle the Instance on its stable names.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from models.instance import InstanceFailure, InstanceSpec
from models.pods import PodSummary

# The revision's own faults (§11): retried with back-off, then the revision is held.
COUNTING_REASONS = frozenset(
    {"ImagePullBackOff", "ErrImagePull", "InvalidImageName", "CreateContainerConfigError", "InvalidPodSpec"}
)
# Waiting reasons that make a container "stuck" once they outlast the grace (§10).
STUCK_REASONS = frozenset(
    {
        "ImagePullBackOff",
        "ErrImagePull",
        "InvalidImageName",
        "CreateContainerConfigError",
        "CrashLoopBackOff",
        "CreateContainerError",
        "RunContainerError",
    }
)
# Holds that stop the readiness clock and grant a full window afterwards (§9).
HOLD_QUOTA = "QuotaExceeded"
HOLD_QUOTA_NOT_COUNTED = "QuotaNotCounted"
"""A quota of the namespace its controller has not counted yet (403 `status unknown for quota`:
just created, or a limit on a resource it cannot count): the create waits as for room."""
HOLD_UNSCHEDULABLE = "Unschedulable"
HOLD_POD_GROUP_TERMINATING = "PodGroupTerminating"
HOLD_NODE_UNKNOWN = "NodeUnknown"
HOLD_PAUSED = "Paused"
"""Set by the pause (`planning.instance.pause`), not by the pods: the clock restarts in full on resume."""
HOLD_PAIRING = "Pairing"
"""A rollout run holds the old pod's drain until a same-token engine and decoder pair serves
(an operation's `waiting`, not a readiness hold: the new pod is already serving)."""


def is_counting(reason: str) -> bool:
    return reason in COUNTING_REASONS


@dataclass(frozen=True)
class InstanceLevels:
    """Pod counts at each level and whether the Instance counts at that level."""

    desired: int
    total: int
    ready_pods: int
    serving_pods: int
    available_pods: int
    ready_since: datetime | None
    next_available_at: datetime | None
    """When a serving pod will have been ready `minReadySeconds`: a timer worth setting."""

    @property
    def ready(self) -> bool:
        return self.ready_pods >= self.desired

    @property
    def serving(self) -> bool:
        return self.serving_pods >= self.desired

    @property
    def available(self) -> bool:
        return self.available_pods >= self.desired


def levels(
    pods: Sequence[PodSummary],
    members: Mapping[str, str] | Iterable[str],
    desired: int,
    min_ready_seconds: float,
    now: datetime,
    endpoints_listed: Sequence[str] | None = None,
) -> InstanceLevels:
    """Count the Instance's `members` at each level.

    `members` maps each current pod name to the uid we created (or "" when unknown); a pod
    of that name with another uid is an earlier incarnation seen by a lagging observation
    and must not count, or a restart would look ready before its new pods are.
    """
    wanted = dict(members) if isinstance(members, Mapping) else dict.fromkeys(members, "")
    ready = serving = available = 0
    latest_ready: datetime | None = None
    next_available: datetime | None = None
    for pod in pods:
        if pod.name not in wanted or not pod.is_ready:
            continue
        if wanted[pod.name] and wanted[pod.name] != pod.uid:
            continue
        ready += 1
        since = pod.ready_since or now
        latest_ready = since if latest_ready is None else max(latest_ready, since)
        if not pod.is_serving:
            continue
        serving += 1
        listed = pod.name in endpoints_listed if endpoints_listed is not None else bool(pod.pod_ip)
        if not listed:
            continue
        matured_at = since + timedelta(seconds=min_ready_seconds)
        if min_ready_seconds <= 0 or matured_at <= now:
            available += 1
        elif next_available is None or matured_at < next_available:
            next_available = matured_at
    total = sum(1 for pod in pods if not pod.terminating)
    return InstanceLevels(
        desired=desired,
        total=total,
        ready_pods=ready,
        serving_pods=serving,
        available_pods=available,
        ready_since=latest_ready if ready >= desired else None,
        next_available_at=next_available,
    )


def node_lost(pod: PodSummary) -> bool:
    """The pod's node is gone or not Ready: its containers cannot be trusted to run."""
    if not pod.node_name:
        return False
    return pod.node_missing or pod.node_ready in ("False", "Unknown")


@dataclass
class BringUpAssessment:
    """What the pods of an attempt in progress say (one pass of observation)."""

    failure: InstanceFailure | None = None
    holds: list[str] = field(default_factory=list)
    recycle: list[str] = field(default_factory=list)
    """Pods to delete and create again on their stable names (terminal, node lost)."""
    missing: list[str] = field(default_factory=list)
    """Pods of the attempt that no longer exist (deleted from outside): create them again."""
    wake_at: datetime | None = None
    """The earliest moment a grace period runs out: look again then."""
    first_seen: dict[str, datetime] = field(default_factory=dict)


def _earliest(a: datetime | None, b: datetime) -> datetime:
    return b if a is None or b < a else a


def _container_failure(
    pod: PodSummary, name: str, reason: str, message: str, now: datetime
) -> InstanceFailure:
    exit_code: int | None = None
    for container in pod.containers:
        if container.name == name:
            exit_code = container.last_terminated_exit_code or container.terminated_exit_code
    return InstanceFailure(
        pod_name=pod.name,
        container_name=name,
        reason=reason,
        exit_code=exit_code,
        message=message or f"container {name} of pod {pod.name} is stuck in {reason}",
        time=now,
        counting=is_counting(reason),
    )


def assess_bring_up(
    spec: InstanceSpec,
    pods: Sequence[PodSummary],
    members: dict[str, str],
    first_seen: dict[str, datetime],
    attempt_started_at: datetime,
    now: datetime,
) -> BringUpAssessment:
    """Classify the pods of the attempt in progress.

    `members` maps each pod name of the attempt to the uid we created (empty while the
    create is not confirmed); pods with another uid belong to an earlier attempt and their
    failures are ignored ("a failure recorded before the current attempt is ignored").
    `first_seen` remembers when each waiting condition was first observed, since Kubernetes
    does not date container waiting states; the result carries the updated map.
    """
    result = BringUpAssessment()
    by_name = {pod.name: pod for pod in pods}
    waits = _Waits(first_seen, attempt_started_at, now)
    for name, uid in members.items():
        pod = by_name.get(name)
        if not uid:
            # Not created yet: a pod holding the name is a predecessor we wait for, and one
            # stuck on a dead node stops the clock (NodeUnknown) until it is gone.
            if pod is not None and pod.terminating and node_lost(pod):
                result.holds.append(HOLD_NODE_UNKNOWN)
            continue
        if pod is None or pod.uid != uid or pod.terminating:
            # Our pod is gone (or going): deleted from outside, evicted, garbage-collected.
            result.missing.append(name)
        elif pod.is_terminal:
            result.recycle.append(name)
        elif node_lost(pod):
            result.holds.append(HOLD_NODE_UNKNOWN)
        elif pod.scheduling_gated:
            result.holds.append(HOLD_QUOTA)
        elif not pod.scheduled and pod.unschedulable_reason:
            _unschedulable(result, waits, pod, spec.unschedulable_grace_seconds)
        else:
            _stuck_containers(result, waits, pod, spec.stuck_pod_grace_seconds)
    result.first_seen = waits.seen
    return result


@dataclass
class _Waits:
    """When each waiting condition of an attempt was first seen (never before the attempt)."""

    first_seen: dict[str, datetime]
    started_at: datetime
    now: datetime
    seen: dict[str, datetime] = field(default_factory=dict)

    def since(self, key: str) -> datetime:
        since = max(self.first_seen.get(key, self.now), self.started_at)
        self.seen[key] = since
        return since


def _unschedulable(result: BringUpAssessment, waits: _Waits, pod: PodSummary, grace: float | None) -> None:
    """An unschedulable pod holds the clock; past its grace it fails the attempt."""
    name, now = pod.name, waits.now
    since = waits.since(f"{name}/Unschedulable")
    if grace is not None:
        expires = since + timedelta(seconds=grace)
        if expires <= now and result.failure is None:
            result.failure = InstanceFailure(
                pod_name=name,
                reason="Unschedulable",
                message=pod.unschedulable_message or f"pod {name} could not be scheduled",
                time=now,
            )
        result.wake_at = _earliest(result.wake_at, expires)
    result.holds.append(HOLD_UNSCHEDULABLE)


def _stuck_containers(result: BringUpAssessment, waits: _Waits, pod: PodSummary, grace: float | None) -> None:
    """Containers waiting for a stuck reason fail the attempt once they outlast the grace."""
    now = waits.now
    for container, reason, message in pod.waiting_reasons():
        if reason not in STUCK_REASONS:
            continue
        since = waits.since(f"{pod.name}/{container}/{reason}")
        if grace is None:
            continue
        expires = since + timedelta(seconds=grace)
        if expires <= now:
            candidate = _container_failure(pod, container, reason, message, now)
            # A counting failure names the revision's fault: prefer it when both occur.
            if result.failure is None or (candidate.counting and not result.failure.counting):
                result.failure = candidate
        else:
            result.wake_at = _earliest(result.wake_at, expires)


def _pod_failure(
    name: str, uid: str, pod: PodSummary | None, restart_baseline: dict[str, int], now: datetime
) -> InstanceFailure | None:
    """How member `name` (created as `uid`) of a ready Instance failed, if it did."""
    container_name: str | None = None
    exit_code: int | None = None
    if pod is None or (uid and pod.uid != uid):
        reason, message = "PodDeleted", f"pod {name} was deleted"
    elif pod.terminating:
        reason, message = "PodTerminating", f"pod {name} is being deleted"
    elif pod.is_terminal:
        reason = pod.pod_reason or f"Pod{pod.phase}"
        message = pod.pod_message or f"pod {name} ended in phase {pod.phase}"
    elif node_lost(pod):
        reason, message = "NodeLost", f"node {pod.node_name} of pod {name} is not Ready"
    elif pod.restart_count > restart_baseline.get(name, 0):
        reason, message = "ContainerRestarted", f"a container of pod {name} restarted"
        for container in pod.containers:
            if container.restart_count > 0:
                container_name = container.name
                exit_code = container.last_terminated_exit_code
                reason = container.last_terminated_reason or reason
    else:
        return None
    return InstanceFailure(
        pod_name=name,
        container_name=container_name,
        reason=reason,
        exit_code=exit_code,
        message=message,
        time=now,
    )


@dataclass(frozen=True)
class ReadyAssessment:
    """What went wrong with a ready Instance's pods, if anything."""

    failed_pods: list[str]
    lost_all: bool
    failure: InstanceFailure | None


def assess_ready(
    pods: Sequence[PodSummary],
    members: dict[str, str],
    restart_baseline: dict[str, int],
    now: datetime,
) -> ReadyAssessment:
    """Find pod failures in a ready Instance: a restarted container, a terminal, deleted or
    terminating pod, or a lost node. `restart_baseline` holds each pod's restart count when
    the Instance became ready."""
    by_name = {pod.name: pod for pod in pods}
    failed: list[str] = []
    failure: InstanceFailure | None = None
    for name, uid in members.items():
        found = _pod_failure(name, uid, by_name.get(name), restart_baseline, now)
        if found is None:
            continue
        failed.append(name)
        if failure is None:
            failure = found
    lost_all = bool(members) and all(
        by_name.get(n) is None or by_name[n].terminating or by_name[n].is_terminal or node_lost(by_name[n])
        for n in members
    )
    return ReadyAssessment(failed_pods=failed, lost_all=lost_all, failure=failure)


def restart_counts(pods: Sequence[PodSummary], members: Iterable[str]) -> dict[str, int]:
    wanted = set(members)
    return {pod.name: pod.restart_count for pod in pods if pod.name in wanted}


def pods_on_dead_nodes(pods: Sequence[PodSummary]) -> list[PodSummary]:
    """Terminating pods whose node is gone or not Ready: candidates for force-delete (§15)."""
    return [pod for pod in pods if pod.terminating and node_lost(pod) and not pod.finalizers]
