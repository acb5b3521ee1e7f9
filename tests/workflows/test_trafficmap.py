"""The `TrafficMap` workflow with the real activities: kubesim as the control plane, a local
HTTP server standing in for the home gateways, on the time-skipping server.

What it shows: weights from the homes' counts and factors (spec 000's example), the TrafficMap
object and its publication as an HTTPRoute with ExternalName backends carrying the same
weights; probe gates set and lifted; capacity ceilings lowering `allocated` with §18's
fallback texts; drains by ID and their refusals; a zero factor freezing the map and a fixed
spec resuming it; `Withdrawn` without a gateway; and a worker restart mid-run.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import pytest
import pytest_asyncio
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from kubesim.handle import KubeSim
from models.routing_ops import RoutingSettingsResult
from planning.controller.state_metrics import TRAFFICMAP_FALLBACK_HOMES, state_samples
from planning.trafficmap import texts
from tests.fixtures.workload import eventually
from tests.kubesim.helpers import raw_request
from tests.unit.planning.trafficmap.routing_blocks import CAPACITY, PROBE
from tests.workflows.trafficmap_harness import (
    ISVC,
    NAMESPACE,
    Gateways,
    TrafficMapHarness,
    routing_settings,
)
from workers.worker import build_worker
from workflows.trafficmap.messages import (
    DRAIN_CLUSTER,
    SIGNAL_DELETE,
    SIGNAL_HOMES_CHANGED,
    UNDRAIN_CLUSTER,
    DrainRequest,
    DrainResult,
    UndrainRequest,
)

pytestmark = [pytest.mark.workflows, pytest.mark.kubesim]

A, B = "worker-a", "worker-b"


@pytest_asyncio.fixture(loop_scope="session")
async def harness(workflow_env: WorkflowEnvironment, kubesim: KubeSim, task_queue: str) -> AsyncIterator[TrafficMapHarness]:
    gateways = Gateways(workflow_env)
    await gateways.start()
    h = TrafficMapHarness(workflow_env, kubesim, gateways, task_queue)
    h.prepare()
    try:
        yield h
    finally:
        await gateways.stop()


@asynccontextmanager
async def worker(
    h: TrafficMapHarness, settings: RoutingSettingsResult, cached: int = 100, client: Client | None = None
) -> AsyncIterator[Worker]:
    async with build_worker(client or h.env.client, h.task_queue, h.sim.api_client(), routing=settings,
                            max_cached_workflows=cached) as running:
        yield running


async def fallback_homes(h: TrafficMapHarness, expected: float) -> bool:
    """§18's gauge as the controller renders it from the TrafficMap the workflow wrote, once it
    reads `expected` (the map is written a moment after the workflow's view changes)."""

    def shown() -> bool:
        found = [s.value for s in state_samples([], datetime.now(UTC), [h.trafficmap() or {}])
                 if s.name == TRAFFICMAP_FALLBACK_HOMES and s.labels == {"namespace": NAMESPACE, "trafficmap": ISVC}]
        return found == [expected]

    return bool(await eventually(shown))


def weights_are(expected: dict[str, int]) -> Any:
    return lambda view: view.weights == expected and view.publication.published and view.publication.route == expected


async def test_weights_from_homes_are_written_and_published_with_the_same_weights(harness: TrafficMapHarness) -> None:
    async with worker(harness, routing_settings()):
        handle = await harness.start()
        await handle.signal(SIGNAL_HOMES_CHANGED, harness.report({A: (4, 4), B: (2, 2)}, generation=6,
                                                                 routing={"capacityFactors": {B: "3"}}))
        view = await harness.until(handle, weights_are({A: 2, B: 3}))

        tm = harness.trafficmap()
        assert tm is not None
        rows = [(e["cluster"], e["capacity"].get("allocated"), e["capacity"].get("ready"), e["capacity"].get("factor"),
                 e["weight"]) for e in tm["spec"]["entries"]]
        assert rows == [(A, 4, 4, None, 2), (B, 2, 2, "3", 3)]
        assert tm["spec"]["observedISVCGeneration"] == 6
        assert tm["metadata"]["ownerReferences"][0]["uid"] == harness.isvc_uid
        assert texts.FINALIZER in tm["metadata"]["finalizers"]
        published = {c["type"]: c for c in tm["status"]["conditions"]}[texts.PUBLISHED]
        assert (published["status"], published["reason"], published["message"]) == (
            "True", "Published", 'TrafficMap is published by publisher "gatewayapi"'
        )
        assert tm["status"]["observedTrafficMapGeneration"] == tm["metadata"]["generation"]
        assert tm["status"]["gatewayRef"] == {"namespace": "gateways", "name": "global"}
        assert tm["status"]["publisher"] == "gatewayapi" and tm["status"]["sourceUID"] == harness.isvc_uid

        route = harness.route()
        assert route is not None
        assert route["spec"]["hostnames"] == ["chat.prod.global.example.com"]
        assert route["spec"]["parentRefs"][0]["name"] == "global"
        assert harness.route_weights() == {A: 2, B: 3}
        backends = harness.backends()
        assert {s["spec"]["externalName"] for s in backends} == {"127.0.0.1"}
        assert {s["metadata"]["labels"]["ome.io/placement-endpoint-isvc"] for s in backends} == {"chat"}
        assert all(s["spec"]["ports"][0]["port"] == 8080 and s["spec"]["type"] == "ExternalName" for s in backends)
        assert view.conditions[0].type == texts.ROUTABLE and view.conditions[0].status == "True"
        # `kubectl get trafficmap`: NAME MODE PUBLISHED ROUTABLE OVERRIDE REASON AGE.
        code, table = raw_request(harness.sim, "GET", "/apis/ome.io/v1beta1/namespaces/prod/trafficmaps",
                                  accept="application/json;as=Table;v=v1;g=meta.k8s.io,application/json")
        assert code == 200
        assert [c["name"] for c in table["columnDefinitions"]] == [
            "Name", "MODE", "PUBLISHED", "ROUTABLE", "OVERRIDE", "REASON", "AGE"
        ]
        assert table["rows"][0]["cells"][:6] == ["chat", "All", "True", "True", "False", "Routable"]

        # "2" and "6" give the same weights as "3" alone; a home that leaves takes its backend along.
        await handle.signal(SIGNAL_HOMES_CHANGED, harness.report({A: (4, 4), B: (2, 2)}, generation=7,
                                                                 routing={"capacityFactors": {A: "2", B: "6"}}))
        later = await harness.until(handle, lambda v: v.observed_isvc_generation == 7 and weights_are({A: 2, B: 3})(v))
        # Conditions keep their transition time while their status holds.
        assert {c.type: c.last_transition_time for c in later.conditions} == {
            c.type: c.last_transition_time for c in view.conditions
        }
        await handle.signal(SIGNAL_HOMES_CHANGED, harness.report({A: (4, 4)}, generation=8))
        await harness.until(handle, weights_are({A: 1}))
        assert len(harness.backends()) == 1

        await handle.signal(SIGNAL_DELETE)
        await handle.result()
        assert harness.route() is None and harness.backends() == [] and harness.trafficmap() is None


async def test_a_failing_probe_gates_a_home_then_passing_lifts_it(harness: TrafficMapHarness) -> None:
    async with worker(harness, routing_settings(probe=PROBE)):
        handle = await harness.start()
        await handle.signal(SIGNAL_HOMES_CHANGED, harness.report({A: (2, 2), B: (2, 2)}))
        await harness.until(handle, weights_are({A: 1, B: 1}))
        assert harness.gateways.home(A).requests[0] == "GET /prod/chat/healthz"

        harness.gateways.home(B).probe_status = 503
        view = await harness.until(handle, weights_are({A: 1, B: 0}))
        entry = {e.cluster: e for e in view.entries}[B]
        assert entry.probe is not None and entry.probe.gated and entry.probe.message == "HTTP 503"
        assert entry.probe.consecutive_failures >= PROBE["failureThreshold"] and not entry.healthy
        assert harness.route_weights() == {A: 1, B: 0}

        # Every home gated under Drain: all weights 0, Routable False AllHomesProbeFailed.
        harness.gateways.home(A).probe_status = 503
        view = await harness.until(handle, weights_are({A: 0, B: 0}))
        routable = view.conditions[0]
        assert (routable.status, routable.reason, routable.message) == (
            "False", "AllHomesProbeFailed", "2 home(s) have conclusive probe failures; all route weights are zero"
        )

        # A 3xx is Unknown: counters and gate unchanged.
        harness.gateways.home(A).probe_status = 301
        view = await harness.until(handle, lambda v: {e.cluster: e for e in v.entries}[A].probe.result == "Unknown")
        assert {e.cluster: e for e in view.entries}[A].probe.message == "HTTP 301 (not in accept or gate list)"
        assert view.weights == {A: 0, B: 0}

        harness.gateways.home(A).probe_status = 200
        harness.gateways.home(B).probe_status = 200
        await harness.until(handle, weights_are({A: 1, B: 1}))

        # A service's own `disabled: true` replaces the chart's probe: no probe blocks.
        await handle.signal(SIGNAL_HOMES_CHANGED, harness.report({A: (2, 2), B: (2, 2)}, generation=2,
                                                                 routing={"probe": {"disabled": True}}))
        view = await harness.until(handle, lambda v: v.observed_isvc_generation == 2)
        assert all(e.probe is None for e in view.entries)


async def test_capacity_reports_lower_allocated_and_failures_fall_back(harness: TrafficMapHarness) -> None:
    async with worker(harness, routing_settings(capacity=CAPACITY)):
        harness.gateways.home(A).servable = 1
        harness.gateways.home(B).servable = 5
        handle = await harness.start()
        await handle.signal(SIGNAL_HOMES_CHANGED, harness.report({A: (4, 4), B: (2, 2)}))
        view = await harness.until(handle, weights_are({A: 1, B: 2}))
        a, b = view.entries
        assert (a.capacity.allocated, a.capacity.source, a.capacity.reported) == (1, "Endpoint", 1)
        assert (b.capacity.allocated, b.capacity.source, b.capacity.reported) == (2, "ControlPlane", 5)
        fallback = {c.type: c for c in view.conditions}[texts.CAPACITY_FALLBACK]
        assert (fallback.status, fallback.reason, fallback.message) == (
            "False", "EndpointCapacityAvailable", "endpoint capacity is available for all 2 home(s)"
        )
        assert await fallback_homes(harness, 0)

        # A failed poll: no ceiling (fail-open to admitted), and why.
        harness.gateways.home(A).servable = None
        view = await harness.until(handle, weights_are({A: 2, B: 1}))
        a = view.entries[0]
        assert a.capacity.fallback_reason == "capacity endpoint returned HTTP 404" and a.capacity.source == "ControlPlane"
        fallback = {c.type: c for c in view.conditions}[texts.CAPACITY_FALLBACK]
        assert (fallback.status, fallback.reason, fallback.message) == (
            "True", "EndpointCapacityUnavailable",
            "1 of 2 home(s) are using control-plane capacity; inspect spec.entries[].capacity.fallbackReason",
        )
        assert await fallback_homes(harness, 1), "§18's gauge counts the home on control-plane capacity"
        harness.gateways.home(A).capacity_body = '{"observedAt": "2026-01-01T00:00:00Z"}'
        view = await harness.until(
            handle, lambda v: v.entries[0].capacity.fallback_reason == "capacity report has no servable count"
        )
        harness.gateways.home(A).capacity_body = '{"servable": -1, "observedAt": "2026-01-01T00:00:00Z"}'
        await harness.until(handle, lambda v: v.entries[0].capacity.fallback_reason == "capacity report is negative (-1)")

        # A ceiling of 0 removes the home's traffic.
        harness.gateways.home(A).capacity_body = None
        harness.gateways.home(A).servable = 0
        view = await harness.until(handle, weights_are({A: 0, B: 1}))
        assert view.entries[0].capacity.allocated == 0 and view.entries[0].capacity.source == "Endpoint"


async def test_drains_by_id_hold_a_cluster_at_zero_and_refusals_quote_the_spec(harness: TrafficMapHarness) -> None:
    async with worker(harness, routing_settings()):
        handle = await harness.start()
        await handle.signal(SIGNAL_HOMES_CHANGED, harness.report({A: (4, 4), B: (2, 2)},
                                                                 routing={"capacityFactors": {B: "3"}}))
        await harness.until(handle, weights_are({A: 2, B: 3}))

        result = await handle.execute_update(DRAIN_CLUSTER, DrainRequest(id="upgrade-1", cluster=B, reason="upgrade"),
                                             result_type=DrainResult)
        assert [(r.override_id, r.cluster, r.overrides) for r in result.rows] == [("upgrade-1", B, "0 -> 1")]
        view = await harness.until(handle, weights_are({A: 2, B: 0}))
        assert {e.cluster: e for e in view.entries}[B].drain_refs == ["upgrade-1"]
        override = {c.type: c for c in view.conditions}[texts.OVERRIDE_ACTIVE]
        assert (override.status, override.reason) == ("True", "OverridesApplied")

        refusals = [
            (DRAIN_CLUSTER, DrainRequest(id="upgrade-1", cluster=A), texts.DRAIN_ID_EXISTS),
            (DRAIN_CLUSTER, DrainRequest(id="x"), texts.DRAIN_NEEDS_CLUSTER),
            (UNDRAIN_CLUSTER, UndrainRequest(id="nope"), texts.UNDRAIN_ID_MISSING),
        ]
        for name, request, text in refusals:
            with pytest.raises(WorkflowUpdateFailedError) as refused:
                await handle.execute_update(name, request, result_type=DrainResult)
            assert refused.value.cause.message == text  # type: ignore[union-attr]

        # Another drain on the same cluster; one on a cluster that is not a home is pending.
        second = await handle.execute_update(DRAIN_CLUSTER, DrainRequest(id="rack-7", cluster=B), result_type=DrainResult)
        assert second.rows[0].overrides == "1 -> 2"
        await handle.execute_update(DRAIN_CLUSTER, DrainRequest(id="later", cluster="worker-c"), result_type=DrainResult)
        view = await harness.until(handle, lambda v: {c.type: c for c in v.conditions}[texts.OVERRIDE_ACTIVE].reason
                                   == texts.OVERRIDES_PENDING)
        undone = await handle.execute_update(UNDRAIN_CLUSTER, UndrainRequest(id="upgrade-1"), result_type=DrainResult)
        assert undone.rows[0].overrides == "2 -> 1"
        await handle.execute_update(UNDRAIN_CLUSTER, UndrainRequest(id="rack-7"), result_type=DrainResult)
        await harness.until(handle, weights_are({A: 2, B: 3}))

        # The annotation's drains merge with the signalled ones; a malformed one stops the map.
        await handle.signal(SIGNAL_HOMES_CHANGED, harness.report(
            {A: (4, 4), B: (2, 2)}, generation=2, routing={"capacityFactors": {B: "3"}},
            annotations={texts.TRAFFIC_DRAIN_ANNOTATION: '{"maint": {"cluster": "worker-a", "reason": "maint"}}'}))
        await harness.until(handle, weights_are({A: 0, B: 3}))
        await handle.signal(SIGNAL_HOMES_CHANGED, harness.report(
            {A: (4, 4), B: (2, 2)}, generation=3, annotations={texts.TRAFFIC_DRAIN_ANNOTATION: "{not json"}))
        view = await harness.until(handle, lambda v: bool(v.errors))
        assert view.errors[0].startswith("parse ome.io/traffic-drain: ")
        assert view.weights == {A: 0, B: 3} and view.observed_isvc_generation == 2

        # While the annotation is malformed, drains and undrains are refused (§20).
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update(DRAIN_CLUSTER, DrainRequest(id="hotfix", cluster=B), result_type=DrainResult)
        assert refused.value.cause.message == texts.ANNOTATION_MALFORMED  # type: ignore[union-attr]

        # The drain signal is the fire-and-forget form: a refusal shows in status.
        await handle.signal(UNDRAIN_CLUSTER, UndrainRequest(id="missing"))
        view = await harness.until(handle, lambda v: bool(v.refusals))
        assert view.refusals == [f"undrain missing: {texts.ANNOTATION_MALFORMED}"]


async def test_a_zero_factor_freezes_the_map_until_the_spec_is_fixed(
    harness: TrafficMapHarness, caplog: pytest.LogCaptureFixture
) -> None:
    async with worker(harness, routing_settings()):
        handle = await harness.start()
        await handle.signal(SIGNAL_HOMES_CHANGED, harness.report({A: (4, 4), B: (2, 2)}, generation=5,
                                                                 routing={"capacityFactors": {B: "3"}}))
        await harness.until(handle, weights_are({A: 2, B: 3}))

        await handle.signal(SIGNAL_HOMES_CHANGED, harness.report({A: (4, 4), B: (2, 2)}, generation=6,
                                                                 routing={"capacityFactors": {B: "0"}}))
        error = 'validate routing policy: spec.routing.capacityFactors["worker-b"] must be positive, got "0"'
        view = await harness.until(handle, lambda v: v.errors == [error])
        # The last weights are kept, in the map and on the route; the map says it is behind.
        assert view.weights == {A: 2, B: 3} and view.observed_isvc_generation == 5
        assert harness.route_weights() == {A: 2, B: 3}
        tm = harness.trafficmap()
        assert tm is not None and tm["spec"]["observedISVCGeneration"] == 5
        published = {c["type"]: c for c in tm["status"]["conditions"]}[texts.PUBLISHED]
        assert (published["status"], published["reason"]) == ("False", "InvalidOwner")
        assert any(r.getMessage().startswith(error) for r in caplog.records)

        await handle.signal(SIGNAL_HOMES_CHANGED, harness.report({A: (4, 4), B: (2, 2)}, generation=7,
                                                                 routing={"capacityFactors": {B: "1.5"}}))
        view = await harness.until(handle, lambda v: v.observed_isvc_generation == 7 and weights_are({A: 4, B: 3})(v))
        assert view.errors == [] and {e.cluster: e for e in view.entries}[B].capacity.factor == "1500m"
        tm = harness.trafficmap()
        assert tm is not None
        published = {c["type"]: c for c in tm["status"]["conditions"]}[texts.PUBLISHED]
        assert (published["status"], published["reason"]) == ("True", "Published")


async def test_without_a_gateway_the_map_is_withdrawn(harness: TrafficMapHarness) -> None:
    async with worker(harness, routing_settings(global_gateway="")):
        handle = await harness.start()
        await handle.signal(SIGNAL_HOMES_CHANGED, harness.report({A: (1, 1), B: (1, 1)}))
        view = await harness.until(handle, lambda v: v.publication.reason == texts.WITHDRAWN)
        assert view.weights == {A: 1, B: 1} and not view.publication.published
        assert harness.route() is None and harness.backends() == []
        tm = harness.trafficmap()
        assert tm is not None and tm["status"]["published"] is False
        published = {c["type"]: c for c in tm["status"]["conditions"]}[texts.PUBLISHED]
        assert (published["status"], published["reason"]) == ("False", "Withdrawn")


async def test_another_route_with_the_hostname_is_claim_rejected(harness: TrafficMapHarness) -> None:
    harness.custom.create_namespaced_custom_object(
        "gateway.networking.k8s.io", "v1", "prod", "httproutes",
        {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute", "metadata": {"name": "squatter"},
         "spec": {"parentRefs": [{"namespace": "gateways", "name": "global"}],
                  "hostnames": ["chat.prod.global.example.com"]}},
    )
    async with worker(harness, routing_settings()):
        handle = await harness.start()
        await handle.signal(SIGNAL_HOMES_CHANGED, harness.report({A: (1, 1)}))
        view = await harness.until(handle, lambda v: v.publication.reason == texts.CLAIM_REJECTED)
        assert "HTTPRoute prod/squatter already has hostname" in view.publication.message
        assert harness.route() is None


async def test_a_worker_restart_keeps_the_state_and_publishes_only_the_current_map(harness: TrafficMapHarness) -> None:
    settings = routing_settings(probe=PROBE)
    # No sticky cache: the test server would route the next tasks to the stopped worker's
    # sticky queue for a while, as a real server does only after an unclean stop.
    async with worker(harness, settings, cached=0):
        handle = await harness.start()
        await handle.signal(SIGNAL_HOMES_CHANGED, harness.report({A: (2, 2), B: (2, 2)}))
        harness.gateways.home(B).probe_status = 503
        await harness.until(handle, weights_are({A: 1, B: 0}))
        await handle.execute_update(DRAIN_CLUSTER, DrainRequest(id="maint", cluster=A), result_type=DrainResult)
        await harness.until(handle, weights_are({A: 0, B: 0}))

    # While no worker runs, the homes change; nothing is written until one comes back.
    await handle.signal(SIGNAL_HOMES_CHANGED, harness.report({A: (2, 2), B: (4, 4)}, generation=2))
    assert harness.route_weights() == {A: 0, B: 0}

    async with worker(harness, settings):
        # The new report is built on the surviving state: worker-b's gate is still shut.
        view = await harness.until(handle, lambda v: v.observed_isvc_generation == 2 and v.publication.published)
        assert {e.cluster: e.probe.gated for e in view.entries if e.probe} == {A: False, B: True}
        assert view.weights == {A: 0, B: 0} and harness.route_weights() == {A: 0, B: 0}
        harness.gateways.home(B).probe_status = 200
        # 2 and 4 reduce to 1 and 2 before the drain zeroes worker-a (§17: not renormalised).
        view = await harness.until(handle, lambda v: v.observed_isvc_generation == 2 and weights_are({A: 0, B: 2})(v))
        # The drain survived the restart; the gate was lifted by a passing probe, not forgotten.
        assert [d.id for d in view.drains] == ["maint"]
        assert harness.route_weights() == {A: 0, B: 2}
        tm = harness.trafficmap()
        assert tm is not None and tm["status"]["observedTrafficMapGeneration"] == tm["metadata"]["generation"]
        assert tm["spec"]["observedISVCGeneration"] == 2
        await handle.signal(SIGNAL_DELETE)
        await handle.result()


async def loop_timer_events(handle: Any, signals: int) -> list[str]:
    """The timer events of the map's history once `signals` signals are in it and no workflow
    task is pending (each signal's wake has run)."""
    for _ in range(200):
        events = [EventType.Name(e.event_type) for e in (await handle.fetch_history()).events]
        idle = events[-1] in ("EVENT_TYPE_WORKFLOW_TASK_COMPLETED", "EVENT_TYPE_TIMER_STARTED",
                              "EVENT_TYPE_TIMER_CANCELED", "EVENT_TYPE_MARKER_RECORDED")
        if events.count("EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED") >= signals and idle:
            return [e for e in events if e.startswith("EVENT_TYPE_TIMER_")]
        await asyncio.sleep(0.05)
    raise AssertionError(f"the map never took its {signals} signals")


async def test_a_message_that_moves_no_deadline_keeps_the_loops_timer(harness: TrafficMapHarness) -> None:
    """`trafficmap-kept-timer`: a wake by a message that leaves the next probe, poll and resync
    where they were neither cancels nor restarts the loop's timer (nor can it cancel one in the
    instant it fires, which the time-skipping server rejects)."""
    async with worker(harness, routing_settings(probe=PROBE)):
        handle = await harness.start()
        report = harness.report({A: (2, 2), B: (2, 2)})
        await handle.signal(SIGNAL_HOMES_CHANGED, report)
        await harness.until(handle, weights_are({A: 1, B: 1}))
        before = await loop_timer_events(handle, 1)
        for _ in range(3):
            await handle.signal(SIGNAL_HOMES_CHANGED, report)
        after = await loop_timer_events(handle, 4)
        assert after[len(before):] == [], f"the wakes touched the timer: {after[len(before):]}"
        await handle.signal(SIGNAL_DELETE)
        await handle.result()
