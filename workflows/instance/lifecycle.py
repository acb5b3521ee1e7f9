"""What the Instance does in each phase: create, watch a ready Instance, recover, update,
restart, delete (spec reference §9, §11, §15). A mixin of `InstanceWorkflow`; the pod-level
steps it composes live in `workflows/instance/operations.py`.

Under a pause (`set_pause`, spec reference §5; the rules are `planning.instance.pause`) no
update starts, an in-flight single-pod SurgeThenDrain holds before its old pod drains,
repairs stop at `Freeze`, and a lost Instance under restart policy None rests `Pending`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from models.instance import DeleteRequest, InstanceFailure, InstancePhase
    from models.kube_ops import DeleteObjectInput, ObjectRef, PatchObjectInput
    from planning.instance import rules as policy
    from planning.instance.health import HOLD_PAUSED, assess_ready, levels
    from planning.instance.pause import (
        PodFailureAction,
        hold_update,
        on_pod_failure,
        repairs_allowed,
        retry_timers_run,
        surge_may_drain,
    )
    from planning.instance.pods import (
        in_place_image_patches,
        in_place_possible,
        render_pods,
    )
    from planning.instance.rules import UpdateWay
    from planning.instance.state import current_levels
    from workflows import kube_calls
    from workflows.instance.operations import InstanceOperations, Outcome

P = InstancePhase

RELEASE_EVENT_BY_PARENT = "release-event-by-parent"
"""`workflow.patched` id: under an InferenceReplica, the parent records a release's one event."""


class InstanceLifecycle(InstanceOperations):
    # --- requests -------------------------------------------------------------------

    async def absorb_releases(self) -> None:
        state = self.state
        for requested in state.pending_releases:
            ir = f"{state.spec.namespace}/{state.spec.isvc}-{state.spec.component}"
            # A parent InferenceReplica records the one event per release (spec §11); histories
            # from before the patch recorded the Instance's own as well.
            announce = state.spec.parent_workflow_id is None or not workflow.patched(RELEASE_EVENT_BY_PARENT)
            if policy.release_matches(state.retry_block, requested):
                revision = state.retry_block.target_revision if state.retry_block else requested
                state.retry_block = None
                if announce:
                    await self.event(
                        "RetryBlockReleased",
                        f"InferenceReplica {ir} component={state.spec.component}: Held retryBlock for revision "
                        f"{revision} removed at operator request (release_held signal)",
                        "Normal",
                    )
            elif announce:
                await self.event(
                    "RetryBlockReleaseSkipped",
                    f"InferenceReplica {ir} component={state.spec.component}: release requested for revision "
                    f'"{requested}" but no retryBlock exists for it; nothing to release',
                    "Normal",
                )
        state.pending_releases = []

    def adopt_pending_update(self) -> None:
        """Make the newest requested spec the target; a new revision starts a fresh retry story."""
        state = self.state
        if state.pending_update is None:
            return
        new, state.pending_update = state.pending_update, None
        if new.revision != state.spec.revision:
            state.rebuild_at = None
            state.failures_in_a_row = 0
        state.spec = new

    def next_wake(self) -> datetime | None:
        state = self.state
        wakes: list[datetime] = []
        block = state.retry_block
        # A retry or rebuild the pause holds back is no reason to wake (it would only spin).
        timers = retry_timers_run(state.pause_mode, state.phase)
        if timers and block is not None and block.state == "Backoff" and block.next_retry_at is not None:
            wakes.append(block.next_retry_at)
        if timers and state.rebuild_at is not None:
            wakes.append(state.rebuild_at)
        available_at = current_levels(state, workflow.now()).next_available_at
        if available_at is not None:
            wakes.append(available_at)
        return min(wakes) if wakes else None

    # --- create ---------------------------------------------------------------------

    async def create_instance(self) -> bool:
        """Create (or rebuild on its stable names) the Instance at the target revision."""
        state = self.state
        self.adopt_pending_update()
        # The pods are being made afresh: a restart asked for meanwhile has nothing left to do.
        state.pending_restart = None
        if state.phase == P.PENDING:
            self.set_phase(P.CREATING)
        if policy.blocks_attempt(state.retry_block, state.spec.revision, workflow.now()):
            self.set_phase(P.FAILED)
            return False
        if policy.retry_due(state.retry_block, workflow.now()) and state.retry_block is not None:
            state.retry_block = policy.start_retry(state.retry_block)
        self.begin("Create", "CreatePods")
        # Whatever is left of an earlier attempt occupies the stable names: remove it. The
        # create below waits for each name to free (a pod stuck on a dead node holds the
        # readiness clock with NodeUnknown, and is force-deleted when the policy allows).
        leftovers = await self.live_pods()
        if leftovers:
            await self.take_out_of_rotation("rebuild on stable names", leftovers)
            await self.delete_pods(leftovers, "rebuild on stable names")
        members: dict[str, str] = {}
        manifests = render_pods(self.render_spec(), state.incarnation, state.active_ordinal)
        outcome = await self.bring_up(manifests, members)
        if outcome == "interrupted":
            return False
        if isinstance(outcome, InstanceFailure):
            await self.fail_create(outcome, members)
            self.set_phase(P.FAILED)
            return False
        self.commit_ready(members)
        return False

    # --- ready ----------------------------------------------------------------------

    async def handle_ready(self) -> bool:
        """Act on requests and pod failures of a Ready Instance; False when there is nothing to do."""
        state = self.state
        now = workflow.now()
        if state.pending_restart is not None:
            reason, state.pending_restart = state.pending_restart.reason, None
            await self.restart_instance(reason)
            return True
        self.adopt_pending_update()
        if (
            state.spec.revision != state.running_revision
            and not hold_update(state.pause_mode)
            and state.spec.revision != self.state.refused_revision
            and not policy.blocks_attempt(state.retry_block, state.spec.revision, now)
            and (state.rebuild_at is None or state.rebuild_at <= now)
        ):
            await self.update_instance()
            return True
        if state.spec.revision == state.running_revision:
            state.running_spec = state.spec
        check = assess_ready(self.observed(), state.members, state.restart_baseline, now)
        if not check.failed_pods:
            return False
        restart_policy = state.spec.effective_restart_policy
        if on_pod_failure(state.pause_mode, restart_policy, check.lost_all) == PodFailureAction.WAIT:
            # Frozen (§5): no repair starts; the failure is looked at again on resume.
            return False
        fresh = await self.refresh_pods()
        check = assess_ready(fresh.pods, state.members, state.restart_baseline, workflow.now())
        if not check.failed_pods or check.failure is None:
            return True
        action = on_pod_failure(state.pause_mode, restart_policy, check.lost_all)
        if action == PodFailureAction.WAIT:
            return False
        state.last_failure = check.failure
        if action == PodFailureAction.RESTART:
            await self.restart_instance(check.failure.reason)
        elif action == PodFailureAction.PENDING:
            # Restart policy None: the kubelet restarts containers; a lost Instance is rebuilt
            # (not during a pause: it rests Pending until resume).
            self.set_phase(P.PENDING)
        else:
            state.restart_baseline = {
                pod.name: pod.restart_count for pod in fresh.pods if pod.name in state.members
            }
        return True

    async def restart_instance(self, reason: str) -> None:
        """Recreate every pod with a new incarnation; a failed restart stays Failed."""
        state = self.state
        self.set_phase(P.RESTARTING)
        self.begin("Restart", "Drain")
        targets = dict(state.members)
        targets.update(await self.live_pods())
        await self.teardown(targets, state.spec.drain_seconds, f"restart: {reason}")
        state.incarnation += 1
        state.members = {}
        self.progress("CreatePods")
        members: dict[str, str] = {}
        outcome = await self.bring_up(
            render_pods(self.render_spec(), state.incarnation, state.active_ordinal), members
        )
        if outcome == "interrupted":
            state.members = members
            self.set_phase(P.FAILED)
            return
        if isinstance(outcome, InstanceFailure):
            state.members = members
            await self.fail_attempt(outcome, members, keep_pods=not outcome.counting)
            self.set_phase(P.FAILED)
            return
        self.commit_ready(members)

    # --- failed ---------------------------------------------------------------------

    async def handle_failed(self) -> bool:
        state = self.state
        now = workflow.now()
        if state.pending_restart is not None:
            state.pending_restart = None
            state.incarnation += 1
            self.set_phase(P.CREATING)
            return True
        previous = state.spec.revision
        self.adopt_pending_update()
        if state.spec.revision != previous:
            self.set_phase(P.CREATING)
            return True
        # Recreating a Failed Instance is a repair: it goes on at `true`, not at `freeze` (§5).
        repair = repairs_allowed(state.pause_mode)
        if repair and policy.retry_due(state.retry_block, now):
            self.set_phase(P.CREATING)
            return True
        if repair and state.retry_block is None and state.rebuild_at is not None and state.rebuild_at <= now:
            state.rebuild_at = None
            self.set_phase(P.CREATING)
            return True
        if (
            repair
            and state.retry_block is None
            and state.last_failure is not None
            and state.last_failure.counting
        ):
            # Released: the hold is gone, so the revision gets a fresh attempt now.
            state.last_failure = state.last_failure.model_copy(update={"counting": False})
            self.set_phase(P.CREATING)
            return True
        if state.members and current_levels(state, now).ready:
            # A failed restart whose pods came up after all: back into rotation.
            if not state.draining and await self.start_serving(state.members):
                self.commit_ready(state.members)
                return True
        return False

    # --- update ---------------------------------------------------------------------

    async def update_instance(self) -> None:
        state = self.state
        running = state.running_spec or state.spec
        target = state.spec
        plan = policy.choose_update_way(running, target, in_place_possible(running, target))
        if plan == UpdateWay.REFUSE:
            self.state.refused_revision = target.revision
            await self.event("InPlaceUpdateNotPossible", policy.in_place_refused_message(target))
            return
        if policy.retry_due(state.retry_block, workflow.now()) and state.retry_block is not None:
            state.retry_block = policy.start_retry(state.retry_block)
        self.set_phase(P.UPDATING)
        if plan == UpdateWay.IN_PLACE:
            await self.update_in_place()
        elif plan == UpdateWay.SURGE:
            await self.update_by_surge()
        else:
            await self.update_by_recreate()

    async def update_in_place(self) -> None:
        state, spec = self.state, self.spec
        self.begin("Update", "InPlace")
        for name, patch in in_place_image_patches(
            self.render_spec(), state.incarnation, state.active_ordinal
        ).items():
            await kube_calls.patch_object(
                PatchObjectInput(
                    ref=ObjectRef(api_version="v1", kind="Pod", name=name, namespace=spec.namespace),
                    patch=patch,
                    patch_type="strategic",
                    missing_ok=True,
                ),
                summary=f"patch images of {name} to revision {spec.revision[:4]}",
            )
        await self.refresh_pods()
        members = dict(state.members)
        outcome = await self.bring_up(
            render_pods(self.render_spec(), state.incarnation, state.active_ordinal), members
        )
        await self.finish_update(outcome, members, keep_pods=True)

    async def update_by_surge(self) -> None:
        """Single-pod SurgeThenDrain: the new pod on the other ordinal serves before the old drains."""
        state, spec = self.state, self.spec
        self.begin("Update", "Surge")
        ordinal = policy.next_ordinal(state.active_ordinal)
        members: dict[str, str] = {}
        manifests = render_pods(self.render_spec(), state.incarnation, ordinal)
        outcome = await self.bring_up(manifests, members)
        if outcome == "ok":
            held = await self.hold_surge_while_paused(manifests, members)
            if held is None:
                # Deletion proceeds: the main loop drains and deletes every pod, the new one too.
                return
            outcome = held
        if outcome != "ok":
            # The old pod still serves: drop the surge pod and stay Ready on the old revision.
            await self.delete_pods(members, "abandon surge")
            if isinstance(outcome, InstanceFailure):
                await self.fail_attempt(outcome, members, keep_pods=False)
            state.operation = None
            self.set_phase(P.READY)
            return
        self.progress("SurgeDrain")
        await self.teardown(dict(state.members), spec.drain_seconds, "surge replaced the pod")
        state.active_ordinal = ordinal
        self.commit_ready(members)

    async def hold_surge_while_paused(
        self, manifests: list[dict[str, Any]], members: dict[str, str]
    ) -> Outcome | None:
        """Paused (§5): stop before the old pod drains; both pods serve until resume.

        None when a delete came meanwhile. A surge pod that stopped serving during the pause is
        brought up again before the old pod may drain, so the Instance never serves nothing.
        """
        state = self.state
        outcome: Outcome = "ok"
        while outcome == "ok" and not surge_may_drain(state.pause_mode):
            self.progress("SurgeDrain", waiting=HOLD_PAUSED)
            await self.report()
            await workflow.wait_condition(
                lambda: surge_may_drain(state.pause_mode) or state.pending_delete is not None
            )
            if state.pending_delete is not None:
                return None
            if not levels(self.observed(), members, self.spec.pod_count, 0.0, workflow.now()).serving:
                # Pods gone meanwhile are created again on their names, the rest waited for.
                fresh = await self.refresh_pods()
                present = {pod.name: pod.uid for pod in fresh.pods if not pod.terminating}
                for name, uid in members.items():
                    if present.get(name) != uid:
                        members[name] = ""
                outcome = await self.bring_up(manifests, members)
        return outcome

    async def update_by_recreate(self) -> None:
        """RecreatePod (or a multi-pod update on its own names): drain first, then recreate."""
        state, spec = self.state, self.spec
        self.begin("Update", "Drain")
        targets = dict(state.members)
        targets.update(await self.live_pods())
        await self.teardown(targets, spec.drain_seconds, f"update to revision {spec.revision[:8]}")
        state.incarnation += 1
        state.members = {}
        self.progress("CreatePods")
        members: dict[str, str] = {}
        outcome = await self.bring_up(
            render_pods(self.render_spec(), state.incarnation, state.active_ordinal), members
        )
        await self.finish_update(outcome, members, keep_pods=False)

    async def finish_update(self, outcome: object, members: dict[str, str], keep_pods: bool) -> None:
        state = self.state
        if outcome == "ok":
            self.commit_ready(members)
            return
        state.members = members
        if isinstance(outcome, InstanceFailure):
            await self.fail_attempt(outcome, members, keep_pods=keep_pods)
            state.members = members
        self.set_phase(P.FAILED)

    # --- delete ---------------------------------------------------------------------

    async def delete_instance(self, request: DeleteRequest) -> None:
        """Drain, delete every pod of the Instance, its PodGroup and its Service, then finish."""
        state, spec = self.state, self.spec
        self.set_phase(P.DELETING)
        self.begin("Delete", "Drain")
        targets = dict(state.members)
        targets.update(await self.live_pods())
        drain = spec.drain_seconds if request.drain_seconds is None else request.drain_seconds
        await self.teardown(targets, drain, f"delete: {request.reason}")
        if state.pod_group_crd:
            await self.delete_own_pod_group()
        await kube_calls.delete_object(
            DeleteObjectInput(
                ref=ObjectRef(
                    api_version="v1", kind="Service", name=spec.instance_name, namespace=spec.namespace
                )
            ),
            summary=f"delete headless Service {spec.instance_name}",
        )
        state.members = {}
        state.deleted = True
        state.operation = None
        state.pending_delete = None
