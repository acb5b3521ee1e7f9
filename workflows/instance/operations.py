"""What every Instance operation builds on: phase and progress bookkeeping, pod lists, waiting
for news, events, reports to the parent, the headless Service and the PodGroup's setup.

The base mixin of `InstanceWorkflow` (workflows/instance/workflow.py); the operations come in
layers above it: `teardown.py`, `bring_up.py`, `updates.py`, `lifecycle.py`. The rules they
follow come from `planning.instance`, and every Kubernetes write goes through
`workflows.kube_calls` with a summary a person can read in the Temporal UI.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Literal

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from models.instance import (
        InstanceFailure,
        InstanceOperation,
        InstancePhase,
        InstanceSpec,
    )
    from models.kube_ops import (
        ApplyObjectInput,
        CrdExistsInput,
        KubeErrorType,
        ListInstancePodsInput,
    )
    from models.pods import InstancePods, PodSummary
    from planning.instance import rules as policy
    from planning.instance.pods import POD_GROUP_LABEL, PodGroupStanding, render_headless_service
    from planning.instance.resting import PARENT_NET_BACKSTOP, rests_on_parent_net
    from planning.instance.state import InstanceState, build_status, newer_observation
    from workflows import kube_calls, search_attributes, tracing, waiting
    from workflows.events import EventType, isvc_ref, record_event
    from workflows.instance import gang as instance_gang
    from workflows.instance import versions
    from workflows.instance.reports import InstanceReports

P = InstancePhase

class InstanceOperations(InstanceReports):
    state: InstanceState
    pods_seq: int
    inbox_seq: int
    ready_counts: tuple[dict[str, str], dict[str, int]] | None = None
    """The members `bring_up` last saw ready and their restart counts at that moment.
    `commit_ready` starts the restart baseline from them: a container that restarts later in
    the operation (while the old pod of a surge drains, say) must still count as a restart."""
    local_kube: bool = False
    """Whether this run makes its Kubernetes calls as local activities (`LOCAL_KUBE_CALLS`)."""
    serving_at_create: bool = False
    """Whether this run creates a single-pod Instance's pod with its serving gate
    (`SERVING_AT_CREATE`, `planning.instance.serving`)."""
    gated_at_create: frozenset[str] = frozenset()
    """Uids of the pods this run created with their serving gate written: `start_serving`
    waits to see the gate on them instead of writing it again (not carried over
    continue-as-new, where it only costs that write)."""
    waits: waiting.Waits
    """How the loop waits (`InstanceWorkflow.__init__`; its timer kept from `KEPT_TIMER` on)."""
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

    def serving_now(self, members: dict[str, str]) -> dict[str, str]:
        """The observed `ome.io/serving` status of each of `members` (name -> uid) that has one."""
        return {
            pod.name: pod.serving
            for pod in self.observed()
            if pod.serving is not None and members.get(pod.name) in (pod.uid, "")
        }

    def set_phase(self, phase: InstancePhase) -> None:
        policy.check_transition(self.state.phase, phase)
        if phase == self.state.phase:
            return
        self.state.phase = phase
        workflow.upsert_search_attributes([search_attributes.PHASE.value_set(phase.value)])

    def begin(
        self,
        kind: Literal["Create", "Update", "Restart", "Migrate", "Delete"],
        step: str,
        started_at: datetime | None = None,
    ) -> None:
        """Start an operation: now, or at `started_at` (the parent's request it counts from)."""
        self.state.operation_counter += 1
        self.state.operation = InstanceOperation(
            id=f"{kind.lower()}-{self.state.operation_counter}",
            type=kind,
            step=step,
            started_at=started_at or workflow.now(),
            target_revision=self.spec.revision,
            strategy=self.spec.update_strategy_type if kind == "Update" else None,
        )
        # The operation is a trace of its own (workflows/tracing.py); `run` follows it.
        tracing.operation_began(self.state.operation.id, kind)

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

    async def refresh_pods(self, endpoints: bool = True) -> InstancePods:
        """List the pods afresh; the newest observation we hold afterwards.

        A `pods_changed` signal can arrive while the list runs, reporting a change made after
        the list read (the pod became Ready, say). The list's answer is then older and must
        not replace it: the watcher sends each summary once, so the change would never be
        reported again and the Instance would wait for a wake-up it already had.
        `endpoints`: read the headless Service's EndpointSlices too (a list that only looks for
        leftover pods does without).
        """
        spec = self.spec
        listed = await kube_calls.list_instance_pods(
            ListInstancePodsInput(
                namespace=spec.namespace,
                isvc=spec.isvc,
                component=spec.component,
                index=spec.index,
                endpoints=endpoints,
            ),
            summary=f"list pods of {spec.instance_name}",
            local=self.local_kube,
        )
        if newer_observation(listed, self.state.pods):
            self.state.pods = listed
            self.pods_seq += 1
        return self.state.pods or listed

    def located(self, failure: InstanceFailure, members: dict[str, str]) -> InstanceFailure:
        """`failure` with the operation whose attempt failed and the nodes of that attempt's
        pods (`members`, name -> uid), which the parent reads to relocate the Instance (§13)."""
        nodes = {
            pod.node_name
            for pod in self.observed()
            if pod.node_name and members.get(pod.name) and members[pod.name] == pod.uid
        }
        operation = self.state.operation.type if self.state.operation is not None else None
        return failure.model_copy(update={"operation": operation, "node_names": sorted(nodes)})

    def mark(self) -> tuple[int, int]:
        """Where the observations and requests stand; take it *before* looking at them."""
        return (self.pods_seq, self.inbox_seq)

    def takes(self, change: str) -> bool:
        """Whether this run takes `change` (`workflows.instance.versions`): by the version it
        started under, or by `workflow.patched`. From the workflow's own code, never a query."""
        return versions.takes(self.state.workflow_version, change)

    async def wait_for_news(
        self, until: datetime | None, since: tuple[int, int], report: bool = True, hold: bool = False
    ) -> None:
        """Sleep until a pod observation or a request newer than `since` arrives, `until`, or
        the safety re-list. `since` is the mark taken before the caller looked, so news that
        came in while it was busy (during an activity, say) wakes it at once instead of being
        waited for a second time. The parent hears the latest first, unless the wait is a
        moment's (`report=False`) and the caller reports right after it anyway. `hold`: the
        timer running is kept as it is (`Waits.wait_for_news`)."""
        if report:
            await self.report()
        again = self.report_again_at
        if again is not None and again <= workflow.now():
            # Past and not sent again: the report just composed took its place, or none is due.
            self.report_again_at = again = None
        if again is not None:
            # A report a busy parent refused goes again then (`REPORT_BUSY_LATER`).
            until = again if until is None else min(until, again)
        pods_seq, inbox_seq = since
        safety = timedelta(seconds=self.spec.safety_recheck_seconds)
        if self.rests_on_parent_net():
            safety = PARENT_NET_BACKSTOP  # the parent's component re-list is the net (planning.instance.resting)
        if await self.waits.wait_for_news(
            lambda: self.pods_seq != pods_seq or self.inbox_seq != inbox_seq, until, safety, hold=hold
        ):
            await self.refresh_pods()

    def rests_on_parent_net(self) -> bool:
        """Whether the parent's re-list covers this Instance now: it rests under the net and
        the parent has its latest report (one that failed to go out leaves the short timer,
        whose re-list reports again), and it holds no update the parent counts as running."""
        state = self.state
        return (
            self.spec.relisted_by_parent
            and rests_on_parent_net(state.phase, state.operation, state.draining)
            and self.last_report == self.fingerprint(build_status(state, workflow.now()))
            and not self.counted_update_held()
        )

    def counted_update_held(self) -> bool:
        """Whether an update the parent counts from its request waits for the pause to end: the
        parent shows the Instance `Updating` and leaves it out of its re-list (`versions.HELD_UPDATE_OFF_NET`)."""
        held = self.state.paused_update
        return (
            held is not None
            and held.revision == self.state.update_counted_by_parent
            and self.takes(versions.HELD_UPDATE_OFF_NET)
        )

    async def event(self, reason: str, message: str, kind: EventType = "Warning") -> None:
        spec = self.spec
        involved = isvc_ref(spec.isvc, spec.namespace, spec.isvc_uid)
        await record_event(
            involved,
            reason,
            message,
            kind,
            summary=f"event {reason} for {spec.instance_name}",
            local=self.local_kube,
        )

    def interrupted(self, target_revision: str) -> bool:
        pending = self.state.pending_update
        return self.state.pending_delete is not None or (
            pending is not None and pending.revision != target_revision
        )

    # --- setup ----------------------------------------------------------------------

    async def prepare(self) -> None:
        """The Instance's headless Service, and whether the PodGroup CRD exists.

        The PodGroup itself is made by `bring_up`, before the pods that name it: a PodGroup
        of an earlier Instance on this name may still be terminating then, or taken.
        """
        spec = self.spec
        # A new Instance's first run creates it: no read before (one request, not two).
        await self.apply_headless_service(create_first=self.local_kube and self.state.operation_counter == 0)
        if not (spec.multi_pod and spec.gang_scheduling):
            return
        if self.state.pod_group_crd is None:
            found = await kube_calls.crd_exists(
                CrdExistsInput(), summary="check the PodGroup CRD", local=self.local_kube
            )
            self.state.pod_group_crd = found.exists
            self.state.gang_unavailable = not found.exists

    async def apply_headless_service(self, create_first: bool = False) -> None:
        """Apply the headless Service. Without it the leader has no DNS name and "listed" is
        not known; the pods can still be created and serve through the component's Service,
        so a refusal is said (an event) and the Instance goes on. One a full quota refused is
        tried again later (`service_retry_at`, `versions.SERVICE_RETRIED`) until it is made."""
        state, spec = self.state, self.spec
        try:
            await kube_calls.apply_object(
                ApplyObjectInput(manifest=render_headless_service(spec), create_first=create_first),
                summary=f"apply headless Service {spec.instance_name}",
                local=self.local_kube,
            )
        except ActivityError as error:
            said = state.service_retry_at is not None
            state.service_retry_at = None
            cause = f"headless Service {spec.instance_name}: {error.cause or error}"
            if kube_calls.error_type(error) == KubeErrorType.QUOTA_EXCEEDED and self.takes(versions.SERVICE_RETRIED):
                state.service_tries += 1
                wait = policy.service_recheck_seconds(state.service_tries)
                state.service_retry_at = workflow.now() + timedelta(seconds=wait)
                if not said:
                    await self.event("HeadlessServiceFailed", f"{cause}; tried again until the quota has room")
                return
            await self.event("HeadlessServiceFailed", cause)
            return
        state.service_retry_at = None
        if state.service_tries:
            state.service_tries = 0
            await self.event(
                "HeadlessServiceCreated", f"headless Service {spec.instance_name} created: the quota has room", "Normal"
            )

    def service_retry_in_bring_up(self) -> datetime | None:
        """When the bring-up tries the refused headless Service again: its `service_retry_at`,
        in runs that take `SERVICE_RETRIED_IN_BRING_UP` (asked only while one is set)."""
        due = self.state.service_retry_at
        return due if due is not None and self.takes(versions.SERVICE_RETRIED_IN_BRING_UP) else None

    async def service_due(self, due: datetime | None) -> None:
        """Apply the headless Service again once `due` has come."""
        if due is not None and workflow.now() >= due:
            await self.apply_headless_service()

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
