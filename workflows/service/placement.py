"""A multi-cluster InferenceService: the placement source and its homes (reference §16-§17).

`ServicePlacement` sits between `workflows.service.components.ServiceComponents` and the
workflow class. Two roles, one workflow type:

- The **placement source** (`isvc/{ns}/{name}`, control plane) of a service with
  `spec.placement.policy: ClusterAffinity` runs no component itself. Each pass it lists the
  WorkloadClusters (their labels and `Ready`), chooses the homes
  (`planning.service.placement`), starts one member per home on that cluster's task queue
  with the home's copy of the spec and sends it each new copy (`member_apply`), tells a home
  placement dropped to delete, writes `status.placement` and the placement conditions, and,
  when the service is routed, keeps its `TrafficMap` workflow told of the homes' counts.
- A **member** (`isvc/{ns}/{name}@{cluster}`) is an ordinary InferenceService workflow whose
  activities reach its cluster; it reads its endpoint from the cluster's inference Gateway
  and reports admission, counts, endpoint and phase to its source (`member_changed`).

Imported by the workflow module inside `workflow.unsafe.imports_passed_through()`.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any, Protocol

from temporalio import workflow
from temporalio.exceptions import WorkflowAlreadyStartedError

from models.inferenceservice import InferenceService
from models.kube_ops import ListObjectsInput, ObjectRef, ReadObjectInput
from planning.objects import OME_API_VERSION
from planning.service import placement_source as planner
from planning.service.scale import SCALE_REJECTED
from workflows import kube_calls
from workflows.names import (
    INFERENCE_SERVICE,
    TRAFFIC_MAP,
    cluster_task_queue,
    isvc_workflow_id,
    trafficmap_workflow_id,
)
from workflows.parent import deliver
from workflows.service.components import ServiceComponents
from workflows.service.homes import (
    GATEWAY_NAME,
    GATEWAY_NAMESPACE,
    SIGNAL_MEMBER_APPLY,
    SIGNAL_MEMBER_CHANGED,
    HomeCounts,
    HomeTracking,
    MemberApply,
    MemberReport,
    PlacementTracking,
    home_endpoint,
)
from workflows.service.messages import SIGNAL_DELETE, SIGNAL_PAUSE, SIGNAL_RESUME, SIGNAL_SCALE
from workflows.service.projection import identity
from workflows.trafficmap.messages import (
    SIGNAL_DELETE as SIGNAL_TRAFFICMAP_DELETE,
)
from workflows.trafficmap.messages import (
    SIGNAL_HOMES_CHANGED,
    HomeReport,
    HomesReport,
    TrafficMapInput,
)


class Admission(Protocol):
    """What the workflow's admission answers about a copy (`workflow.Admitted`)."""

    allowed: bool
    summary: str


RELIST_PENDING = timedelta(seconds=10)
"""WorkloadClusters are re-listed this often while no cluster is a home (none registered or
Ready yet: a cluster whose `Ready` the watcher just wrote is found within 10 s)..."""
RELIST_PLACING = timedelta(seconds=30)
"""...this often while placement has not converged..."""
RELIST_PLACED = timedelta(minutes=5)
"""...and this often once it has (a new cluster matching the affinity joins an `All` service)."""
MEMBER_GONE = "placement-member-gone"
"""`workflow.patched` id: a member that can no longer be signalled (terminated, failed, or
deleted on its own) is started again while its home stays, and counts as deleted once its home
is dropped, instead of being waited for forever."""
TRAFFICMAP_UNROUTED = "placement-trafficmap-unrouted"
"""`workflow.patched` id: `spec.routing.enabled: false` applied to a routed service deletes its
TrafficMap (§17 "Deleted when un-routed"); routing it again starts a new one."""


def placed_by_clusters(isvc: InferenceService) -> bool:
    placement = isvc.spec.placement
    return placement is not None and placement.policy == "ClusterAffinity"


def routed(isvc: InferenceService) -> bool:
    """A placed service has a TrafficMap unless `spec.routing.enabled: false` (§17)."""
    routing = isvc.spec.routing
    return placed_by_clusters(isvc) and not (routing is not None and routing.enabled is False)


class ServicePlacement(ServiceComponents):
    """The placement source's pass and a member's reports."""

    # --- a member -----------------------------------------------------------------------

    def member_report(self) -> MemberReport:
        state = self.state
        assert state.home is not None
        components: dict[str, HomeCounts] = {}
        for component, report in state.replicas.items():
            if not report.deleted:
                components[component] = HomeCounts(
                    allocated=report.status.replicas, ready=report.status.serving_replicas
                )
        for component, desired, observed in self.deployment_targets():
            components[component] = HomeCounts(
                allocated=desired, ready=observed.ready_replicas if observed is not None else 0
            )
        ready = next((c for c in state.conditions if c.type == "Ready"), None)
        return MemberReport(
            cluster=state.home,
            generation=state.generation,
            source_generation=state.source_generation,
            admitted=state.copy_refused is None,
            message=state.copy_refused or (ready.message if ready is not None and ready.status != "True" else ""),
            phase=self.phase(),
            ready=ready is not None and ready.status == "True",
            endpoint=state.endpoint,
            components=components,
        )

    async def read_endpoint(self, isvc: InferenceService, again: bool = False) -> None:
        """The home's endpoint, from its cluster's inference Gateway: read until it has one, and
        again on the safety re-check (`again`), in case the Gateway's address changed."""
        if self.state.home is None or (self.state.endpoint is not None and not again):
            return
        ref = ObjectRef(
            api_version="gateway.networking.k8s.io/v1", kind="Gateway", name=GATEWAY_NAME,
            namespace=GATEWAY_NAMESPACE, plural="gateways",
        )
        found = await kube_calls.read_object(
            ReadObjectInput(ref=ref), summary=f"read the inference Gateway of {self.state.home}"
        )
        self.state.endpoint = home_endpoint(found.object if found.found else None, isvc.namespace, isvc.name)

    async def report_to_source(self, deleted: bool = False) -> None:
        state = self.state
        if state.placement_parent is None:
            return
        report = self.member_report().model_copy(update={"deleted": deleted})
        fingerprint = report.model_dump_json()
        if fingerprint != state.member_sent and await deliver(
            state.placement_parent, SIGNAL_MEMBER_CHANGED, report
        ):
            state.member_sent = fingerprint

    def take_copy(self, copy: MemberApply, admitted: Admission) -> bool:
        """A new copy from the source, with this workflow's admission of it (as `apply` would
        admit it); False if refused."""
        state = self.state
        if not admitted.allowed:
            # Told to the source (`admitted: false`); this home goes on serving its last copy.
            state.copy_refused = admitted.summary
            self.reject(SIGNAL_MEMBER_APPLY, {"generation": copy.source_generation}, "MemberCopyRejected",
                        admitted.summary)
            return False
        state.copy_refused = None
        state.source_generation = copy.source_generation
        if json.dumps(copy.manifest, sort_keys=True) != json.dumps(state.manifest, sort_keys=True):
            # As `apply`: a new spec ends a transient `scale` of this home.
            state.manifest = copy.manifest
            state.generation += 1
            state.transient, state.scale_requests = {}, []
        return True

    # --- the placement source -------------------------------------------------------------

    def placement_tracking(self) -> PlacementTracking:
        if self.state.placement is None:
            self.state.placement = PlacementTracking()
        return self.state.placement

    def relist_interval(self) -> timedelta:
        tracking = self.state.placement
        phase = tracking.status.get("phase") if tracking is not None else None
        if phase == "Placed":
            return RELIST_PLACED
        return RELIST_PENDING if tracking is None or not tracking.homes else RELIST_PLACING

    async def list_clusters(self) -> None:
        tracking = self.placement_tracking()
        listed = await kube_calls.list_objects(
            ListObjectsInput(api_version=OME_API_VERSION, kind="WorkloadCluster", plural="workloadclusters"),
            summary="list WorkloadClusters (labels and Ready) to choose homes",
        )
        tracking.clusters = [planner.cluster_row(item) for item in listed.items]
        tracking.listed_at = workflow.now().isoformat()

    async def place(self, isvc: InferenceService, relist: bool) -> None:
        """One pass of the placement source."""
        state = self.state
        tracking = self.placement_tracking()
        if state.applied_generation != state.generation:
            written = await self.write_object(isvc)
            tracking.object_generation = self.state.object_generation or written.generation
            relist = True
        if relist or tracking.listed_at is None:
            await self.list_clusters()
        current = sorted(cluster for cluster, home in tracking.homes.items() if not home.removing)
        plan = planner.plan_homes(isvc, tracking.clusters, current)
        if plan.hold is None:
            # A held plan (capacity not reported, a ceiling exceeded) changes nothing.
            for home in plan.homes:
                await self.keep_home(isvc, home.cluster, home.replicas)
            chosen = {home.cluster for home in plan.homes}
            for cluster, home_tracking in tracking.homes.items():
                if cluster not in chosen and not home_tracking.removing:
                    home_tracking.removing = True
                    await self.tell_member_to_delete(isvc_workflow_id(isvc.namespace, isvc.name, cluster),
                                                     home_tracking)
        for cluster in [c for c, t in tracking.homes.items() if t.removing and t.report and t.report.deleted]:
            del tracking.homes[cluster]
        await self.pass_on_pause()
        self.refuse_scale_requests(isvc)
        status, conditions = planner.placement_view(
            plan, {c: t.report for c, t in tracking.homes.items() if not t.removing}
        )
        tracking.status, tracking.conditions = status, conditions
        state.applied_generation = state.generation
        state.observed_generation = state.object_generation
        if routed(isvc):
            await self.tell_trafficmap(isvc, placed=status.get("phase") == "Placed")
        elif tracking.trafficmap_started and not tracking.trafficmap_deleted and workflow.patched(TRAFFICMAP_UNROUTED):
            # Un-routed (`spec.routing.enabled: false`): the map withdraws its route and goes.
            await deliver(trafficmap_workflow_id(isvc.namespace, isvc.name), SIGNAL_TRAFFICMAP_DELETE, None)
            tracking.trafficmap_deleted = True

    async def keep_home(self, isvc: InferenceService, cluster: str, replicas: int | None) -> None:
        state = self.state
        tracking = self.placement_tracking()
        home = tracking.homes.setdefault(cluster, HomeTracking(cluster=cluster))
        home.replicas = replicas
        if home.started and home.report is not None and home.report.deleted and workflow.patched(MEMBER_GONE):
            # The member deleted itself (a `delete` sent to it directly) while placement keeps
            # its home: start it again.
            home.started, home.report, home.pause_sent, home.sent, home.removing = False, None, "", "", False
        copy = MemberApply(
            manifest=planner.member_manifest(state.manifest, cluster, replicas, state.isvc_uid),
            source_generation=state.generation,
        )
        fingerprint = json.dumps(copy.manifest, sort_keys=True)
        if home.sent == fingerprint:
            return
        workflow_id = isvc_workflow_id(isvc.namespace, isvc.name, cluster)
        if home.started:
            if await deliver(workflow_id, SIGNAL_MEMBER_APPLY, copy):
                home.sent = fingerprint
                return
            if not workflow.patched(MEMBER_GONE):
                return
            # The member can no longer be signalled: it ended (terminated, failed, deleted on
            # its own) while its home stays. Start it again with this copy.
            workflow.logger.warning("member %s is gone while its home stays: starting it again", workflow_id)
            home.started, home.report, home.pause_sent = False, None, ""
        if not home.started:
            try:
                await workflow.start_child_workflow(
                    INFERENCE_SERVICE,
                    {"manifest": copy.manifest, "home": cluster, "placement_parent": workflow.info().workflow_id,
                     "source_generation": state.generation, "cluster": state.cluster.model_dump(mode="json")},
                    id=workflow_id,
                    task_queue=cluster_task_queue(workflow.info().task_queue, cluster),
                    parent_close_policy=workflow.ParentClosePolicy.ABANDON,
                    static_summary=f"InferenceService {isvc.name} in workload cluster {cluster}",
                )
                home.started, home.sent = True, fingerprint
                return
            except WorkflowAlreadyStartedError:
                home.started = True
        if await deliver(workflow_id, SIGNAL_MEMBER_APPLY, copy):
            home.sent = fingerprint

    async def pass_on_pause(self) -> None:
        """`pause` / `resume` on the source steer every home (each pauses its own Instances)."""
        state = self.state
        namespace, name = identity(state.manifest)
        depth = state.pause.value if state.pause is not None else ""
        for cluster, home in self.placement_tracking().homes.items():
            if not home.started or home.removing or home.pause_sent == depth:
                continue
            workflow_id = isvc_workflow_id(namespace, name, cluster)
            signal, value = (SIGNAL_PAUSE, depth) if depth else (SIGNAL_RESUME, None)
            if await deliver(workflow_id, signal, value):
                home.pause_sent = depth

    def refuse_scale_requests(self, isvc: InferenceService) -> None:
        """A placement source runs no replicas: a `scale` goes to a home, or into the spec."""
        requests, self.state.scale_requests = self.state.scale_requests, []
        for request in requests:
            homes = ", ".join(isvc_workflow_id(isvc.namespace, isvc.name, c) for c in sorted(self.placement_tracking().homes))
            self.reject(
                SIGNAL_SCALE, request.model_dump(mode="json"), SCALE_REJECTED,
                f"scale refused: {isvc.name} is placed across workload clusters and runs no replicas here; "
                f"change spec.engine.minReplicas/maxReplicas (or spec.placement.split.replicas), or signal "
                f"scale to a home ({homes or 'none yet'})",
            )

    async def tell_trafficmap(self, isvc: InferenceService, placed: bool) -> None:
        state = self.state
        tracking = self.placement_tracking()
        routing = isvc.spec.routing
        annotations = isvc.metadata.annotations or {}
        report = HomesReport(
            generation=tracking.object_generation or state.generation,
            isvc_uid=state.isvc_uid or "",
            mode=(isvc.spec.placement.mode if isvc.spec.placement else None) or "Single",
            routing=routing.model_dump(mode="json", by_alias=True, exclude_none=True) if routing else {},
            annotations={k: v for k, v in annotations.items() if k in planner.ROUTING_ANNOTATIONS},
            homes=[
                HomeReport(cluster=cluster, endpoint=r.endpoint, **planner.servable_counts(r.components))
                for cluster, home in sorted(tracking.homes.items())
                # A home that refused its latest copy still serves the one before: it keeps its entry.
                if not home.removing and (r := home.report) is not None
            ],
            placed=placed,
        )
        if tracking.trafficmap_deleted and workflow.patched(TRAFFICMAP_UNROUTED):
            # Routed again after `spec.routing.enabled: false` deleted the map: a new one.
            tracking.trafficmap_started, tracking.trafficmap_deleted, tracking.trafficmap_sent = False, False, ""
        fingerprint = report.model_dump_json()
        if fingerprint == tracking.trafficmap_sent:
            return
        workflow_id = trafficmap_workflow_id(isvc.namespace, isvc.name)
        if not tracking.trafficmap_started:
            try:
                await workflow.start_child_workflow(
                    TRAFFIC_MAP,
                    TrafficMapInput(namespace=isvc.namespace, isvc=isvc.name, isvc_uid=state.isvc_uid or ""),
                    id=workflow_id,
                    parent_close_policy=workflow.ParentClosePolicy.ABANDON,
                    static_summary=f"TrafficMap of {isvc.name}: weights across its homes",
                )
            except WorkflowAlreadyStartedError:
                pass
            tracking.trafficmap_started = True
        if await deliver(workflow_id, SIGNAL_HOMES_CHANGED, report):
            tracking.trafficmap_sent = fingerprint
        elif workflow.patched(TRAFFICMAP_UNROUTED):
            # The map's workflow is gone (it ended after an un-route, or was terminated): the
            # next pass starts it again.
            tracking.trafficmap_started = False

    async def tear_down_homes(self) -> bool:
        """Delete every home (each drains its Instances), then the TrafficMap, then the object."""
        state = self.state
        namespace, name = identity(state.manifest)
        tracking = self.placement_tracking()
        for cluster, home in tracking.homes.items():
            if not home.removing:
                home.removing = True
                await self.tell_member_to_delete(isvc_workflow_id(namespace, name, cluster), home)
        if any(not (h.report and h.report.deleted) for h in tracking.homes.values() if h.started):
            await self.write_status()
            return False
        if tracking.trafficmap_started and not tracking.trafficmap_deleted:
            await deliver(trafficmap_workflow_id(namespace, name), SIGNAL_TRAFFICMAP_DELETE, None)
            tracking.trafficmap_deleted = True
        return True

    async def tell_member_to_delete(self, workflow_id: str, home: HomeTracking) -> None:
        """Signal `delete` to a dropped home's member; one that can no longer be signalled has
        ended and will never report its deletion, so it counts as deleted."""
        if not home.started or await deliver(workflow_id, SIGNAL_DELETE, None):
            return
        if workflow.patched(MEMBER_GONE):
            workflow.logger.warning("member %s is gone: its home counts as deleted", workflow_id)
            base = home.report or MemberReport(cluster=home.cluster, generation=0)
            home.report = base.model_copy(update={"deleted": True})

    def status_body(self) -> dict[str, Any]:
        if self.state.placement is None:
            return super().status_body()
        return self.placement_body()

    def phase(self) -> str:
        state = self.state
        if state.placement is None:
            return super().phase()
        if state.deleting:
            return "Deleting"
        if state.paused:
            return "Paused"
        ready = next((c for c in state.conditions if c.type == "Ready"), None)
        if ready is not None and ready.status == "True":
            return "Ready"
        if state.placement.status.get("phase") == "Failed":
            return "Failed"
        reported = any(h.report is not None for h in state.placement.homes.values())
        return "Progressing" if reported else "Creating"

    def placement_body(self) -> dict[str, Any]:
        """The source's status: `placement`, its source conditions and `Ready`."""
        state = self.state
        tracking = self.placement_tracking()
        return planner.source_status(
            state.applied_generation or None, tracking.status, tracking.conditions,
            {c: t.report for c, t in tracking.homes.items() if not t.removing},
            state.conditions, workflow.now(), state.deleting,
        )

