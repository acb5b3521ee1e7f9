"""The InferenceService controller process: `python -m workers.controller`.

Makes `kubectl apply`, `kubectl annotate` and `kubectl delete` of InferenceServices (and the
annotations of InferenceReplicas) drive the InferenceService workflows, exactly as the
`temporal` CLI does (`workers.control.service_controller`), until SIGTERM or SIGINT. Replicas
campaign for the `ome-controller` Lease (`workers.leader`): the holder relays, the others keep
warm views and take over when it is lost. A stop that hangs is reported and ended
(`workers.stopping`).

With `OME_PROMETHEUS__CONTROLLER_METRICS_ADDRESS` set it also serves `/metrics`: the product's
state gauges rendered from the InferenceReplicas it watches (`workers.control.metrics_server`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from workers.client import connect, exit_process
from workers.config import Settings, kube_api_client
from workers.control.kube import KubeWriter
from workers.control.metrics_server import StateMetricsServer
from workers.control.service_controller import InferenceServiceController
from workers.control.temporal import TemporalSender
from workers.leader import CONTROLLER_LEASE, LeaderElector
from workers.stopping import handle_stop_signals

logger = logging.getLogger("workers.controller")


async def main() -> None:
    """Process entry point: settings from the environment, stop on SIGTERM/SIGINT."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    settings = Settings()
    client = await connect(settings.temporal, otel=settings.otel, role="controller")
    api_client = kube_api_client(settings)
    controller = InferenceServiceController(
        api_client, TemporalSender(client, settings.temporal.task_queue), KubeWriter(kube_api_client(settings))
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    handle_stop_signals(loop, stop, "controller")  # a stop that hangs is reported and ended
    logger.info(
        "controller starting temporal=%s namespace=%s task_queue=%s",
        settings.temporal.address, settings.temporal.namespace, settings.temporal.task_queue,
    )
    elector = LeaderElector(kube_api_client(settings), CONTROLLER_LEASE, settings.leader)

    async def lead(_: Mapping[str, str]) -> None:
        controller.lead()
        try:
            await asyncio.Event().wait()  # until cancelled: the Lease is lost or the process stops
        finally:
            await controller.follow()  # nothing in flight any more before the Lease is released

    address = settings.prometheus.controller_metrics_address
    metrics = (
        StateMetricsServer(address, controller.replicas, controller.trafficmaps, lambda: elector.leading)
        if address
        else None
    )
    if metrics is not None:
        await metrics.start()
    await controller.follow()
    await controller.start()
    try:
        await elector.run(stop, lead)
    finally:
        await controller.stop()
        if metrics is not None:
            await metrics.stop()
    logger.info("controller stopped")
    # Exit from inside the loop, before `asyncio.run`'s teardown (`workers.client.exit_process`).
    exit_process(0)


if __name__ == "__main__":
    asyncio.run(main())
