"""The watcher process: `python -m workers.watcher`.

Runs the pod watcher (`workers.watch.pods`: pods, nodes and EndpointSlices to `pods_changed`
signals to Instances) and the Deployment watcher (`workers.watch.deployments`: the product's
Deployments to `deployment_changed` signals to InferenceServices) until SIGTERM or SIGINT.
"""

from __future__ import annotations

import asyncio
import logging
import signal

from workers.client import connect, exit_process
from workers.config import Settings, kube_api_client
from workers.watch.deployments import DeploymentWatcher, TemporalDeploymentSink
from workers.watch.pods import PodWatcher, TemporalSignalSink

logger = logging.getLogger("workers.watcher")


async def main() -> None:
    """Process entry point: settings from the environment, stop on SIGTERM/SIGINT."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    settings = Settings()
    client = await connect(settings.temporal, otel=settings.otel, role="watcher")
    watcher = PodWatcher(kube_api_client(settings), TemporalSignalSink(client))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    # Deployment-mode components' Deployments, for their `<Component>Ready` conditions.
    deployments = DeploymentWatcher(kube_api_client(settings), TemporalDeploymentSink(client))
    logger.info("watcher starting temporal=%s", settings.temporal.address)
    await asyncio.gather(watcher.run(stop), deployments.run(stop))
    logger.info("watcher stopped")
    # Exit from inside the loop, before `asyncio.run`'s teardown, where the SDK's runtime
    # threads can still crash the interpreter (`workers.client.exit_process`).
    exit_process(0)


if __name__ == "__main__":
    asyncio.run(main())
