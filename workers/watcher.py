"""The watcher process: `python -m workers.watcher`.

Runs the pod watcher (`workers.watch.pods`: pods, nodes and EndpointSlices to `pods_changed`
signals to Instances) and the Deployment watcher (`workers.watch.deployments`: the product's
Deployments to `deployment_changed` signals to InferenceServices) on the control plane until
SIGTERM or SIGINT.

Workload clusters (reference §16): every refresh interval `workers.clusters.ClusterDirectory`
re-reads the WorkloadClusters and probes them, and this process writes each one's `Ready`
condition. Each reachable workload cluster gets its own pod and Deployment watchers, built
with that cluster's client and `cluster=<name>`, whose signals go to the home's workflows
(`instance/...@{cluster}`, `isvc/{ns}/{name}@{cluster}`); `cluster_watchers` starts them as
clusters appear and stops them as they go. After each pass `workers.watch.pool_import` imports
the InferencePools the workload clusters export.

High availability (`workers.leader`): two watchers run and campaign for the Lease `ome-watcher`.
Both list and watch, so the standby's view is warm; only the leader signals, writes the
workload clusters' conditions and runs their watchers. The leader's Lease carries its pod
watcher's delivered mark (`DELIVERED_ANNOTATION`) and the Instances it held back at that mark
(`HELD_ANNOTATION`), so a new leader signals only the Instances that changed after it or were
held (`PodWatcher.lead`).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping

from kubernetes.client import ApiClient
from temporalio.client import Client

from planning.leadership import held_keys
from planning.pod_summary import InstanceKey
from workers.client import connect, exit_process
from workers.clusters import ClusterDirectory, PerCluster
from workers.config import Settings, kube_api_client
from workers.leader import WATCHER_LEASE, LeaderElector
from workers.stopping import handle_stop_signals
from workers.watch.deployments import DeploymentSink, DeploymentWatcher, TemporalDeploymentSink
from workers.watch.loop import WatchLoop
from workers.watch.pods import PodWatcher, SignalSink, TemporalSignalSink
from workers.watch.pool_import import PoolImporter

logger = logging.getLogger("workers.watcher")

DELIVERED_ANNOTATION = "ome.io/delivered"
"""Lease annotation: JSON of the leader's `PodWatcher.delivered()` (kind -> resourceVersion)."""
HELD_ANNOTATION = "ome.io/held"
"""Lease annotation: the Instances whose progress the leader held back at that mark
(`PodWatcher.delivered_held()`, `planning.leadership.held_text`)."""


def delivered_mark(annotations: Mapping[str, str]) -> tuple[dict[str, str], set[InstanceKey]]:
    """The mark a previous leader left in the Lease and the Instances it was holding back;
    an empty mark (everything is sent again) when either is unreadable."""
    try:
        mark = json.loads(annotations.get(DELIVERED_ANNOTATION, "{}"))
        held = held_keys(annotations.get(HELD_ANNOTATION, ""))
    except ValueError:
        return {}, set()
    if not isinstance(mark, dict):
        return {}, set()
    return {str(k): str(v) for k, v in mark.items()}, held


def handover_annotations(watcher: PodWatcher) -> dict[str, str]:
    """What the leading watcher writes into its Lease at every renewal."""
    return {
        DELIVERED_ANNOTATION: json.dumps(watcher.delivered(), sort_keys=True),
        HELD_ANNOTATION: watcher.delivered_held(),
    }


def cluster_watchers(pod_sink: SignalSink, deployment_sink: DeploymentSink) -> PerCluster[list[WatchLoop]]:
    """A pod watcher and a Deployment watcher per reachable workload cluster, signalling the
    home's workflows (`cluster=<name>`)."""

    async def start(name: str, api_client: ApiClient) -> list[WatchLoop]:
        loops: list[WatchLoop] = [
            PodWatcher(api_client, pod_sink, cluster=name),
            DeploymentWatcher(api_client, deployment_sink, cluster=name),
        ]
        for loop in loops:
            await loop.start()
        logger.info("watching workload cluster %s", name)
        return loops

    async def stop(name: str, loops: list[WatchLoop]) -> None:
        logger.info("no longer watching workload cluster %s", name)
        await asyncio.gather(*(loop.stop() for loop in loops))

    return PerCluster(start, stop)


async def watch_clusters(settings: Settings, client: Client, stop: asyncio.Event) -> None:
    """Workload clusters until `stop`: Ready conditions, per-cluster watchers, pool imports."""
    control_plane = kube_api_client(settings)
    directory = ClusterDirectory(
        control_plane,
        connection_grace_seconds=settings.clusters.connection_grace_seconds,
        refresh_interval_seconds=settings.clusters.refresh_interval_seconds,
    )
    watchers = cluster_watchers(TemporalSignalSink(client), TemporalDeploymentSink(client))
    importer = PoolImporter(control_plane)

    async def after_pass(found: ClusterDirectory) -> None:
        clients = found.clients()
        await watchers.reconcile(clients)
        if not stop.is_set():
            await asyncio.to_thread(importer.reconcile, clients, found.conditions())

    try:
        await directory.run(stop, after_pass, write_status=True)
    finally:
        await watchers.stop_all()
        directory.close()
        control_plane.close()  # type: ignore[no-untyped-call]


async def main() -> None:
    """Process entry point: settings from the environment, stop on SIGTERM/SIGINT."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    settings = Settings()
    client = await connect(settings.temporal, otel=settings.otel, role="watcher")
    watcher = PodWatcher(kube_api_client(settings), TemporalSignalSink(client))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    handle_stop_signals(loop, stop, "watcher")  # a stop that hangs is reported and ended
    # Deployment-mode components' Deployments, for their `<Component>Ready` conditions.
    deployments = DeploymentWatcher(kube_api_client(settings), TemporalDeploymentSink(client))
    # Both follow until this process holds the Lease: warm views, nothing sent.
    await asyncio.gather(watcher.follow(), deployments.follow())
    elector = LeaderElector(
        kube_api_client(settings),
        WATCHER_LEASE,
        settings.leader,
        annotations=lambda: handover_annotations(watcher),
    )

    async def lead(previous: Mapping[str, str]) -> None:
        watcher.lead(*delivered_mark(previous))
        deployments.lead()
        lost = asyncio.Event()
        clusters = asyncio.create_task(watch_clusters(settings, client, lost))
        try:
            await asyncio.shield(clusters)  # until cancelled
        finally:
            # Nothing in flight any more before the Lease is released (`LeaderElector.run`): the
            # clusters' pass ends its blocking call in flight (a thread cannot be cancelled),
            # starts no other, and stops the per-cluster watchers.
            lost.set()
            await asyncio.gather(watcher.follow(), deployments.follow(), clusters)

    logger.info("watcher starting temporal=%s identity=%s", settings.temporal.address, elector.identity)
    await watcher.start()
    await deployments.start()
    try:
        await elector.run(stop, lead)
    finally:
        await asyncio.gather(watcher.stop(), deployments.stop())
    logger.info("watcher stopped")
    # Exit from inside the loop, before `asyncio.run`'s teardown, where the SDK's runtime
    # threads can still crash the interpreter (`workers.client.exit_process`).
    exit_process(0)


if __name__ == "__main__":
    asyncio.run(main())
