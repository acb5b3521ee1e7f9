"""The `TrafficMap` workflow: one routed multi-cluster InferenceService's weights, the
TrafficMap object that shows them, and their publication as a global endpoint.

`trafficmap/{ns}/{isvc}`, on the control-plane queue, started by the InferenceService workflow
and told of every change with `homes_changed`:

1. Resolve the routing policy from the last report over the worker's chart settings
   (`planning.trafficmap.policy`). An error that stops the map (a factor <= 0, a policy that
   does not hold together, a malformed `ome.io/traffic-drain`) is logged in OME's words; the
   map keeps its last table and `spec.observedISVCGeneration`, `Published` turns False
   `InvalidOwner`, nothing is probed or published until a fixed report arrives.
2. When due, probe every home and poll its capacity, in one activity per period
   (`planning.trafficmap.observe`).
3. Build the table and conditions (`planning.trafficmap.map`); write the TrafficMap object
   only when it changed.
4. Publish (`planning.trafficmap.publication`) when the plan changed or the resync interval
   passed: ExternalName Services, the HTTPRoute, stale Services removed.
5. Wait for a message, the next period, or the resync.

`delete` withdraws the route and its Services, deletes the map and releases its finalizer.
The run continues as new when the history grows long (capacity readings reset then, as §18's
do on a controller restart; probe gates and drains survive).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from models import kube_ops
    from models.kube_ops import ObjectRef
    from models.routing_ops import ObserveHomesInput, ObserveHomesResult, RoutingSettingsResult
    from planning.replica.conditions import PlannedCondition
    from planning.trafficmap import drains as drain_rules
    from planning.trafficmap import objects, publication, texts
    from planning.trafficmap.drains import Drain, DrainRow
    from planning.trafficmap.map import build, conditions_now
    from planning.trafficmap.observe import due, fold, settle
    from planning.trafficmap.policy import resolve
    from planning.trafficmap.state import HomesReport, TrafficMapState
    from planning.trafficmap.view import TrafficMapView, view_of
    from workflows import kube_calls, routing_calls, waiting
    from workflows.names import TRAFFIC_MAP
    from workflows.trafficmap import messages
    from workflows.trafficmap.messages import DrainRequest, DrainResult, TrafficMapInput, UndrainRequest

SAFETY_RECHECK = timedelta(minutes=10)
"""With nothing scheduled, the map is rebuilt and rewritten at least this often (reverts hand edits)."""
KEPT_TIMER = "trafficmap-kept-timer"
"""`workflow.patched` id, asked once at the start of each run: the loop's timer outlives the
wait that set it (`waiting.Waits`), so a message no longer cancels and restarts it, nor cancels
a probe's timer in the instant it fires (which the time-skipping test server rejects, stalling
the workflow). Histories from before cancelled and restarted it on every wake."""
PUBLISH_BUDGET = timedelta(minutes=2)
"""A publication write that keeps failing this long is reported `ApplyFailed` and retried at the
next resync, rather than parking the workflow on an unreachable API server."""


@workflow.defn(name=TRAFFIC_MAP)
class TrafficMapWorkflow:
    """Input `TrafficMapInput` (or `TrafficMapState` after continue-as-new); result: none
    (it ends after `delete`)."""

    @workflow.init
    def __init__(self, arg: TrafficMapInput | TrafficMapState) -> None:
        if isinstance(arg, TrafficMapState):
            self.state = arg
        else:
            self.state = TrafficMapState(namespace=arg.namespace, isvc=arg.isvc, isvc_uid=arg.isvc_uid)
        self.seq = 0
        self.waits = waiting.Waits(keep=False)
        """The loop's timer; kept across waits from `KEPT_TIMER` on (decided in `run`)."""
        self.settings = RoutingSettingsResult()
        self.refusals: list[str] = []

    # --- messages ----------------------------------------------------------------------------

    @workflow.signal(name=messages.SIGNAL_HOMES_CHANGED)
    def homes_changed(self, report: HomesReport) -> None:
        update: dict[str, object] = {"report": report}
        if report.isvc_uid:
            update["isvc_uid"] = report.isvc_uid
        self.state = self.state.model_copy(update=update)
        self.seq += 1

    @workflow.signal(name=messages.SIGNAL_DELETE)
    def delete(self) -> None:
        self.state = self.state.model_copy(update={"deleting": True})
        self.seq += 1

    @workflow.signal(name=messages.DRAIN_CLUSTER)
    def drain_signal(self, request: DrainRequest) -> None:
        if not self.refused_signal(f"drain {request.id}", self.drain_refusal(request)):
            self.apply_drain(request)

    @workflow.signal(name=messages.UNDRAIN_CLUSTER)
    def undrain_signal(self, request: UndrainRequest) -> None:
        if not self.refused_signal(f"undrain {request.id}", self.undrain_refusal(request)):
            self.apply_undrain(request)

    @workflow.update(name=messages.DRAIN_CLUSTER)
    def drain(self, request: DrainRequest) -> DrainResult:
        return DrainResult(rows=[self.apply_drain(request)])

    @drain.validator
    def check_drain(self, request: DrainRequest) -> None:
        refuse_update(self.drain_refusal(request))

    @workflow.update(name=messages.UNDRAIN_CLUSTER)
    def undrain(self, request: UndrainRequest) -> DrainResult:
        return DrainResult(rows=[self.apply_undrain(request)])

    @undrain.validator
    def check_undrain(self, request: UndrainRequest) -> None:
        refuse_update(self.undrain_refusal(request))

    def apply_drain(self, request: DrainRequest) -> DrainRow:
        drains, row = drain_rules.add(
            self.state.drains, self.in_force(), request.id, Drain(cluster=request.cluster, reason=request.reason)
        )
        self.state = self.state.model_copy(update={"drains": drains})
        self.seq += 1
        return row

    def apply_undrain(self, request: UndrainRequest) -> DrainRow:
        drains, row = drain_rules.remove(self.state.drains, self.in_force(), request.id)
        self.state = self.state.model_copy(update={"drains": drains})
        self.seq += 1
        return row

    @workflow.query(name=messages.QUERY_STATUS)
    def status(self) -> TrafficMapView:
        return view_of(self.state, self.annotated(), self.refusals)

    def annotated(self) -> dict[str, Drain]:
        """The annotation's drains (none while it is malformed: the map is stopped then)."""
        report = self.state.report
        if report is None:
            return {}
        try:
            return drain_rules.parse_annotation(report.annotations.get(texts.TRAFFIC_DRAIN_ANNOTATION))
        except ValueError:
            return {}

    def annotation_malformed(self) -> bool:
        """The report's `ome.io/traffic-drain` annotation does not parse (§20: drains and
        undrains are refused while it is so)."""
        report = self.state.report
        if report is None:
            return False
        try:
            drain_rules.parse_annotation(report.annotations.get(texts.TRAFFIC_DRAIN_ANNOTATION))
        except ValueError:
            return True
        return False

    def in_force(self) -> dict[str, Drain]:
        return drain_rules.merged(self.state.drains, self.annotated())

    def eligible(self) -> bool:
        report = self.state.report
        return report is not None and not self.state.deleting and report.routing.get("enabled") is not False

    def drain_refusal(self, request: DrainRequest) -> str | None:
        return drain_rules.drain_refusal(self.in_force(), request.id, request.cluster, self.eligible(),
                                         malformed=self.annotation_malformed())

    def undrain_refusal(self, request: UndrainRequest) -> str | None:
        return drain_rules.undrain_refusal(self.state.drains, self.annotated(), request.id, self.eligible(),
                                           malformed=self.annotation_malformed())

    def refused_signal(self, action: str, refusal: str | None) -> bool:
        """A refused signal is logged and shown in `status.refusals` (an Update is answered)."""
        if refusal is None:
            return False
        workflow.logger.warning("%s refused: %s", action, refusal)
        self.refusals = [*self.refusals, f"{action}: {refusal}"][-10:]
        return True

    # --- the loop ----------------------------------------------------------------------------

    @workflow.run
    async def run(self, arg: TrafficMapInput | TrafficMapState) -> None:
        self.waits.keep = workflow.patched(KEPT_TIMER)
        self.settings = await routing_calls.routing_settings()
        self.show()
        await workflow.wait_condition(lambda: self.state.report is not None or self.state.deleting,
                                      timeout_summary="waiting for the InferenceService's first homes report")
        while not self.state.deleting:
            seen = self.seq
            await self.reconcile()
            self.show()
            if workflow.info().is_continue_as_new_suggested():
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(self.state.for_next_run())
            wakes = [t for t in (self.state.next_probe_at, self.state.next_capacity_at, self.state.next_publish_at)
                     if t is not None]
            await self.wait_for_news(seen, min(wakes, default=None))
        await self.finish()

    async def wait_for_news(self, seen: int, until: datetime | None) -> None:
        await self.waits.wait_for_news(lambda: self.seq != seen, until, SAFETY_RECHECK,
                                       "next probe, capacity poll or publisher resync")

    async def reconcile(self) -> None:
        report = self.state.report
        assert report is not None
        resolved = resolve(report.routing, report.annotations, self.settings.probe, self.settings.capacity)
        now = workflow.now()
        if resolved.errors:
            await self.stop(resolved.errors, write_status=self.state.spec is not None)
            return
        if self.state.written is None:
            # Before the first write: a TrafficMap of that name that another InferenceService
            # controls is not ours to overwrite (§17).
            found = await kube_calls.read_object(kube_ops.ReadObjectInput(ref=self.map_ref()),
                                                 summary="read the TrafficMap before first writing it")
            problem = objects.owner_problem(found.object, self.state.namespace, self.state.isvc, self.state.isvc_uid)
            if problem is not None:
                await self.stop([problem], write_status=False)
                return
        self.state = settle(self.state.model_copy(update={"errors": []}), resolved)
        asked = due(self.state, resolved, now)
        if asked.probes or asked.capacity:
            answers = await self.observe(asked)
            now = workflow.now()
            self.state = fold(self.state, asked, answers, resolved, now)
        built = build(self.state.isvc, report, resolved, drain_rules.merged(self.state.drains, resolved.annotated_drains),
                      self.state.probes, self.state.probe_times, self.state.readings, now)
        self.state = self.state.model_copy(update={"spec": built.spec})
        resync = self.state.next_publish_at is None or now >= self.state.next_publish_at
        await self.write_map(force=resync)
        plan = publication.plan(self.state.namespace, self.state.isvc, built.spec.entries, self.endpoint_settings(),
                                resolved.global_host)
        if resync or objects.canonical(plan_key(plan)) != self.state.publication.plan_key:
            await self.publish(plan)
        elif self.state.publication.published and self.state.publication.observed_generation != self.state.map_generation:
            # The map changed (a probe time, a count) but not what the route carries: the route
            # is current for this generation too.
            current = self.state.publication.model_copy(update={"observed_generation": self.state.map_generation})
            self.state = self.state.model_copy(update={"publication": current})
        await self.write_status(built.conditions)

    async def stop(self, errors: list[str], write_status: bool) -> None:
        """An error stops the map: log it once in OME's words, keep the last table, say so."""
        for error in errors:
            if error not in self.state.errors:
                workflow.logger.error(error)
        self.state = self.state.model_copy(update={
            "errors": errors, "next_probe_at": None, "next_capacity_at": None, "next_publish_at": None,
            # Publish again once fixed, whatever the table then holds.
            "publication": self.state.publication.model_copy(update={"plan_key": None}),
        })
        if write_status:
            await self.write_status(None)

    async def observe(self, asked: ObserveHomesInput) -> ObserveHomesResult | None:
        kinds = " and ".join(k for k, v in (("probe", asked.probes), ("poll capacity of", asked.capacity)) if v)
        homes = sorted({t.cluster for t in [*asked.probes, *asked.capacity]})
        try:
            return await routing_calls.observe_homes(asked, summary=f"{kinds} {len(homes)} home(s): {', '.join(homes)}")
        except ActivityError as error:
            workflow.logger.warning("observing the homes failed; the next period tries again: %s", error.cause or error)
            return None

    # --- the TrafficMap object -----------------------------------------------------------------

    def map_ref(self) -> ObjectRef:
        return ObjectRef(api_version=objects.API_VERSION, kind="TrafficMap", name=self.state.isvc,
                         namespace=self.state.namespace, plural=objects.PLURAL)

    async def write_map(self, force: bool) -> None:
        assert self.state.spec is not None
        manifest = objects.map_manifest(self.state.namespace, self.state.isvc, self.state.isvc_uid, self.state.spec)
        key = objects.change_key(manifest)
        if key == self.state.written and not force:
            return
        result = await kube_calls.apply_object(
            kube_ops.ApplyObjectInput(manifest=manifest, plural=objects.PLURAL),
            summary=f"write TrafficMap {self.state.namespace}/{self.state.isvc}: "
            + ", ".join(f"{e.cluster}={e.weight}" for e in self.state.spec.entries),
        )
        generation = result.generation if result.generation is not None else (self.state.map_generation or 0) + 1
        self.state = self.state.model_copy(update={"written": key, "map_generation": generation})

    async def write_status(self, planned_map: list[PlannedCondition] | None) -> None:
        """Status with the map's conditions (`planned_map`; None: the last ones, the map being
        stopped) and `Published`; `lastTransitionTime` kept while a status holds."""
        published = objects.published_condition(self.state.publication, self.state.errors)
        kept = planned_map if planned_map is not None else self.planned_conditions()
        fallback = objects.publication_fallback_condition(self.state.publication)
        planned = [*kept, PlannedCondition(texts.PUBLISHED, *published),
                   PlannedCondition(texts.PUBLICATION_FALLBACK, *fallback)]
        conditions = conditions_now(self.state.conditions, planned, workflow.now(),
                                    self.state.map_generation)
        self.state = self.state.model_copy(update={"conditions": conditions})
        status = objects.map_status(self.state.isvc_uid, self.state.publication, conditions)
        key = objects.canonical(status)
        if key == self.state.status_written:
            return
        await kube_calls.patch_status(
            kube_ops.PatchStatusInput(ref=self.map_ref(), status=status, missing_ok=True),
            summary=f"TrafficMap status: Published={published[0]} {published[1]}",
        )
        self.state = self.state.model_copy(update={"status_written": key})

    def planned_conditions(self) -> list[PlannedCondition]:
        return [PlannedCondition(c.type, c.status, c.reason, c.message)
                for c in self.state.conditions if c.type not in (texts.PUBLISHED, texts.PUBLICATION_FALLBACK)]

    # --- publication ----------------------------------------------------------------------------

    def endpoint_settings(self) -> publication.EndpointSettings:
        return publication.EndpointSettings(
            global_gateway=self.settings.global_gateway, backend_port=self.settings.backend_port,
            global_host_template=self.settings.global_host_template,
        )

    async def publish(self, plan: publication.Plan) -> None:
        now = workflow.now()
        key = objects.canonical(plan_key(plan))
        outcome: dict[str, object] = {
            "reason": plan.reason, "message": plan.message, "plan_key": key, "at": now,
            "gateway_namespace": plan.gateway[0] if plan.gateway else None,
            "gateway_name": plan.gateway[1] if plan.gateway else None,
        }
        if plan.withdraw:
            await self.withdraw()
            outcome |= {"published": False, "route": {}, "hosts": {}, "route_conditions": {}}
        elif plan.route is not None:
            outcome |= await self.apply_plan(plan)
        else:
            # InvalidPlan: the last route stays as it was.
            outcome["published"] = False
        if outcome["reason"] != texts.REASON_PUBLISHED and outcome["reason"] != texts.WITHDRAWN:
            workflow.logger.error("%s: %s: %s", texts.PUBLISHER_FAILED_LOG, outcome["reason"], outcome["message"])
        resync = timedelta(seconds=self.settings.resync_interval_seconds)
        self.state = self.state.model_copy(update={
            "publication": self.state.publication.model_copy(update=outcome),
            "next_publish_at": now + resync,
        })

    async def apply_plan(self, plan: publication.Plan) -> dict[str, object]:
        assert plan.route is not None
        route_ref = ObjectRef(api_version=publication.ROUTE_API_VERSION, kind=publication.ROUTE_KIND,
                              name=publication.route_name(self.state.isvc), namespace=self.state.namespace,
                              plural=publication.ROUTE_PLURAL)
        try:
            existing = await kube_calls.read_object(
                kube_ops.ReadObjectInput(ref=route_ref), summary=f"read HTTPRoute {route_ref.namespace}/{route_ref.name}",
                schedule_to_close=PUBLISH_BUDGET,
            )
            routes = await kube_calls.list_objects(
                kube_ops.ListObjectsInput(api_version=publication.ROUTE_API_VERSION, kind=publication.ROUTE_KIND,
                                 plural=publication.ROUTE_PLURAL),
                summary=f"list HTTPRoutes: is hostname {plan.hostname} free on the gateway?",
                schedule_to_close=PUBLISH_BUDGET,
            )
        except ActivityError as error:
            return {"reason": texts.CLAIM_REJECTED, "message": f"cannot read HTTPRoutes: {error.cause or error}"[:500],
                    "published": False}
        problem = publication.claim_problem(self.state.isvc, existing.object, routes.items, plan)
        if problem is not None:
            return {"reason": texts.CLAIM_REJECTED, "message": problem, "published": False}
        try:
            for service in plan.services:
                await kube_calls.apply_object(
                    kube_ops.ApplyObjectInput(manifest=service),
                    summary=f"backend Service {service['metadata']['name']} -> {service['spec']['externalName']} "
                    f"({service['metadata']['labels'][texts.CLUSTER_LABEL]})",
                    schedule_to_close=PUBLISH_BUDGET,
                )
            await kube_calls.apply_object(
                kube_ops.ApplyObjectInput(manifest=plan.route, plural=publication.ROUTE_PLURAL),
                summary=f"HTTPRoute {route_ref.name} for {plan.hostname}: "
                + ", ".join(f"{c}={w}" for c, w in plan.weights.items()),
                schedule_to_close=PUBLISH_BUDGET,
            )
            await self.remove_backends(plan)
        except ActivityError as error:
            return {"reason": texts.APPLY_FAILED, "message": f"{error.cause or error}"[:500], "published": False}
        return {
            "published": True, "observed_generation": self.state.map_generation, "route": plan.weights,
            "hosts": plan.hosts,
            "route_conditions": publication.route_conditions(existing.object, plan.gateway),
        }

    async def remove_backends(self, plan: publication.Plan | None) -> None:
        """Delete this map's backend Services the plan no longer has (all of them without a plan)."""
        listed = await kube_calls.list_objects(
            kube_ops.ListObjectsInput(api_version="v1", kind="Service", namespace=self.state.namespace,
                             label_selector=publication.backend_selector(self.state.isvc)),
            summary=f"list the backend Services of {self.state.isvc}", schedule_to_close=PUBLISH_BUDGET,
        )
        for name in publication.stale_services(listed.items, plan):
            await kube_calls.delete_object(
                kube_ops.DeleteObjectInput(ref=ObjectRef(api_version="v1", kind="Service", name=name,
                                                namespace=self.state.namespace)),
                summary=f"delete backend Service {name} (no longer in the map)", schedule_to_close=PUBLISH_BUDGET,
            )

    async def withdraw(self) -> None:
        """Remove the route (only if ours) and every backend Service of this map."""
        route_ref = ObjectRef(api_version=publication.ROUTE_API_VERSION, kind=publication.ROUTE_KIND,
                              name=publication.route_name(self.state.isvc), namespace=self.state.namespace,
                              plural=publication.ROUTE_PLURAL)
        try:
            existing = await kube_calls.read_object(
                kube_ops.ReadObjectInput(ref=route_ref), summary=f"read HTTPRoute {route_ref.name} before withdrawing it",
                schedule_to_close=PUBLISH_BUDGET,
            )
            labels = ((existing.object or {}).get("metadata") or {}).get("labels") or {}
            if existing.found and labels.get(texts.ENDPOINT_ISVC_LABEL) == self.state.isvc:
                await kube_calls.delete_object(kube_ops.DeleteObjectInput(ref=route_ref),
                                               summary=f"withdraw HTTPRoute {route_ref.name}",
                                               schedule_to_close=PUBLISH_BUDGET)
        except ActivityError as error:
            # No HTTPRoute kind installed: there is no route to remove.
            workflow.logger.info("no HTTPRoute to withdraw: %s", error.cause or error)
        await self.remove_backends(None)

    # --- the end -------------------------------------------------------------------------------------

    async def finish(self) -> None:
        """Withdraw, then delete the map and release the publisher's finalizer."""
        self.show()
        await self.withdraw()
        ref = self.map_ref()
        await kube_calls.delete_object(kube_ops.DeleteObjectInput(ref=ref), summary=f"delete TrafficMap {ref.namespace}/{ref.name}")
        current = await kube_calls.read_object(kube_ops.ReadObjectInput(ref=ref), summary="read the TrafficMap's finalizers")
        finalizers = ((current.object or {}).get("metadata") or {}).get("finalizers") or []
        if current.found and texts.FINALIZER in finalizers:
            await kube_calls.patch_object(
                kube_ops.PatchObjectInput(ref=ref, patch={"metadata": {"finalizers": [f for f in finalizers if f != texts.FINALIZER]}},
                                 resource_version=(current.object or {}).get("metadata", {}).get("resourceVersion"),
                                 missing_ok=True),
                summary=f"release finalizer {texts.FINALIZER}: the route is removed",
            )
        await workflow.wait_condition(workflow.all_handlers_finished)

    def show(self) -> None:
        workflow.set_current_details(self.status().message)


def refuse_update(refusal: str | None) -> None:
    """Refuse a drain or undrain Update with §20's text: nothing enters the history."""
    if refusal is not None:
        raise ApplicationError(refusal, type=texts.REFUSED, non_retryable=True)


def plan_key(plan: publication.Plan) -> dict[str, object]:
    return {"reason": plan.reason, "message": plan.message, "route": plan.route, "services": plan.services}
