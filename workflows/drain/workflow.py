"""The `Drain` workflow: empty a node of the product replacement first, then hold it cordoned.

`drain/node/{node}`, started by an operator before node maintenance instead of `kubectl
drain` (which would evict a gang's pods one by one and leave its Instance broken):

1. Check the input and that the node exists (a refusal names the field and the fix;
   nothing is cordoned), then cordon it (`spec.unschedulable`).
2. Look at the node's pods (`planning.drain.pods`): each OMENative Instance on it is moved
   by a `Migration` child, replacement first, one per component at a time (the
   InferenceReplica runs them one by one and a queued migration's deadline would run while
   it waits); a migration that ends with its Instance still on the node is started again
   after a back-off (`planning.drain.backoff`; `RateLimited` waits out the window). The
   product's other pods are evicted through the Eviction API; a PodDisruptionBudget's 429 is
   waited out on a timer, never forced. Other pods are left alone and reported.
3. When nothing of the product is left, it is `Drained` and holds the node cordoned until
   `release` uncordons it. A `release` before then stops moving: nothing new starts, the
   migrations in flight finish (`RELEASE_STOPS_MOVING`), then the node is uncordoned
   (`Released`). `cancel` stops moving at any time (migrations in flight are cancelled) and
   uncordons. After the optional timeout nothing more moves (`TimedOut`) and the node stays
   cordoned until `release` or `cancel`. An eviction the API server refuses with an error
   (403, a webhook) waits with that error in `status` and is tried again after a back-off;
   it never fails the drain, which would leave the node cordoned with nobody holding it.

Migrations are started with parent close policy ABANDON: a migration is a whole, safe unit
the InferenceReplica carries out replacement first, so a drain that is terminated (to start
it again with another timeout, say) must not throw half-built replacements away; the
drain's own `cancel` and timeout cancel them explicitly with the Migration's `cancel` signal.

Observe (list the node's pods) -> plan (`planning.drain.progress`) -> act (start
migrations, evict) -> wait (a migration's end, a signal, a back-off's end, the next look).
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from models.kube_ops import EvictPodInput, ListNodePodsInput, NodePods, ObjectRef, PatchObjectInput
    from models.migration import MigrationPhase, MigrationProgress, MigrationRequest
    from planning.drain import texts
    from planning.drain.progress import (
        eviction_answered,
        eviction_failed,
        in_flight,
        migration_ended,
        migration_started,
        next_actions,
        observe,
        timed_out,
    )
    from planning.drain.request import deadline_of, input_problems
    from planning.drain.state import DrainState, InstanceKey, PodEviction
    from planning.drain.status import status_of
    from planning.drain.texts import DrainPhase
    from workflows import kube_calls, search_attributes, waiting
    from workflows.drain.messages import (
        QUERY_STATUS,
        SIGNAL_CANCEL,
        SIGNAL_RELEASE,
        DrainInput,
        DrainStatus,
    )
    from workflows.migration.messages import SIGNAL_CANCEL as MIGRATION_CANCEL
    from workflows.migration.messages import MigrationInput
    from workflows.names import DRAIN, MIGRATION, drain_workflow_id, migration_workflow_id

SAFETY_RECHECK = timedelta(minutes=10)
"""Looks at the node at least this often while moving, whatever else it waits for."""
HOLD_RECHECK = timedelta(minutes=30)
"""While holding, the cordon is re-asserted this often (someone may have uncordoned it)."""
CANCEL_GRACE = timedelta(minutes=5)
"""How long a cancelled drain waits for its migrations to confirm their end before it ends."""
MIGRATION_FAILED = "MigrationWorkflowFailed"
RELEASE_STOPS_MOVING = "drain-release-stops-moving"
"""`workflow.patched` id: a `release` before the node is drained stops moving; histories from
before went on until the node was drained, then uncordoned it."""


def node_ref(node: str) -> ObjectRef:
    return ObjectRef(api_version="v1", kind="Node", name=node)


@workflow.defn(name=DRAIN)
class DrainWorkflow:
    """Input `DrainInput` (or `DrainState` after continue-as-new); result the final `DrainStatus`."""

    @workflow.init
    def __init__(self, arg: DrainInput | DrainState) -> None:
        if isinstance(arg, DrainState):
            self.state = arg
        else:
            self.state = DrainState(node=arg.node, reason=arg.reason, timeout=arg.timeout)
        self.seq = 0
        self.migrations: dict[str, workflow.ChildWorkflowHandle[object, MigrationProgress]] = {}
        """Handles of the migrations in flight, by Instance label (the run that started them)."""
        self.shown_phase: DrainPhase | None = None

    @workflow.signal(name=SIGNAL_RELEASE)
    def release(self) -> None:
        self.state = self.state.model_copy(update={"release_requested": True})
        self.seq += 1

    @workflow.signal(name=SIGNAL_CANCEL)
    def cancel(self) -> None:
        self.state = self.state.model_copy(update={"cancel_requested": True})
        self.seq += 1

    @workflow.query(name=QUERY_STATUS)
    def status(self) -> DrainStatus:
        return status_of(self.state, workflow.now())

    @workflow.run
    async def run(self, arg: DrainInput | DrainState) -> DrainStatus:
        if self.state.started_at is None:
            self.check()
        self.show()
        if self.state.phase == DrainPhase.CORDONING:
            await self.cordon()
        if not (self.state.phase.holding or self.state.phase.final):
            await self.move()
        if not self.state.cancel_requested:
            await self.hold()
        return await self.finish()

    # --- start -----------------------------------------------------------------------------

    def check(self) -> None:
        """Refuse an input that cannot be drained, before anything is cordoned."""
        problems = input_problems(self.state.node, self.state.timeout)
        if problems:
            raise ApplicationError(
                f"Drain input refused: {'; '.join(problems)}",
                {"node": self.state.node, "timeout": self.state.timeout},
                type=texts.INVALID_INPUT,
                non_retryable=True,
            )
        now = workflow.now()
        self.state = self.state.model_copy(
            update={"started_at": now, "deadline": deadline_of(now, self.state.timeout)}
        )

    async def cordon(self) -> None:
        node = self.state.node
        listed = await self.look()
        if not listed.found:
            raise ApplicationError(
                texts.node_not_found(node), {"node": node}, type=texts.NODE_NOT_FOUND, non_retryable=True
            )
        await self.set_unschedulable(True)
        self.state = self.state.model_copy(update={"cordoned": True, "phase": DrainPhase.MIGRATING})
        self.show()

    async def set_unschedulable(self, unschedulable: bool) -> None:
        node = self.state.node
        why = f" ({self.state.reason})" if self.state.reason else ""
        await kube_calls.patch_object(
            PatchObjectInput(
                ref=node_ref(node), patch={"spec": {"unschedulable": True if unschedulable else None}}, missing_ok=True
            ),
            summary=f"{'cordon' if unschedulable else 'uncordon'} node {node}{why}",
        )

    async def look(self) -> NodePods:
        return await kube_calls.list_node_pods(
            ListNodePodsInput(node=self.state.node), summary=f"list the pods on node {self.state.node}"
        )

    # --- move ------------------------------------------------------------------------------

    async def move(self) -> None:
        """Migrate and evict until the node is drained, the drain is cancelled or times out."""
        while not self.state.cancel_requested:
            if self.state.release_requested and workflow.patched(RELEASE_STOPS_MOVING):
                await self.let_migrations_finish()
                return
            if timed_out(self.state, workflow.now()):
                # Nothing more moves; the node stays cordoned for the operator to decide.
                self.state = self.state.model_copy(update={"phase": DrainPhase.TIMED_OUT})
                await self.stop_migrations()
                self.show()
                return
            seen = self.seq
            listed = await self.look()
            now = workflow.now()
            self.state = observe(self.state, listed.pods if listed.found else [], now, listed.ready or not listed.found)
            # Children of this run cannot be awaited by the next: near the history limit no new
            # migration starts, and the run continues as new once those in flight have ended.
            continuing = workflow.info().is_continue_as_new_suggested()
            actions = next_actions(self.state, now, may_start_migrations=not continuing)
            if actions.drained:
                self.state = self.state.model_copy(update={"phase": DrainPhase.DRAINED})
                self.show()
                return
            if continuing and not in_flight(self.state):
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(self.state)
            for instance in actions.migrate:
                await self.start_migration(instance)
            if actions.evict:
                await asyncio.gather(*(self.evict(eviction) for eviction in actions.evict))
            self.show()
            wakes = [at for at in (actions.look_again_at, self.state.deadline) if at is not None]
            await self.wait_for_news(seen, min(wakes, default=None), SAFETY_RECHECK, "next look at the node")

    async def start_migration(self, instance: InstanceKey) -> None:
        state = self.state
        uuid = str(workflow.uuid4())
        workflow_id = migration_workflow_id(instance.namespace, instance.isvc, instance.component, instance.index, uuid)
        request = MigrationRequest(
            component=instance.component,
            instance=instance.index,
            from_node=state.node,
            reason=state.reason or f"drain of node {state.node}",
            requested_at=workflow.now(),
            requested_by=drain_workflow_id(state.node),
            uuid=uuid,
        )
        self.state = migration_started(self.state, instance, workflow_id)
        try:
            handle = await workflow.start_child_workflow(
                MIGRATION,
                MigrationInput(namespace=instance.namespace, isvc=instance.isvc, request=request),
                id=workflow_id,
                result_type=MigrationProgress,
                parent_close_policy=workflow.ParentClosePolicy.ABANDON,
                static_summary=f"migrate Instance {instance.label} off node {state.node} (drain)",
            )
        except Exception as error:  # noqa: BLE001 - a start that fails is a failed attempt, retried
            self.migration_over(instance, self.failed(instance, uuid, f"could not start migration: {error}"))
            return
        self.migrations[instance.label] = handle
        asyncio.create_task(self.await_migration(instance, uuid, handle))

    async def await_migration(
        self, instance: InstanceKey, uuid: str, handle: workflow.ChildWorkflowHandle[object, MigrationProgress]
    ) -> None:
        try:
            result = await handle
        except ChildWorkflowError as error:
            result = self.failed(instance, uuid, str(error.cause or error))
        self.migrations.pop(instance.label, None)
        self.migration_over(instance, result)

    def failed(self, instance: InstanceKey, uuid: str, message: str) -> MigrationProgress:
        return MigrationProgress(
            uuid=uuid,
            component=instance.component,
            instance=instance.index,
            from_node=self.state.node,
            phase=MigrationPhase.FAILED,
            reason=MIGRATION_FAILED,
            message=message[:500],
        )

    def migration_over(self, instance: InstanceKey, result: MigrationProgress) -> None:
        self.state = migration_ended(self.state, instance, result, workflow.now())
        self.seq += 1

    async def let_migrations_finish(self) -> None:
        """After an early `release`: start nothing more, wait for the migrations in flight to
        end (a `cancel` meanwhile cancels them, in `finish`)."""
        self.show()
        await workflow.wait_condition(lambda: not self.migrations or self.state.cancel_requested)

    async def evict(self, eviction: PodEviction) -> None:
        try:
            result = await kube_calls.evict_pod(
                EvictPodInput(namespace=eviction.namespace, name=eviction.name, uid=eviction.uid or None),
                summary=f"evict pod {eviction.key} from node {self.state.node}",
            )
        except ActivityError as error:
            # Refused outright (403, a webhook): the pod waits with the error, tried again later.
            self.state = eviction_failed(self.state, eviction, str(error.cause or error), workflow.now())
            return
        self.state = eviction_answered(self.state, eviction, result, workflow.now())

    async def stop_migrations(self) -> None:
        """Cancel the migrations in flight (each removes its replacement, the source stays) and
        give them a while to confirm."""
        for label, handle in sorted(self.migrations.items()):
            try:
                await handle.signal(MIGRATION_CANCEL)
            except Exception as error:  # noqa: BLE001 - one already ended; the others still go
                workflow.logger.warning("could not cancel migration of %s: %s", label, error)
        try:
            await workflow.wait_condition(lambda: not self.migrations, timeout=CANCEL_GRACE)
        except TimeoutError:
            workflow.logger.warning("migrations still running after cancel: %s", sorted(self.migrations))

    # --- hold and end ----------------------------------------------------------------------

    async def hold(self) -> None:
        """Keep the node cordoned until `release` or `cancel`."""
        while not (self.state.release_requested or self.state.cancel_requested):
            seen = self.seq
            safety = await self.wait_for_news(seen, None, HOLD_RECHECK, "holding the node cordoned: signal release")
            if safety:
                await self.set_unschedulable(True)
            if workflow.info().is_continue_as_new_suggested():
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(self.state)

    async def finish(self) -> DrainStatus:
        if self.state.cancel_requested:
            await self.stop_migrations()
        if self.state.cordoned:
            await self.set_unschedulable(False)
        phase = DrainPhase.CANCELLED if self.state.cancel_requested else DrainPhase.RELEASED
        self.state = self.state.model_copy(update={"cordoned": False, "phase": phase})
        self.show()
        await workflow.wait_condition(workflow.all_handlers_finished)
        return self.status()

    async def wait_for_news(self, seen: int, until: datetime | None, safety: timedelta, summary: str) -> bool:
        """Until a signal or a migration's end, `until`, or `safety`; True when `safety` woke it."""
        return await waiting.wait_for_news(lambda: self.seq != seen, until, safety, summary)

    def show(self) -> None:
        """The phase for `temporal workflow list --query 'OmePhase=...'`, and the status line
        as the run's current details in the UI."""
        if self.shown_phase != self.state.phase:
            workflow.upsert_search_attributes([search_attributes.PHASE.value_set(self.state.phase.value)])
            self.shown_phase = self.state.phase
        workflow.set_current_details(self.status().message)
