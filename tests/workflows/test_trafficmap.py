"""The `TrafficMap` workflow with the real activities: kubesim as the control plane, a local
HTTP server standing in for the home gateways, on the time-skipping server.

What it shows: weights from the homes' counts and factors (spec 000's example), the TrafficMap
object and its publication as an HTTPRoute with ExternalName backends carrying the same
weights; probe gates set and lifted; capacity ceilings lowering `allocated` with §18's
fallback texts; drains by ID and their refusals; a zero factor freezing the map and a fixed
spec resuming it; `Withdrawn` without a gateway; and a worker restart mid-run.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import pytest_asyncio
from temporalio.client import WorkflowUpdateFailedError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from kubesim.handle import KubeSim
from models.routing_ops import RoutingSettingsResult
from planning.trafficmap import texts
from tests.workflows.trafficmap_harness import (
    CAPACITY,
    PROBE,
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
async def worker(h: TrafficMapHarness, settings: RoutingSettingsResult) -> AsyncIterator[Worker]:
    async with build_worker(h.env.client, h.task_queue, h.sim.api_client(), routing=settings) as running:
        yield running


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

        # "2" and "6" give the same weights as "3" alone; a home that leaves takes its backend along.
        await handle.signal(SIGNAL_HOMES_CHANGED, harness.report({A: (4, 4), B: (2, 2)}, generation=7,
                                                                 routing={"capacityFactors": {A: "2", B: "6"}}))
        await harness.until(handle, lambda v: v.observed_isvc_generation == 7 and weights_are({A: 2, B: 3})(v))
        await handle.signal(SIGNAL_HOMES_CHANGED, harness.report({A: (4, 4)}, generation=8))
        await harness.until(handle, weights_are({A: 1}))
        assert len(harness.backends()) == 1

        await handle.signal(SIGNAL_DELETE)
        await handle.result()
        assert harness.route() is None and harness.backends() == [] and harness.trafficmap() is None
