"""Carrying out the step `planning.instance.steps.next_step` chose (spec reference §9, §11, §15),
and the requests every loop pass takes first: delete, drain, release of a held revision.

A mixin of `InstanceWorkflow`; the operations it runs live in `workflows/instance/updates.py`
(update, restart), `workflows/instance/bring_up.py` and `workflows/instance/teardown.py`.

Under a pause (`set_pause`, spec reference §5; the rules are `planning.instance.pause`) no
update starts, an in-flight single-pod SurgeThenDrain holds before its old pod drains,
repairs stop at `Freeze`, and a lost Instance under restart policy None rests `Pending`.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from models.instance import DeleteRequest, InstanceFailure, InstancePhase
    from models.kube_ops import DeleteObjectInput, ObjectRef
    from planning.instance import rules as policy
    from planning.instance.steps import Do, Step, Why, confirmed_failure_step
    from workflows import kube_calls
    from workflows.instance import versions
    from workflows.instance.updates import InstanceUpdates

P = InstancePhase

class InstanceLifecycle(InstanceUpdates):
    # --- the chosen step ------------------------------------------------------------

    async def carry_out(self, step: Step) -> bool:
        """Set the state changes `step` implies, then do it; False when the loop should wait."""
        state = self.state
        for name, value in step.changes.items():
            setattr(state, name, value)
        match step.do:
            case Do.CREATE:
                self.set_phase(P.CREATING)
                await self.create_instance()
            case Do.FAIL:
                self.set_phase(P.CREATING)
                self.set_phase(P.FAILED)
            case Do.RESTART:
                failure = state.last_failure if step.why == Why.POD_FAILED else None
                await self.restart_instance(step.reason or "", failure.time if failure is not None else None)
            case Do.UPDATE:
                assert step.way is not None
                self.set_phase(P.UPDATING)
                await self.update_instance(step.way)
            case Do.REFUSE_UPDATE:
                await self.event("InPlaceUpdateNotPossible", policy.in_place_refused_message(state.spec))
            case Do.CONFIRM_FAILURE:
                fresh = await self.refresh_pods()
                confirmed = confirmed_failure_step(state, fresh.pods, workflow.now())
                if self.local_kube and confirmed.do == Do.RESTART:
                    # The restart that follows at once uses this list unless news came since;
                    # any other step may be followed by a create much later, which lists anew.
                    self.listed_at = self.mark()
                return await self.carry_out(confirmed)
            case Do.GO_PENDING:
                self.set_phase(P.PENDING)
            case Do.RECREATE:
                self.set_phase(P.CREATING)
            case Do.RESUME_SERVING:
                if not await self.start_serving(state.members):
                    return False
                self.commit_ready(state.members)
            case Do.WAIT:
                return False
            case Do.ACCEPT_RESTARTS | Do.LOOK_AGAIN:
                pass
        return True

    # --- requests -------------------------------------------------------------------

    async def take_requests(self) -> None:
        """A drain request, then releases of held revisions (a delete is taken before)."""
        state = self.state
        if state.pending_drain:
            state.pending_drain = False
            await self.take_out_of_rotation("DrainRequested")
        await self.absorb_releases()

    async def absorb_releases(self) -> None:
        state = self.state
        for requested in state.pending_releases:
            ir = f"{state.spec.namespace}/{state.spec.isvc}-{state.spec.component}"
            # A parent InferenceReplica records the one event per release (spec §11); histories
            # from before the patch recorded the Instance's own as well.
            announce = state.spec.parent_workflow_id is None or not self.takes(versions.RELEASE_EVENT_BY_PARENT)
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

    # --- create ---------------------------------------------------------------------

    async def create_instance(self) -> None:
        """Create (or rebuild on its stable names) the Instance at the target revision."""
        self.begin("Create", "CreatePods")
        # Whatever is left of an earlier attempt occupies the stable names: remove it. The
        # create below waits for each name to free (a pod stuck on a dead node holds the
        # readiness clock with NodeUnknown, and is force-deleted when the policy allows).
        # Unless the parent found none just before it started us (`started_clean`).
        clean, self.state.started_clean = self.state.started_clean, False
        leftovers = {} if clean else await self.live_pods()
        if leftovers:
            await self.take_out_of_rotation("rebuild on stable names", leftovers)
            await self.delete_pods(leftovers, "rebuild on stable names")
        result = await self.bring_up(self.manifests())
        if result.outcome == "interrupted":
            if self.serving_when_interrupted(result.members):
                self.commit_ready(result.members)
            return
        if isinstance(result.outcome, InstanceFailure):
            await self.fail_create(result.outcome, result.members)
            self.set_phase(P.FAILED)
            return
        self.commit_ready(result.members)

    # --- delete ---------------------------------------------------------------------

    async def delete_instance(self, request: DeleteRequest) -> None:
        """Drain, delete every pod of the Instance, its PodGroup and its Service, then finish."""
        state, spec = self.state, self.spec
        counted = request.counted_since is not None and self.takes(versions.DELETION_COUNTED)
        self.counted_deletion = counted
        self.set_phase(P.DELETING)
        self.begin("Delete", "Drain", request.counted_since if counted else None)
        targets = await self.all_pods()
        drain = spec.drain_seconds if request.drain_seconds is None else request.drain_seconds
        # The drain deadline as the parent counts it, when it says one (even None).
        said = counted and request.says_drain_deadline()
        await self.teardown(
            targets,
            drain,
            f"delete: {request.reason}",
            deleting=True,
            overdue_by_parent=said,
            parent_overdue_at=request.drain_deadline if said else None,
        )
        if state.pod_group_crd:
            await self.delete_own_pod_group()
        await kube_calls.delete_object(
            DeleteObjectInput(
                ref=ObjectRef(
                    api_version="v1", kind="Service", name=spec.instance_name, namespace=spec.namespace
                )
            ),
            summary=f"delete headless Service {spec.instance_name}",
            local=self.local_kube,
        )
        state.members = {}
        state.deleted = True
        state.operation = None
        state.pending_delete = None
