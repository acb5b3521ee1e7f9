"""Bringing an Instance's pods up: create them, wait until they are ready, put them into rotation.

A mixin of `InstanceWorkflow` (workflows/instance/workflow.py). `bring_up` is the one way pods
come up, for a create, a restart and every kind of update; it answers a `BringUp`, the outcome
and the members it made, and leaves the Instance's state to its caller (`commit_ready` once the
caller accepts them). Each pass of its loop: create what is missing (after the PodGroup, when
the Instance has one), look at the pods, then serve, fail, or wait with the readiness clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from models.duration import format_duration
    from models.instance import InstanceFailure, InstancePhase
    from models.kube_ops import CreatePodsInput, KubeErrorType, SetServingInput
    from planning.instance import rules as policy
    from planning.instance import serving
    from planning.instance.health import (
        HOLD_POD_GROUP_TERMINATING,
        HOLD_QUOTA,
        HOLD_QUOTA_NOT_COUNTED,
        BringUpAssessment,
        assess_bring_up,
        levels,
        restart_counts,
    )
    from planning.instance.pause import is_paused, readiness_holds
    from planning.instance.pods import PodGroupStanding
    from workflows import kube_calls, metrics
    from workflows.instance import versions
    from workflows.instance.teardown import InstanceTeardown

P = InstancePhase
Outcome = InstanceFailure | Literal["ok", "interrupted"]
QUOTA_HOLDS = {KubeErrorType.QUOTA_EXCEEDED.value: HOLD_QUOTA, KubeErrorType.QUOTA_NOT_COUNTED.value: HOLD_QUOTA_NOT_COUNTED}
"""The hold a quota's refusal of a create puts its attempt on."""
QUOTA_RECHECK = timedelta(seconds=30)
"""How soon a create refused for quota is tried again; quota frees without a pod event (and is
counted without one)."""


@dataclass(frozen=True)
class BringUp:
    """What `bring_up` ended with: "ok" (ready and serving), a failure, or "interrupted" (a
    delete or a newer revision arrived), and the members it made (name -> uid, "" when not
    created or gone)."""

    outcome: Outcome
    members: dict[str, str]


@dataclass(frozen=True)
class Made:
    """What one create call made: the pods (name -> uid), and the hold a quota's refusal of the
    rest puts the attempt on (`QuotaExceeded`, `QuotaNotCounted`), if any."""

    members: dict[str, str]
    hold: str | None = None


@dataclass
class Attempt:
    """The running record of one `bring_up`: what it created, what it has seen, its clock."""

    by_name: dict[str, dict[str, Any]]
    members: dict[str, str]
    started: datetime
    clock: policy.ReadinessClock
    pod_group_pending: bool
    """True until the Instance's PodGroup is in place; decided once, when the attempt starts."""
    created_seq: int
    first_seen: dict[str, datetime] = field(default_factory=dict)
    group_checks: int = 0
    group_hold: bool = False
    quota_hold: str | None = None
    """The hold a quota's refusal of the last create puts the attempt on (`QuotaExceeded`, or
    `QuotaNotCounted` under `versions.QUOTA_NOT_COUNTED_WAITS`)."""

    def missing(self) -> list[dict[str, Any]]:
        return [self.by_name[name] for name, uid in self.members.items() if not uid]

    def ended(self, outcome: Outcome) -> BringUp:
        return BringUp(outcome, dict(self.members))


class InstanceBringUp(InstanceTeardown):
    quota_not_counted_waits: bool = False
    """Whether a create refused by a quota not counted yet waits as one refused for room
    (`versions.QUOTA_NOT_COUNTED_WAITS`, decided at the run's start) instead of being retried
    inside its activity call."""
    keeps_partial_create: bool = False
    """Whether a create a quota refused part of keeps the pods it made (`versions.PARTIAL_CREATE_KEPT`,
    decided at the run's start): the next try asks only for the rest."""

    async def bring_up(
        self, manifests: list[dict[str, Any]], members: dict[str, str] | None = None
    ) -> BringUp:
        """Create the pods, wait until they are ready, put them into rotation.

        `members` are pods of these manifests made before (their uids; "" to create again).
        Terminal pods are recycled and pods deleted from outside are created again on their
        stable names; holds stop the readiness clock.
        """
        spec = self.spec
        started = workflow.now()
        attempt = Attempt(
            by_name={m["metadata"]["name"]: m for m in manifests},
            members=dict(members or {}),
            started=started,
            clock=policy.ReadinessClock(started),
            pod_group_pending=self.needs_pod_group(),
            created_seq=self.pods_seq,
        )
        for name in attempt.by_name:
            attempt.members.setdefault(name, "")
        while True:
            since = self.mark()
            if self.interrupted(spec.revision):
                return attempt.ended("interrupted")
            await self.service_due(self.service_retry_in_bring_up())
            failure = await self.create_missing(attempt)
            if failure is not None:
                return attempt.ended(failure)
            now = workflow.now()
            check = await self.look_at_pods(attempt, now)
            if check.missing or check.recycle:
                await self.recycle(attempt, check)
                continue
            attempt.first_seen = check.first_seen
            # Stuck and unschedulable graces keep running during a pause but fire only on resume (§5).
            if check.failure is not None and not is_paused(self.state.pause_mode):
                return attempt.ended(check.failure)
            deadline = self.readiness_deadline(attempt, check, now)
            counts = levels(self.observed(), attempt.members, spec.pod_count, spec.min_ready_seconds, now)
            if counts.ready and all(attempt.members.values()):
                if await self.serve(attempt.members):
                    return attempt.ended("ok")
                continue
            if deadline is not None and now >= deadline:
                return attempt.ended(self.not_ready_in_time(now))
            await self.wait_for_pods(attempt, check, deadline, now, since)

    async def create_missing(self, attempt: Attempt) -> InstanceFailure | None:
        """Create the pods not created yet, after settling the PodGroup they name; notes the
        holds (a terminating PodGroup, quota) on `attempt`."""
        attempt.quota_hold, attempt.group_hold = None, False
        missing = attempt.missing()
        if missing and attempt.pod_group_pending:
            standing = await self.settle_pod_group(list(attempt.by_name.values()))
            if isinstance(standing, InstanceFailure):
                return standing
            attempt.group_checks += 1
            attempt.group_hold = standing == PodGroupStanding.TERMINATING
            attempt.pod_group_pending = attempt.group_hold
        if missing and not attempt.group_hold:
            made = await self.create_pods(missing)
            if isinstance(made, InstanceFailure):
                return made
            attempt.members.update(made.members)
            attempt.quota_hold = made.hold
            attempt.created_seq = self.pods_seq
        return None

    async def look_at_pods(self, attempt: Attempt, now: datetime) -> BringUpAssessment:
        """How the attempt's pods are doing; a pod that looks missing is confirmed with a list."""
        spec = self.spec
        check = assess_bring_up(
            spec, self.observed(), attempt.members, attempt.first_seen, attempt.started, now
        )
        if check.missing and self.pods_seq == attempt.created_seq:
            # No observation since our create yet: the pods are not missing, just unseen.
            check.missing = []
        if check.missing:
            # A watcher signal sent before our create can arrive after it: confirm with a list.
            fresh = await self.refresh_pods()
            check = assess_bring_up(
                spec, fresh.pods, attempt.members, attempt.first_seen, attempt.started, now
            )
        return check

    async def recycle(self, attempt: Attempt, check: BringUpAssessment) -> None:
        """Delete terminal pods; they and the missing ones are created again on their names."""
        for name in check.recycle:
            await self.event("TerminalPodRecycled", policy.terminal_pod_recycled_message(self.spec, name))
            await self.delete_pods({name: attempt.members[name]}, "recycle terminal pod")
        for name in check.missing + check.recycle:
            attempt.members[name] = ""

    def readiness_deadline(
        self, attempt: Attempt, check: BringUpAssessment, now: datetime
    ) -> datetime | None:
        """Advance the readiness clock by the holds in force; its deadline, shown as progress."""
        holds = ([HOLD_POD_GROUP_TERMINATING] if attempt.group_hold else []) + check.holds
        holds += [attempt.quota_hold] if attempt.quota_hold else []
        # A pause stops the readiness clock too, and shows as the operation's `waiting` (§5).
        holds = readiness_holds(self.state.pause_mode) + holds
        attempt.clock = attempt.clock.observe(holds, now)
        deadline = attempt.clock.deadline(self.spec.instance_ready_timeout_seconds)
        self.progress("CreatePods", deadline, attempt.clock.hold)
        return deadline

    def not_ready_in_time(self, now: datetime) -> InstanceFailure:
        spec = self.spec
        timeout = format_duration(spec.instance_ready_timeout_seconds or 0.0)
        return InstanceFailure(
            reason="DeadlineExceeded",
            message=f"Instance {spec.instance_name} was not ready within instanceReadyTimeout {timeout}",
            time=now,
        )

    async def wait_for_pods(
        self,
        attempt: Attempt,
        check: BringUpAssessment,
        deadline: datetime | None,
        now: datetime,
        since: tuple[int, int],
    ) -> None:
        """Force-delete what holds our names on a dead node, then wait for news or a deadline."""
        occupied = {name for name, uid in attempt.members.items() if not uid}
        if occupied:
            # An earlier incarnation still holds these names, maybe on a dead node.
            await self.force_delete_stuck(occupied, now)
        wakes = [t for t in (check.wake_at, deadline, self.service_retry_in_bring_up()) if t is not None]
        if attempt.quota_hold or occupied:
            wakes.append(now + QUOTA_RECHECK)
        if attempt.group_hold:
            wakes.append(now + timedelta(seconds=policy.pod_group_recheck_seconds(attempt.group_checks)))
        await self.wait_for_news(self.next_force_delete(occupied, now, min(wakes) if wakes else None), since)

    async def create_pods(self, manifests: list[dict[str, Any]]) -> InstanceFailure | Made:
        """Create the not-yet-created pods: the ones made, and the hold when a quota refused
        them (all of them, unless `keeps_partial_create`: the rest)."""
        spec = self.spec
        incarnation = manifests[0]["metadata"]["labels"].get("ome.io/incarnation", "?")
        gate = None
        if self.serving_at_create and serving.serves_when_ready(spec, self.state.draining):
            gate = SetServingInput(
                namespace=spec.namespace, pods=[], serving=True, reason=serving.REASON, message=serving.message(spec)
            )
        try:
            result = await kube_calls.create_pods(
                CreatePodsInput(
                    namespace=spec.namespace, pods=manifests, serving=gate, partial_on_quota=self.keeps_partial_create
                ),
                summary=(
                    f"create {len(manifests)} pods for {spec.instance_name} "
                    f"(revision {spec.revision[:4]}), incarnation {incarnation}"
                    + (", serving once ready" if gate is not None else "")
                ),
                local=self.local_kube,
                surface=(KubeErrorType.QUOTA_NOT_COUNTED,) if self.quota_not_counted_waits else (),
            )
        except ActivityError as error:
            kind = kube_calls.error_type(error)
            message = str(error.cause or error)[:1000]
            hold = QUOTA_HOLDS.get(str(kind))
            if hold is not None:
                return Made({}, hold)
            if kind == KubeErrorType.INVALID:
                # The API server refuses the revision's own pod spec: its fault, it counts.
                return InstanceFailure(
                    reason="InvalidPodSpec", message=message, time=workflow.now(), counting=True
                )
            # Forbidden, NameTaken, a missing namespace: the attempt fails, the Instance lives on.
            return InstanceFailure(reason=str(kind or "CreateFailed"), message=message, time=workflow.now())
        self.gated_at_create |= {pod.uid for pod in result.pods if pod.gated}
        # A terminating pod with the same labels is a predecessor: wait for it, never adopt it.
        members = {
            pod.name: pod.uid
            for pod in result.pods
            if pod.outcome in ("created", "exists") and not pod.terminating
        }
        return Made(members, QUOTA_HOLDS.get(str(result.refused)) if result.refused is not None else None)

    async def serve(self, members: dict[str, str]) -> bool:
        """Ready: into rotation (unless draining); remembers the restart counts seen ready."""
        at_ready = (dict(members), restart_counts(self.observed(), members))
        if self.state.draining or await self.start_serving(members):
            self.ready_counts = at_ready
            return True
        return False

    async def start_serving(self, members: dict[str, str]) -> bool:
        """Set `ome.io/serving` True and wait to see it; False if the pods stopped being ready.
        Pods this run created with the gate (`gated_at_create`) need no write, only the wait."""
        spec = self.spec
        if not set(members.values()) <= self.gated_at_create:
            await self.write_serving(members)
        while True:
            since = self.mark()
            counts = levels(self.observed(), members, spec.pod_count, 0.0, workflow.now())
            if counts.serving:
                return True
            if not counts.ready or self.interrupted(spec.revision):
                return False
            # Only until the kubelet marks the pods Ready with the gate: the step after this
            # reports the Instance serving, so a report of the moment between is not needed,
            # and the bring-up's timer (its readiness deadline) is kept as it runs.
            hold = self.waits.running() is not None and self.takes(versions.MOMENT_KEEPS_TIMER)
            await self.wait_for_news(None, since, report=False, hold=hold)

    async def write_serving(self, members: dict[str, str]) -> None:
        """Put `members` into rotation: their `ome.io/serving` gate True."""
        spec = self.spec
        await kube_calls.set_serving(
            SetServingInput(
                namespace=spec.namespace,
                pods=sorted(members),
                serving=True,
                reason="InstanceReady",
                uids=members,
                write_only=self.local_kube,
                current=self.serving_now(members) if self.local_kube else {},
            ),
            summary=f"put {spec.instance_name} into rotation ({len(members)} pods)",
            local=self.local_kube,
        )

    def commit_ready(self, members: dict[str, str]) -> None:
        """Ready and serving: `members` are the Instance's pods now, at the target revision."""
        state = self.state
        now = workflow.now()
        state.members = dict(members)
        state.running_spec = state.spec
        state.running_revision = state.spec.revision
        seen_ready, self.ready_counts = self.ready_counts, None
        if seen_ready is not None and seen_ready[0] == members:
            state.restart_baseline = dict(seen_ready[1])
        else:
            state.restart_baseline = restart_counts(self.observed(), members)
        counts = levels(self.observed(), members, state.spec.pod_count, 0.0, now)
        state.ready_since = counts.ready_since or now
        state.failures_in_a_row = 0
        state.rebuild_at = None
        state.first_seen = {}
        if state.retry_block is not None and state.retry_block.target_revision == state.spec.revision:
            state.retry_block = None
        if state.operation is not None and state.operation.type == "Create":
            spec = state.spec
            metrics.instance_serving(spec.namespace, spec.isvc, spec.component, now - state.operation.started_at)
        state.operation = None
        self.set_phase(P.READY)
