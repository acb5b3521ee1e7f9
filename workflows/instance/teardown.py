"""Taking an Instance's pods down: out of rotation, drained, deleted, force-deleted when stuck on
a dead node; and recording a failed attempt, which takes its pods down unless they are kept.

A mixin of `InstanceWorkflow` (workflows/instance/workflow.py), between the shared helpers of
`workflows/instance/operations.py` and the bring-up of `workflows/instance/bring_up.py`.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from models.instance import DeleteRequest, InstanceFailure, RetryBlockState
    from models.kube_ops import DeletePodsInput, ForceDeletePodInput, PodsGoneInput, SetServingInput
    from planning.instance import rules as policy
    from planning.instance.pods import still_present
    from workflows import kube_calls
    from workflows.instance import versions
    from workflows.instance.operations import InstanceOperations

OVERDUE_NOTICE = timedelta(seconds=1)


class InstanceTeardown(InstanceOperations):
    blocked_by_finalizer: set[str]
    """Uids of pods reported `PodDeleteBlockedByFinalizer` in this run (the workflow's __init__)."""

    async def delete_pods(
        self, targets: dict[str, str], why: str, out_of_rotation: SetServingInput | None = None
    ) -> list[str]:
        """Delete `targets` (name -> uid), after taking `out_of_rotation`'s pods out of rotation
        in the same call when given; the ones deleted now (the rest were gone already)."""
        if not targets:
            return []
        spec = self.spec
        first = "take out of rotation and " if out_of_rotation is not None else ""
        result = await kube_calls.delete_pods(
            DeletePodsInput(
                namespace=spec.namespace,
                names=sorted(targets),
                uids={n: u for n, u in targets.items() if u},
                out_of_rotation=out_of_rotation,
            ),
            summary=f"{first}delete {len(targets)} pods of {spec.instance_name} ({why})",
            local=self.local_kube,
        )
        return result.deleted

    async def take_out_of_rotation(self, reason: str, targets: dict[str, str] | None = None) -> None:
        spec = self.spec
        pods = self.state.members if targets is None else targets
        if targets is None:
            self.state.draining = True
        if not pods:
            return
        await kube_calls.set_serving(
            self.out_of_rotation(reason, pods),
            summary=f"take {spec.instance_name} out of rotation ({len(pods)} pods, {reason})",
            local=self.local_kube,
        )

    def out_of_rotation(self, reason: str, pods: dict[str, str]) -> SetServingInput:
        """The write that takes `pods` (name -> uid) out of rotation."""
        self.gated_at_create -= set(pods.values())  # back into rotation means a write again
        return SetServingInput(
            namespace=self.spec.namespace,
            pods=sorted(pods),
            serving=False,
            reason=reason,
            uids=pods,
            write_only=self.local_kube,
            current=self.serving_now(pods) if self.local_kube else {},
        )

    async def teardown(
        self,
        targets: dict[str, str],
        drain_seconds: float,
        reason: str,
        deleting: bool = False,
        overdue_by_parent: bool = False,
        parent_overdue_at: datetime | None = None,
    ) -> list[str]:
        """Drain, delete, and wait until the pods are gone; the pods left at the deadline.

        `deleting`: the Instance's own deletion (§15). It has no deadline of its own then (the
        InferenceReplica's teardown deadline bounds a deletion of the whole component); past
        its start + `instanceReadyTimeout` the drain is overdue (`DrainOverdue`, once), which
        never fails it: it keeps waiting for its pods. `overdue_by_parent`: the parent counting
        the deletion said when its drain is overdue (`parent_overdue_at`, None for never), which
        is taken as it is.
        """
        spec = self.spec
        if not targets:
            return []
        # With no drain pause, out of rotation and delete are one call (RETIRE_IN_ONE_CALL).
        at_once = drain_seconds <= 0 and self.local_kube and self.takes(versions.RETIRE_IN_ONE_CALL)
        if not at_once:
            await self.take_out_of_rotation(reason, targets)
        if drain_seconds > 0:
            self.progress("Drain")
            await workflow.sleep(timedelta(seconds=drain_seconds))
        # Marked before the delete: an observation that arrives while it runs (a watcher signal
        # already reporting pods removed) is newer than the delete's start, so it counts.
        deleted_at = self.pods_seq
        gate = self.out_of_rotation(reason, targets) if at_once else None
        deleted = await self.delete_pods(targets, reason, gate)
        if deleting and len(deleted) > 1 and self.takes(versions.DELETED_PODS_TERMINATING):
            self.state.deleted_uids = sorted(targets[name] for name in deleted if targets[name])
        deadline: datetime | None = None
        overdue_at: datetime | None = None
        operation = self.state.operation
        if deleting and operation is not None and self.takes(versions.DRAIN_OVERDUE):
            overdue_at = (
                parent_overdue_at
                if overdue_by_parent
                else policy.drain_deadline(operation.started_at, spec.instance_ready_timeout_seconds)
            )
        elif spec.teardown_deadline_seconds:
            deadline = workflow.now() + timedelta(seconds=spec.teardown_deadline_seconds)
        self.progress("DeletePods", overdue_at)
        uids = {n: u for n, u in targets.items() if u}
        while True:
            since = self.mark()
            if self.local_kube:
                remaining = self.remaining_after_delete(targets, deleted, deleted_at)
            else:
                gone = await kube_calls.pods_gone(
                    PodsGoneInput(namespace=spec.namespace, names=sorted(targets), uids=uids),
                    summary=f"check {len(targets)} pods of {spec.instance_name} are gone",
                )
                remaining = gone.remaining
            if not remaining:
                return []
            now = workflow.now()
            if self.local_kube and self.due(now, deadline, overdue_at):
                # Woken by the deadline, not by news: what we hold may predate a lost 'gone'
                # signal. Read afresh before declaring the pods stuck or force-deleting them.
                await self.refresh_pods(endpoints=False)
                remaining = self.remaining_after_delete(targets, deleted, deleted_at)
                if not remaining:
                    return []
            await self.force_delete_stuck(set(remaining), now)
            if deadline is not None and now >= deadline:
                await self.event("TeardownDeadlineExceeded", policy.teardown_exceeded_message(spec, remaining))
                return remaining
            if overdue_at is not None and now > overdue_at:
                await self.event("DrainOverdue", policy.drain_overdue_message(spec, overdue_at, now, remaining))
                overdue_at = None
            # An overdue drain is noticed a second after its deadline, so it is overdue by something.
            wake = overdue_at + OVERDUE_NOTICE if overdue_at is not None else deadline
            await self.wait_for_news(self.next_force_delete(set(remaining), now, wake), since)

    @staticmethod
    def due(now: datetime, deadline: datetime | None, overdue_at: datetime | None) -> bool:
        """Whether the teardown deadline has passed or the drain is overdue at `now`."""
        return (deadline is not None and now >= deadline) or (overdue_at is not None and now > overdue_at)

    def remaining_after_delete(self, targets: dict[str, str], deleted: list[str], deleted_at: int) -> list[str]:
        """Which of `targets` still exist, from what we know without asking the API server (from
        `LOCAL_KUBE_CALLS` on): the pods the delete found gone are gone; the others until an
        observation that came after the delete (a watcher signal, the safety re-list) no longer
        lists them. Until then they are all there: they were terminating a moment ago."""
        present = {name: targets[name] for name in deleted}
        if self.pods_seq == deleted_at:
            return sorted(present)
        return still_present(self.observed(), present)

    async def force_delete_stuck(self, names: set[str], now: datetime) -> None:
        """Force-delete the pods among `names` stuck on a dead node; one pinned by finalizers is
        never touched (`PodDeleteBlockedByFinalizer`, once per pod)."""
        spec = self.spec
        if spec.force_delete is None:
            return
        for pod in self.observed():
            if pod.name not in names:
                continue
            if policy.finalizer_block_evidence(pod, spec.force_delete, now) is not None:
                if pod.uid not in self.blocked_by_finalizer and self.takes(versions.FINALIZER_BLOCK):
                    self.blocked_by_finalizer.add(pod.uid)
                    self.state.blocked_by_finalizer.append(pod.uid)
                    await self.event(
                        "PodDeleteBlockedByFinalizer", policy.delete_blocked_by_finalizer_message(spec, pod, now)
                    )
                continue
            evidence = policy.force_delete_evidence(pod, spec.force_delete, now)
            if evidence is None:
                continue
            await kube_calls.force_delete_pod(
                ForceDeletePodInput(namespace=spec.namespace, name=pod.name, uid=pod.uid),
                summary=f"force-delete {pod.name} stuck on node {pod.node_name} ({evidence})",
                local=self.local_kube,
            )
            await self.event("PodForceDeleted", policy.force_deleted_message(spec, pod, evidence, now))

    def next_force_delete(self, names: set[str], now: datetime, other: datetime | None) -> datetime | None:
        """`other`, or sooner when a stuck pod becomes eligible for force-delete (or to be
        reported pinned by its finalizers) before it."""
        wakes = [other] if other is not None else []
        for pod in self.observed():
            if pod.name not in names:
                continue
            due = policy.force_delete_due_at(pod, self.spec.force_delete)
            if due is None and pod.uid not in self.blocked_by_finalizer:
                # Pinned by finalizers: a timer to report it, unless the history is from before.
                due = policy.force_delete_due_at(pod, self.spec.force_delete, with_finalizers=True)
                if due is not None and not self.takes(versions.FINALIZER_BLOCK):
                    due = None
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
        """List the pods now for a create that comes next (see `listed_at`); it looks for
        leftovers on our names, so the EndpointSlices need no read (from `LOCAL_KUBE_CALLS` on)."""
        await self.refresh_pods(endpoints=not self.local_kube)
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

    async def fail_attempt(
        self, failure: InstanceFailure, members: dict[str, str], keep_pods: bool
    ) -> dict[str, str]:
        """Record a failed attempt: retry block or rebuild back-off, events; the caller sets
        phase Failed. The attempt's members that remain: all, or none when its pods were deleted."""
        state, spec = self.state, self.spec
        now = workflow.now()
        failure = self.located(failure, members)
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
        state.operation = None
        return dict(members) if keep_pods else {}
