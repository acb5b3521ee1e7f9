"""The Instance workflow's operations: create, restart, update, drain, delete.

A mixin of `InstanceWorkflow` (workflows/instance/workflow.py), split out to keep each module short.
Each operation is a straight pipeline with early returns; the rules it follows come from
`planning.instance_*`, and every Kubernetes write goes through `workflows.kube_calls` with a
summary a person can read in the Temporal UI.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Literal

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from models.duration import format_duration
    from models.instance import (
        PARENT_SIGNAL_INSTANCE_CHANGED,
        DeleteRequest,
        InstanceFailure,
        InstanceOperation,
        InstancePhase,
        InstanceSpec,
        RetryBlockState,
    )
    from models.kube_ops import (
        ApplyObjectInput,
        CrdExistsInput,
        CreatePodsInput,
        DeletePodsInput,
        ForceDeletePodInput,
        KubeErrorType,
        ListInstancePodsInput,
        PodsGoneInput,
        SetServingInput,
    )
    from models.pods import InstancePods, PodSummary
    from planning.instance import rules as policy
    from planning.instance.health import (
        HOLD_POD_GROUP_TERMINATING,
        HOLD_QUOTA,
        assess_bring_up,
        levels,
        restart_counts,
    )
    from planning.instance.pause import is_paused, readiness_holds
    from planning.instance.pods import POD_GROUP_LABEL, PodGroupStanding, render_headless_service
    from planning.instance.state import InstanceState, build_status, newer_observation, report_fingerprint
    from workflows import kube_calls, search_attributes, waiting
    from workflows.events import EventType, isvc_ref, record_event
    from workflows.instance import gang as instance_gang
    from workflows.parent import signal_parent

P = InstancePhase
Outcome = InstanceFailure | Literal["ok", "interrupted"]
QUOTA_RECHECK = timedelta(seconds=30)
"""How soon a create refused for quota is tried again; quota frees without a pod event."""


class InstanceOperations:
    state: InstanceState
    pods_seq: int
    inbox_seq: int
    last_report: tuple[object, ...] | None
    ready_counts: tuple[dict[str, str], dict[str, int]] | None = None
    """The members `bring_up` last saw ready and their restart counts at that moment.
    `commit_ready` starts the restart baseline from them: a container that restarts later in
    the operation (while the old pod of a surge drains, say) must still count as a restart."""
    listed_at: tuple[int, int] | None = None
    """`mark()` right after a pod list taken ahead of need (the run's first task lists a
    creating Instance's pods beside its Service); `live_pods` uses that list while nothing
    has arrived since, instead of listing again."""

    # --- small helpers --------------------------------------------------------------

    @property
    def spec(self) -> InstanceSpec:
        return self.state.spec

    def render_spec(self) -> InstanceSpec:
        """The spec as rendered: without the PodGroup label when the CRD is missing."""
        return self.spec.model_copy(update={"gang_scheduling": bool(self.state.pod_group_crd)})

    def observed(self) -> tuple[PodSummary, ...]:
        return self.state.pods.pods if self.state.pods is not None else ()

    def set_phase(self, phase: InstancePhase) -> None:
        policy.check_transition(self.state.phase, phase)
        if phase == self.state.phase:
            return
        self.state.phase = phase
        workflow.upsert_search_attributes([search_attributes.PHASE.value_set(phase.value)])

    def begin(self, kind: Literal["Create", "Update", "Restart", "Migrate", "Delete"], step: str) -> None:
        self.state.operation_counter += 1
        self.state.operation = InstanceOperation(
            id=f"{kind.lower()}-{self.state.operation_counter}",
            type=kind,
            step=step,
            started_at=workflow.now(),
            target_revision=self.spec.revision,
            strategy=self.spec.update_strategy_type if kind == "Update" else None,
        )

    def progress(self, step: str, deadline: datetime | None = None, waiting: str | None = None) -> None:
        if self.state.operation is not None:
            self.state.operation = self.state.operation.model_copy(
                update={
                    "step": step,
                    "last_progress_at": workflow.now(),
                    "deadline": deadline,
                    "waiting": waiting,
                }
            )

    async def refresh_pods(self) -> InstancePods:
        """List the pods afresh; the newest observation we hold afterwards.

        A `pods_changed` signal can arrive while the list runs, reporting a change made after
        the list read (the pod became Ready, say). The list's answer is then older and must
        not replace it: the watcher sends each summary once, so the change would never be
        reported again and the Instance would wait for a wake-up it already had.
        """
        spec = self.spec
        listed = await kube_calls.list_instance_pods(
            ListInstancePodsInput(
                namespace=spec.namespace, isvc=spec.isvc, component=spec.component, index=spec.index
            ),
            summary=f"list pods of {spec.instance_name}",
        )
        if newer_observation(listed, self.state.pods):
            self.state.pods = listed
            self.pods_seq += 1
        return self.state.pods or listed

    def mark(self) -> tuple[int, int]:
        """Where the observations and requests stand; take it *before* looking at them."""
        return (self.pods_seq, self.inbox_seq)

    async def wait_for_news(
        self, until: datetime | None, since: tuple[int, int], report: bool = True
    ) -> None:
        """Sleep until a pod observation or a request newer than `since` arrives, `until`, or
        the safety re-list. `since` is the mark taken before the caller looked, so news that
        came in while it was busy (during an activity, say) wakes it at once instead of being
        waited for a second time. The parent hears the latest first, unless the wait is a
        moment's (`report=False`) and the caller reports right after it anyway."""
        if report:
            await self.report()
        pods_seq, inbox_seq = since
        safety = timedelta(seconds=self.spec.safety_recheck_seconds)
        if await waiting.wait_for_news(
            lambda: self.pods_seq != pods_seq or self.inbox_seq != inbox_seq, until, safety
        ):
            await self.refresh_pods()

    async def event(self, reason: str, message: str, kind: EventType = "Warning") -> None:
        spec = self.spec
        involved = isvc_ref(spec.isvc, spec.namespace, spec.isvc_uid)
        await record_event(involved, reason, message, kind, summary=f"event {reason} for {spec.instance_name}")

    def interrupted(self, target_revision: str) -> bool:
        pending = self.state.pending_update
        return self.state.pending_delete is not None or (
            pending is not None and pending.revision != target_revision
        )

    async def report(self) -> None:
        """Tell the parent InferenceReplica when something it counts has changed."""
        status = build_status(self.state, workflow.now())
        fingerprint = report_fingerprint(status)
        if fingerprint == self.last_report:
            return
        parent = self.state.spec.parent_workflow_id
        info_parent = workflow.info().parent
        if parent is None and info_parent is not None:
            parent = info_parent.workflow_id
        if parent is None:
            self.last_report = fingerprint
            return
        if await signal_parent(parent, PARENT_SIGNAL_INSTANCE_CHANGED, status):
            self.last_report = fingerprint

    # --- setup ----------------------------------------------------------------------

    async def prepare(self) -> None:
        """The Instance's headless Service, and whether the PodGroup CRD exists.

        The PodGroup itself is made by `bring_up`, before the pods that name it: a PodGroup
        of an earlier Instance on this name may still be terminating then, or taken.
        """
        spec = self.spec
        try:
            await kube_calls.apply_object(
                ApplyObjectInput(manifest=render_headless_service(spec)),
                summary=f"apply headless Service {spec.instance_name}",
            )
        except ActivityError as error:
            # Without it the leader has no DNS name and "available" never holds; the pods can
            # still be created and serve through the component's Service, so say so and go on.
            await self.event(
                "HeadlessServiceFailed", f"headless Service {spec.instance_name}: {error.cause or error}"
            )
        if not (spec.multi_pod and spec.gang_scheduling):
            return
        if self.state.pod_group_crd is None:
            found = await kube_calls.crd_exists(CrdExistsInput(), summary="check the PodGroup CRD")
            self.state.pod_group_crd = found.exists
            self.state.gang_unavailable = not found.exists

    def needs_pod_group(self) -> bool:
        spec = self.spec
        return spec.multi_pod and spec.gang_scheduling and bool(self.state.pod_group_crd)

    async def settle_pod_group(self, manifests: list[dict[str, Any]]) -> PodGroupStanding | InstanceFailure:
        """`instance_gang.settle_pod_group`; if the PodGroup cannot be read or written, the
        pods schedule without the gang rather than not at all, and an event says so."""
        spec = self.spec
        try:
            return await instance_gang.settle_pod_group(spec)
        except ActivityError as error:
            self.state.pod_group_crd = False
            self.state.gang_unavailable = True
            for manifest in manifests:
                manifest["metadata"]["labels"].pop(POD_GROUP_LABEL, None)
            await self.event("PodGroupFailed", f"PodGroup {spec.instance_name}: {error.cause or error}")
            return PodGroupStanding.ABSENT

    async def delete_own_pod_group(self) -> None:
        await instance_gang.delete_own_pod_group(self.spec)

    # --- bringing pods up -----------------------------------------------------------

    async def create_pods(self, manifests: list[dict[str, Any]], members: dict[str, str]) -> Outcome | None:
        """Create the not-yet-created pods; None when some wait on quota."""
        spec = self.spec
        incarnation = manifests[0]["metadata"]["labels"].get("ome.io/incarnation", "?")
        try:
            result = await kube_calls.create_pods(
                CreatePodsInput(namespace=spec.namespace, pods=manifests),
                summary=(
                    f"create {len(manifests)} pods for {spec.instance_name} "
                    f"(revision {spec.revision[:4]}), incarnation {incarnation}"
                ),
            )
        except ActivityError as error:
            kind = kube_calls.error_type(error)
            message = str(error.cause or error)[:1000]
            if kind == KubeErrorType.QUOTA_EXCEEDED:
                return None
            if kind == KubeErrorType.INVALID:
                # The API server refuses the revision's own pod spec: its fault, it counts.
                return InstanceFailure(
                    reason="InvalidPodSpec", message=message, time=workflow.now(), counting=True
                )
            # Forbidden, NameTaken, a missing namespace: the attempt fails, the Instance lives on.
            return InstanceFailure(reason=str(kind or "CreateFailed"), message=message, time=workflow.now())
        for pod in result.pods:
            # A terminating pod with the same labels is a predecessor: wait for it, never adopt it.
            if pod.outcome in ("created", "exists") and not pod.terminating:
                members[pod.name] = pod.uid
        return "ok"

    async def bring_up(self, manifests: list[dict[str, Any]], members: dict[str, str]) -> Outcome:
        """Create the pods, wait until they are ready, put them into rotation.

        Ends with "ok" (ready and serving), a failure, or "interrupted" when a delete or a
        newer revision arrived. Terminal pods are recycled and pods deleted from outside are
        created again on their stable names; holds stop the readiness clock.
        """
        spec = self.spec
        by_name = {m["metadata"]["name"]: m for m in manifests}
        for name in by_name:
            members.setdefault(name, "")
        started = workflow.now()
        clock = policy.ReadinessClock(started)
        first_seen: dict[str, datetime] = {}
        created_seq = self.pods_seq
        group_settled = not self.needs_pod_group()
        group_checks = 0
        while True:
            since = self.mark()
            if self.interrupted(spec.revision):
                return "interrupted"
            quota_hold = group_hold = False
            missing = [by_name[n] for n, uid in members.items() if not uid]
            if missing and not group_settled:
                standing = await self.settle_pod_group(list(by_name.values()))
                if isinstance(standing, InstanceFailure):
                    return standing
                group_checks += 1
                group_hold = standing == PodGroupStanding.TERMINATING
                group_settled = not group_hold
            if missing and not group_hold:
                created = await self.create_pods(missing, members)
                if isinstance(created, InstanceFailure):
                    return created
                quota_hold = created is None
                created_seq = self.pods_seq
            now = workflow.now()
            check = assess_bring_up(spec, self.observed(), members, first_seen, started, now)
            if check.missing and self.pods_seq == created_seq:
                # No observation since our create yet: the pods are not missing, just unseen.
                check.missing = []
            if check.missing:
                # A watcher signal sent before our create can arrive after it: confirm with a list.
                fresh = await self.refresh_pods()
                check = assess_bring_up(spec, fresh.pods, members, first_seen, started, now)
            if check.missing or check.recycle:
                for name in check.recycle:
                    await self.event("TerminalPodRecycled", policy.terminal_pod_recycled_message(spec, name))
                    await self.delete_pods({name: members[name]}, "recycle terminal pod")
                for name in check.missing + check.recycle:
                    members[name] = ""
                continue
            first_seen = check.first_seen
            # Stuck and unschedulable graces keep running during a pause but fire only on resume (§5).
            if check.failure is not None and not is_paused(self.state.pause_mode):
                return check.failure
            holds = ([HOLD_POD_GROUP_TERMINATING] if group_hold else []) + check.holds
            holds += [HOLD_QUOTA] if quota_hold else []
            # A pause stops the readiness clock too, and shows as the operation's `waiting` (§5).
            holds = readiness_holds(self.state.pause_mode) + holds
            clock = clock.observe(holds, now)
            deadline = clock.deadline(spec.instance_ready_timeout_seconds)
            self.progress("CreatePods", deadline, clock.hold)
            counts = levels(self.observed(), members, spec.pod_count, spec.min_ready_seconds, now)
            if counts.ready and all(members.values()):
                at_ready = (dict(members), restart_counts(self.observed(), members))
                if self.state.draining or await self.start_serving(members):
                    self.ready_counts = at_ready
                    return "ok"
                continue
            if deadline is not None and now >= deadline:
                timeout = format_duration(spec.instance_ready_timeout_seconds or 0.0)
                return InstanceFailure(
                    reason="DeadlineExceeded",
                    message=f"Instance {spec.instance_name} was not ready within instanceReadyTimeout {timeout}",
                    time=now,
                )
            occupied = {name for name, uid in members.items() if not uid}
            if occupied:
                # An earlier incarnation still holds these names, maybe on a dead node.
                await self.force_delete_stuck(occupied, now)
            wakes = [t for t in (check.wake_at, deadline) if t is not None]
            if quota_hold or occupied:
                wakes.append(now + QUOTA_RECHECK)
            if group_hold:
                wakes.append(now + timedelta(seconds=policy.pod_group_recheck_seconds(group_checks)))
            await self.wait_for_news(
                self.next_force_delete(occupied, now, min(wakes) if wakes else None), since
            )

    async def start_serving(self, members: dict[str, str]) -> bool:
        """Set `ome.io/serving` True and wait to see it; False if the pods stopped being ready."""
        spec = self.spec
        await kube_calls.set_serving(
            SetServingInput(
                namespace=spec.namespace,
                pods=sorted(members),
                serving=True,
                reason="InstanceReady",
                uids=members,
            ),
            summary=f"put {spec.instance_name} into rotation ({len(members)} pods)",
        )
        while True:
            since = self.mark()
            counts = levels(self.observed(), members, spec.pod_count, 0.0, workflow.now())
            if counts.serving:
                return True
            if not counts.ready or self.interrupted(spec.revision):
                return False
            # Only until the kubelet marks the pods Ready with the gate: the step after this
            # reports the Instance serving, so a report of the moment between is not needed.
            await self.wait_for_news(None, since, report=False)

    def commit_ready(self, members: dict[str, str]) -> None:
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
        state.operation = None
        self.set_phase(P.READY)

    # --- taking pods down -----------------------------------------------------------

    async def delete_pods(self, targets: dict[str, str], why: str) -> None:
        if not targets:
            return
        spec = self.spec
        await kube_calls.delete_pods(
            DeletePodsInput(
                namespace=spec.namespace, names=sorted(targets), uids={n: u for n, u in targets.items() if u}
            ),
            summary=f"delete {len(targets)} pods of {spec.instance_name} ({why})",
        )

    async def take_out_of_rotation(self, reason: str, targets: dict[str, str] | None = None) -> None:
        spec = self.spec
        pods = self.state.members if targets is None else targets
        if targets is None:
            self.state.draining = True
        if not pods:
            return
        await kube_calls.set_serving(
            SetServingInput(
                namespace=spec.namespace, pods=sorted(pods), serving=False, reason=reason, uids=pods
            ),
            summary=f"take {spec.instance_name} out of rotation ({len(pods)} pods, {reason})",
        )

    async def teardown(self, targets: dict[str, str], drain_seconds: float, reason: str) -> list[str]:
        """Drain, delete, and wait until the pods are gone; the pods left at the deadline."""
        spec = self.spec
        if not targets:
            return []
        await self.take_out_of_rotation(reason, targets)
        if drain_seconds > 0:
            self.progress("Drain")
            await workflow.sleep(timedelta(seconds=drain_seconds))
        await self.delete_pods(targets, reason)
        self.progress("DeletePods")
        deadline = (
            workflow.now() + timedelta(seconds=spec.teardown_deadline_seconds)
            if spec.teardown_deadline_seconds
            else None
        )
        uids = {n: u for n, u in targets.items() if u}
        while True:
            since = self.mark()
            gone = await kube_calls.pods_gone(
                PodsGoneInput(namespace=spec.namespace, names=sorted(targets), uids=uids),
                summary=f"check {len(targets)} pods of {spec.instance_name} are gone",
            )
            if gone.all_gone:
                return []
            now = workflow.now()
            await self.force_delete_stuck(set(gone.remaining), now)
            if deadline is not None and now >= deadline:
                await self.event(
                    "TeardownDeadlineExceeded", policy.teardown_exceeded_message(spec, gone.remaining)
                )
                return gone.remaining
            await self.wait_for_news(self.next_force_delete(set(gone.remaining), now, deadline), since)

    async def force_delete_stuck(self, names: set[str], now: datetime) -> None:
        spec = self.spec
        if spec.force_delete is None:
            return
        for pod in self.observed():
            evidence = (
                policy.force_delete_evidence(pod, spec.force_delete, now) if pod.name in names else None
            )
            if evidence is None:
                continue
            await kube_calls.force_delete_pod(
                ForceDeletePodInput(namespace=spec.namespace, name=pod.name, uid=pod.uid),
                summary=f"force-delete {pod.name} stuck on node {pod.node_name} ({evidence})",
            )
            await self.event("PodForceDeleted", policy.force_deleted_message(spec, pod, evidence, now))

    def next_force_delete(self, names: set[str], now: datetime, other: datetime | None) -> datetime | None:
        """`other`, or sooner when a stuck pod becomes eligible for force-delete before it."""
        wakes = [other] if other is not None else []
        for pod in self.observed():
            due = policy.force_delete_due_at(pod, self.spec.force_delete) if pod.name in names else None
            if due is not None:
                wakes.append(max(due, now + timedelta(seconds=1)))
        return min(wakes) if wakes else None

    async def live_pods(self) -> dict[str, str]:
        """Every pod of this Instance that exists now, whatever its incarnation or ordinal."""
        listed_at, self.listed_at = self.listed_at, None
        if listed_at is not None and listed_at == self.mark() and self.state.pods is not None:
            return {pod.name: pod.uid for pod in self.state.pods.pods}
        fresh = await self.refresh_pods()
        return {pod.name: pod.uid for pod in fresh.pods}

    async def list_ahead(self) -> None:
        """List the pods now for a create that comes next (see `listed_at`)."""
        await self.refresh_pods()
        self.listed_at = self.mark()

    # --- failure --------------------------------------------------------------------

    async def fail_create(self, failure: InstanceFailure, members: dict[str, str]) -> None:
        """A failed Create: rebuilt after back-off, unless the Instance already ran the target.

        Then (§9 "already ran target → stays Failed until pods ready") the revision is not at
        fault, so the failure does not count toward holding it, and the pods are kept: the
        Instance returns to Ready when they come up, without rebuilding meanwhile.
        """
        state = self.state
        created = any(members.values())
        if policy.keeps_failed_attempt(state.running_revision, state.spec.revision, created):
            state.members = dict(members)
            failure = failure.model_copy(update={"counting": False})
            await self.fail_attempt(failure, members, keep_pods=True)
            return
        await self.fail_attempt(failure, members, keep_pods=False)

    async def fail_attempt(self, failure: InstanceFailure, members: dict[str, str], keep_pods: bool) -> None:
        """Record a failed attempt: retry block or rebuild back-off, events, phase Failed."""
        state, spec = self.state, self.spec
        now = workflow.now()
        state.last_failure = failure
        await self.event(
            "InstanceFailed", policy.instance_failed_message(spec, failure.reason, failure.message)
        )
        # A gang surge target gives up only until it first serves: once it has taken over
        # (its source drained), a later failure is its own, handled like any Instance's.
        if spec.gang_surge_of is not None and state.running_revision is None:
            await self.event("GangSurgeAbandoned", policy.gang_surge_abandoned_message(spec, failure.reason))
            state.abandoned = True
            state.pending_delete = DeleteRequest(reason="GangSurgeAbandoned", drain_seconds=0.0)
        if failure.counting:
            block = policy.record_counting_failure(
                state.retry_block, spec.update_retry, spec.revision, failure.reason, now
            )
            state.retry_block = block
            if block.state == RetryBlockState.HELD:
                await self.event(
                    "RetryHeld", policy.retry_held_message(spec, block.attempts_started, failure.reason)
                )
        elif not keep_pods:
            state.failures_in_a_row += 1
            state.rebuild_at = now + timedelta(seconds=policy.rebuild_delay_seconds(state.failures_in_a_row))
        if not keep_pods:
            await self.delete_pods(members, f"failed attempt: {failure.reason}")
            members.clear()
        state.operation = None
