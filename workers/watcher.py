"""The pod watcher: turns pod and node changes into `pods_changed` signals to Instances.

`python -m workers.watcher` runs it as its own process. It lists, then watches, the
product's pods (label `ome.io/inferenceservice`), the nodes, and the EndpointSlices of the
product's Services, keeps the latest objects in memory, and for every Instance whose
summary (`planning.pod_summary`) changed signals `instance/{ns}/{isvc}-{component}-{index}`
with the new `InstancePods`.

Level-triggered by design: a summary is the whole current state of an Instance's pods, not
a delta, so a lost signal is repaired by the next one, and a restarted watcher (which has
sent nothing yet) brings every Instance up to date with its first pass. It never sends the
same summary twice in a row to an Instance; a resync after a 410 or a cut stream
re-evaluates everything and sends only what differs.

Threads run the blocking `kubernetes` client (one per watched kind); one asyncio task
applies their events, coalesces bursts for `coalesce_seconds` and sends signals with bounded
concurrency. Signals to Instances that do not exist (yet, or any more) are dropped: a new
Instance workflow lists its pods itself at start.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from kubernetes.client import ApiClient
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from models.instance import SIGNAL_PODS_CHANGED
from models.pods import LABEL_ISVC, InstancePods
from planning.pod_summary import InstanceKey, instance_key, instance_pods, listed_pods
from workers.watch_stream import KindWatch, WatchItem
from workflows.names import instance_workflow_id

logger = logging.getLogger("workers.watcher")

SignalSink = Callable[[str, InstancePods], Awaitable[bool]]
"""Delivers one summary to one workflow id; False when the workflow does not exist."""

PODS, NODES, SLICES = "pods", "nodes", "endpointslices"


class TemporalSignalSink:
    """Signals `pods_changed` through a Temporal client; NotFound means 'no such Instance'."""

    def __init__(self, client: Client) -> None:
        self.client = client

    async def __call__(self, workflow_id: str, summary: InstancePods) -> bool:
        try:
            await self.client.get_workflow_handle(workflow_id).signal(SIGNAL_PODS_CHANGED, summary)
        except RPCError as error:
            if error.status == RPCStatusCode.NOT_FOUND:
                return False
            raise
        return True


@dataclass
class WatcherStats:
    """Counters tests and logs read: how much the watcher did and why."""

    signals_sent: int = 0
    signals_dropped: int = 0
    signal_failures: int = 0
    resyncs: dict[str, int] = field(default_factory=dict)
    events: int = 0


class PodWatcher:
    """Watches one cluster and signals Instance workflows; `start()`/`stop()` or `run()`."""

    def __init__(
        self,
        api_client: ApiClient,
        sink: SignalSink,
        *,
        cluster: str = "",
        coalesce_seconds: float = 0.05,
        max_concurrent_signals: int = 16,
        read_timeout_seconds: float = 90.0,
        watch_endpoints: bool = True,
    ) -> None:
        self.sink = sink
        self.cluster = cluster
        self.coalesce_seconds = coalesce_seconds
        self.stats = WatcherStats()
        self._semaphore = asyncio.Semaphore(max_concurrent_signals)
        self._kinds = [
            KindWatch(api_client, PODS, "/api/v1/pods", LABEL_ISVC, read_timeout_seconds),
            KindWatch(api_client, NODES, "/api/v1/nodes", "", read_timeout_seconds),
        ]
        if watch_endpoints:
            self._kinds.append(
                KindWatch(
                    api_client,
                    SLICES,
                    "/apis/discovery.k8s.io/v1/endpointslices",
                    LABEL_ISVC,
                    read_timeout_seconds,
                    optional=True,
                )
            )
        self._objects: dict[str, dict[tuple[str, str], dict[str, Any]]] = {
            kind.name: {} for kind in self._kinds
        }
        self._synced: set[str] = set()
        self._disabled: set[str] = set()
        self._resource_version = ""
        self._dirty: set[InstanceKey] = set()
        self._last_sent: dict[InstanceKey, InstancePods] = {}
        self._queue: asyncio.Queue[WatchItem] | None = None
        self._task: asyncio.Task[None] | None = None
        self._synced_event = asyncio.Event()
        self._retry_delay = 0.5

    # --- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the watch threads and the signalling task on the running loop."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[WatchItem] = asyncio.Queue()
        self._queue = queue

        def post(item: WatchItem) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:
                pass  # the loop closed while a thread was still delivering: we are stopping

        for kind in self._kinds:
            kind.start(post)
        self._task = asyncio.create_task(self._loop(), name="pod-watcher")

    async def stop(self) -> None:
        """Stop the threads and the task; in-flight signals finish or are cancelled."""
        for kind in self._kinds:
            kind.stop()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        await asyncio.gather(*(asyncio.to_thread(kind.join, 5.0) for kind in self._kinds))

    async def wait_synced(self) -> None:
        """Wait until every kind has been listed once and the first pass was sent."""
        await self._synced_event.wait()

    async def run(self, stop: asyncio.Event) -> None:
        """Run until `stop` is set (the process entry point)."""
        await self.start()
        try:
            await stop.wait()
        finally:
            await self.stop()

    # --- applying events ---------------------------------------------------------------------

    def _all_synced(self) -> bool:
        # Summaries need every kind: a pod judged before the nodes are listed would look
        # bound to a missing node, which is evidence for force-deletion.
        return self._synced == {kind.name for kind in self._kinds}

    async def _loop(self) -> None:
        assert self._queue is not None
        queue = self._queue
        loop = asyncio.get_running_loop()
        while True:
            try:
                if self._dirty and self._all_synced():
                    # Failed signals are waiting: retry them after the back-off, or sooner.
                    try:
                        self._apply(await asyncio.wait_for(queue.get(), self._retry_delay))
                    except TimeoutError:
                        await self._flush()
                        continue
                else:
                    self._apply(await queue.get())
                # Coalesce: a rollout or a node failure changes many pods within milliseconds.
                deadline = loop.time() + self.coalesce_seconds
                while (remaining := deadline - loop.time()) > 0:
                    try:
                        self._apply(await asyncio.wait_for(queue.get(), remaining))
                    except TimeoutError:
                        break
                while not queue.empty():
                    self._apply(queue.get_nowait())
                if self._all_synced():
                    await self._flush()
            except asyncio.CancelledError:
                raise
            except Exception:
                # A bug in one pass must not end the watcher: the next event re-evaluates.
                logger.exception("watcher pass failed cluster=%s", self.cluster)

    def _apply(self, item: WatchItem) -> None:
        store = self._objects[item.kind]
        if item.kind == PODS and item.resource_version:
            self._resource_version = item.resource_version
        if item.type == "DISABLED":
            self._disabled.add(item.kind)
            self._synced.add(item.kind)
            store.clear()
            self._dirty.update(self._last_sent)
            logger.info("watch disabled kind=%s cluster=%s reason=%s", item.kind, self.cluster, item.reason)
            return
        if item.type == "RESYNC":
            self.stats.resyncs[item.kind] = self.stats.resyncs.get(item.kind, 0) + 1
            before = list(store.values())
            store.clear()
            for obj in item.objects:
                store[_object_key(obj)] = obj
            self._synced.add(item.kind)
            self._disabled.discard(item.kind)
            for obj in before + item.objects:
                self._mark(item.kind, obj)
            # Anything we reported on may have changed while we were not watching.
            self._dirty.update(self._last_sent)
            logger.info(
                "resynced kind=%s cluster=%s objects=%d resourceVersion=%s",
                item.kind,
                self.cluster,
                len(item.objects),
                item.resource_version,
            )
            return
        self.stats.events += 1
        obj = item.objects[0]
        key = _object_key(obj)
        old = store.get(key)
        if item.type == "DELETED":
            store.pop(key, None)
        else:
            store[key] = obj
        if old is not None:
            self._mark(item.kind, old)
        self._mark(item.kind, obj)

    def _mark(self, kind: str, obj: dict[str, Any]) -> None:
        """Mark the Instances an object's change may affect as needing a fresh summary."""
        if kind == PODS:
            key = instance_key(obj)
            if key is not None:
                self._dirty.add(key)
        elif kind == NODES:
            node_name = (obj.get("metadata") or {}).get("name")
            for pod in self._objects[PODS].values():
                if (pod.get("spec") or {}).get("nodeName") == node_name:
                    key = instance_key(pod)
                    if key is not None:
                        self._dirty.add(key)
        else:
            metadata = obj.get("metadata") or {}
            namespace, isvc = metadata.get("namespace"), (metadata.get("labels") or {}).get(LABEL_ISVC)
            for pod in self._objects[PODS].values():
                key = instance_key(pod)
                if key is not None and key[0] == namespace and key[1] == isvc:
                    self._dirty.add(key)

    # --- summarizing and signalling ------------------------------------------------------------

    def summaries(self, keys: set[InstanceKey]) -> dict[InstanceKey, InstancePods]:
        """The current summary of each Instance in `keys` (empty pods when all are gone)."""
        members: dict[InstanceKey, list[dict[str, Any]]] = {key: [] for key in keys}
        for pod in self._objects[PODS].values():
            key = instance_key(pod)
            if key in members:
                members[key].append(pod)
        nodes = {name: node for (_, name), node in self._objects[NODES].items()}
        slices_by_isvc: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for (namespace, _), endpoint_slice in self._objects.get(SLICES, {}).items():
            isvc = ((endpoint_slice.get("metadata") or {}).get("labels") or {}).get(LABEL_ISVC, "")
            slices_by_isvc.setdefault((namespace, isvc), []).append(endpoint_slice)
        result = {}
        for key, pods in members.items():
            slices = slices_by_isvc.get((key[0], key[1]))
            result[key] = instance_pods(
                key,
                pods,
                nodes,
                resource_version=self._resource_version,
                cluster=self.cluster,
                endpoints=listed_pods(slices) if slices else None,
            )
        return result

    async def _flush(self) -> None:
        dirty, self._dirty = self._dirty, set()
        pending = []
        for key, summary in self.summaries(dirty).items():
            previous = self._last_sent.get(key)
            if not summary.pods and previous is None:
                continue  # never reported, nothing to report
            if summary.same_state(previous):
                continue
            pending.append((key, summary))
        results = await asyncio.gather(*(self._send(key, summary) for key, summary in pending))
        failed = [key for (key, _), ok in zip(pending, results, strict=True) if not ok]
        self._dirty.update(failed)
        # Back off while Temporal is unavailable, reset once signals go through again.
        self._retry_delay = min(self._retry_delay * 2, 30.0) if failed else 0.5
        if not self._synced_event.is_set():
            self._synced_event.set()
            logger.info("initial pass done cluster=%s instances=%d", self.cluster, len(self._last_sent))

    async def _send(self, key: InstanceKey, summary: InstancePods) -> bool:
        """Signal one Instance; True when handled (delivered or no such workflow)."""
        workflow_id = instance_workflow_id(*key)
        async with self._semaphore:
            try:
                delivered = await self.sink(workflow_id, summary)
            except Exception as error:  # a Temporal outage must not end the watcher
                self.stats.signal_failures += 1
                logger.warning("signal failed workflow_id=%s error=%s", workflow_id, str(error)[:300])
                return False
        if delivered:
            self.stats.signals_sent += 1
            logger.debug(
                "signalled workflow_id=%s pods=%d ready=%d serving=%d",
                workflow_id,
                len(summary.pods),
                summary.ready_count,
                summary.serving_count,
            )
        else:
            self.stats.signals_dropped += 1
            logger.debug("no such workflow workflow_id=%s", workflow_id)
        if summary.pods:
            self._last_sent[key] = summary
        else:
            # All pods gone and reported: forget the Instance until a pod appears again.
            self._last_sent.pop(key, None)
        return True


def _object_key(obj: dict[str, Any]) -> tuple[str, str]:
    metadata = obj.get("metadata") or {}
    return (str(metadata.get("namespace") or ""), str(metadata.get("name") or ""))


async def main() -> None:
    """Process entry point: settings from the environment, stop on SIGTERM/SIGINT."""
    from workers.client import connect
    from workers.config import Settings, kube_api_client

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    settings = Settings()
    client = await connect(settings.temporal, otel=settings.otel, role="watcher")
    watcher = PodWatcher(kube_api_client(settings), TemporalSignalSink(client))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    logger.info("watcher starting temporal=%s", settings.temporal.address)
    await watcher.run(stop)
    logger.info("watcher stopped")


if __name__ == "__main__":
    asyncio.run(main())
