"""The `TrafficMap` workflow's test harness: a control plane (kubesim, with the Gateway API's
HTTPRoute kind installed), a stand-in for the home clusters' inference gateways (a small
aiohttp server: `<endpoint>/capacity` answers a §18 report, any other path is the health
probe), and a worker on the time-skipping server with the routing settings the test asks for.

The gateways stamp reports with the test server's clock, which runs ahead of real time as
the test skips it: a report is as fresh as the workflow sees it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import kubernetes
from aiohttp import web
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from kubesim.handle import KubeSim
from models.routing_ops import RoutingSettingsResult
from workflows.names import TRAFFIC_MAP, trafficmap_workflow_id
from workflows.trafficmap.messages import HomeReport, HomesReport, TrafficMapInput, TrafficMapView

NAMESPACE = "prod"
ISVC = "chat"
GATEWAY = "gateways/global"
HOST_TEMPLATE = "{{ .Name }}.{{ .Namespace }}.global.example.com"


def routing_settings(**fields: Any) -> RoutingSettingsResult:
    """A published global endpoint, no probes or polling unless asked."""
    base: dict[str, Any] = {"global_gateway": GATEWAY, "backend_port": 8080, "global_host_template": HOST_TEMPLATE}
    return RoutingSettingsResult(**(base | fields))


@dataclass
class GatewayHome:
    """What one home's gateway answers."""

    probe_status: int = 200
    servable: int | None = None
    """None: the capacity path answers 404."""
    capacity_body: str | None = None
    """Overrides the report."""
    requests: list[str] = field(default_factory=list)


class Gateways:
    """The home gateways, one path prefix per cluster on one local server."""

    def __init__(self, env: WorkflowEnvironment) -> None:
        self.env = env
        self.homes: dict[str, GatewayHome] = {}
        self.runner: web.AppRunner | None = None
        self.port = 0

    def endpoint(self, cluster: str) -> str:
        return f"http://127.0.0.1:{self.port}/{cluster}/{NAMESPACE}/{ISVC}"

    def home(self, cluster: str) -> GatewayHome:
        return self.homes.setdefault(cluster, GatewayHome())

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{cluster}/{tail:.*}", self.answer)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()

    async def answer(self, request: web.Request) -> web.Response:
        home = self.home(request.match_info["cluster"])
        home.requests.append(f"{request.method} /{request.match_info['tail']}")
        if request.match_info["tail"].endswith("capacity"):
            if home.capacity_body is not None:
                return web.Response(text=home.capacity_body, content_type="application/json")
            if home.servable is None:
                return web.Response(status=404)
            now = await self.env.get_current_time()
            return web.json_response({"servable": home.servable, "observedAt": now.isoformat().replace("+00:00", "Z")})
        return web.Response(status=home.probe_status)


class TrafficMapHarness:
    def __init__(self, env: WorkflowEnvironment, sim: KubeSim, gateways: Gateways, task_queue: str) -> None:
        self.env = env
        self.sim = sim
        self.gateways = gateways
        self.task_queue = task_queue
        self.api = sim.api_client()
        self.core = kubernetes.client.CoreV1Api(self.api)
        self.custom = kubernetes.client.CustomObjectsApi(self.api)
        self.isvc_uid = ""

    def prepare(self) -> None:
        self.core.create_namespace({"metadata": {"name": NAMESPACE}})
        isvc = self.custom.create_namespaced_custom_object(
            "ome.io", "v1beta1", NAMESPACE, "inferenceservices",
            {"apiVersion": "ome.io/v1beta1", "kind": "InferenceService", "metadata": {"name": ISVC},
             "spec": {"model": {"name": "llama"}}},
        )
        self.isvc_uid = isvc["metadata"]["uid"]

    async def start(self) -> WorkflowHandle[Any, Any]:
        return await self.env.client.start_workflow(
            TRAFFIC_MAP,
            TrafficMapInput(namespace=NAMESPACE, isvc=ISVC, isvc_uid=self.isvc_uid),
            id=trafficmap_workflow_id(NAMESPACE, ISVC),
            task_queue=self.task_queue,
        )

    def report(self, homes: dict[str, tuple[int, int]], generation: int = 1, routing: dict[str, Any] | None = None,
               annotations: dict[str, str] | None = None) -> HomesReport:
        return HomesReport(
            generation=generation, isvc_uid=self.isvc_uid, mode="All", routing=routing or {},
            annotations=annotations or {}, placed=bool(homes),
            homes=[HomeReport(cluster=c, endpoint=self.gateways.endpoint(c), allocated=a, ready=r)
                   for c, (a, r) in homes.items()],
        )

    async def status(self, handle: WorkflowHandle[Any, Any]) -> TrafficMapView:
        view: TrafficMapView = await handle.query("status", result_type=TrafficMapView)
        return view

    async def until(self, handle: WorkflowHandle[Any, Any], test: Callable[[TrafficMapView], bool],
                    step: float = 5.0, within: float = 30.0) -> TrafficMapView:
        """Skip `step` seconds of workflow time at a time (probes and polls come on timers),
        with a moment of real time between for the HTTP requests and kubesim."""
        deadline = time.monotonic() + within
        while True:
            view = await self.status(handle)
            if test(view):
                return view
            if time.monotonic() > deadline:
                raise AssertionError(f"not reached within {within:.0f}s; last status:\n{view.model_dump_json(indent=1)}")
            await self.env.sleep(step)
            await asyncio.sleep(0.3)

    def trafficmap(self) -> dict[str, Any] | None:
        found = [o for o in self.sim.objects("ome.io", "trafficmaps", NAMESPACE) if o["metadata"]["name"] == ISVC]
        return found[0] if found else None

    def route(self) -> dict[str, Any] | None:
        found = [o for o in self.sim.objects("gateway.networking.k8s.io", "httproutes", NAMESPACE)
                 if o["metadata"]["name"] == f"{ISVC}-global"]
        return found[0] if found else None

    def route_weights(self) -> dict[str, int]:
        """The route's weights by cluster, through its backend Services' cluster labels."""
        route = self.route()
        if route is None:
            return {}
        services = {s["metadata"]["name"]: s for s in self.backends()}
        return {
            services[ref["name"]]["metadata"]["labels"]["ome.io/placement-cluster"]: ref["weight"]
            for ref in route["spec"]["rules"][0]["backendRefs"] if ref["name"] in services
        }

    def backends(self) -> list[dict[str, Any]]:
        return [s for s in self.sim.objects("", "services", NAMESPACE) if s["metadata"]["name"].startswith("tmb-")]
