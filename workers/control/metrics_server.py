"""The controller's `/metrics`: the product's state gauges (`planning.controller.state_metrics`)
rendered at scrape time from the InferenceReplicas and TrafficMaps the controller already lists
and watches in every namespace (`InferenceServiceController.replicas()` and `.trafficmaps()`,
its informer's cache: no second watch, no request per scrape). Served on `OME_PROMETHEUS__CONTROLLER_METRICS_ADDRESS` (host:port)
with aiohttp; before the first list completes it serves the families without samples.

Two controllers run (`workers.leader`); only the one leading serves samples (`leading`), the
standby serves the families without samples, so every state series exists once: alerts and
dashboards sum nothing twice, and a scrape of either pod succeeds.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from planning.controller.state_metrics import exposition, state_samples

logger = logging.getLogger("workers.controller")

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def split_address(address: str) -> tuple[str, int]:
    """`host:port` (`[::]:9465` too) -> (host, port); an empty host listens everywhere."""
    host, _, port = address.rpartition(":")
    return host.strip("[]") or "0.0.0.0", int(port)


class StateMetricsServer:
    """`start()` / `stop()`; `replicas` returns the current InferenceReplica objects,
    `trafficmaps` the current TrafficMaps, `leading` whether this controller holds its Lease
    (always, by default)."""

    def __init__(
        self,
        address: str,
        replicas: Callable[[], Iterable[Mapping[str, Any]]],
        trafficmaps: Callable[[], Iterable[Mapping[str, Any]]] = tuple,
        leading: Callable[[], bool] = lambda: True,
    ) -> None:
        self.host, self.port = split_address(address)
        self.replicas = replicas
        self.trafficmaps = trafficmaps
        self.leading = leading
        self._runner: web.AppRunner | None = None

    def render(self) -> str:
        leading = self.leading()  # a standby serves the families without samples
        replicas, trafficmaps = (list(self.replicas()), list(self.trafficmaps())) if leading else ([], [])
        return exposition(state_samples(replicas, datetime.now(UTC), trafficmaps))

    async def _metrics(self, _: web.Request) -> web.Response:
        response = web.Response(text=self.render())
        response.headers["Content-Type"] = CONTENT_TYPE
        return response

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, self.port).start()
        logger.info("controller metrics on http://%s:%d/metrics", self.host, self.port)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
