"""The pod watcher: turns pod and node changes into `pods_changed` signals to Instances.

`python -m workers.watcher` runs it (with the Deployment watcher) as its own process. It lists, then watches, the
product's pods (label `ome.io/inferenceservice`), the nodes, and the EndpointSlices of the
product's Services, keeps the latest objects in memory, and for every Instance whose
summary (`planning.pod_summary`) changed signals `instance/{ns}/{isvc}-{component}-{index}`
with the new `InstancePods`.

Level-triggered by design: a summary is the whole current state of an Instance's pods, not
a delta, so a lost signal is repaired by the next one, and a restarted watcher (which has
sent nothing yet) brings every Instance up to date with its first pass. It never sends the
same summary twice in a row to an Instance, but for a second "no pods" when a pod came and
went between two passes (its Instance may have made it); a resync after a 410 or a cut stream
re-evaluates everything and sends only what differs.

Under leader election (`python -m workers.watcher` runs two) the standby keeps its view warm
and sends nothing. The leader's Lease carries `delivered()`, the per-kind resourceVersions up
to which every summary was delivered; a new leader's `lead(delivered)` counts as already sent
every Instance none of whose pods, pods' nodes or slices changed past that mark
(`planning.leadership.already_delivered`) and signals only the rest, plus the Instances whose
progress the old leader was holding back (`delivered_held()`, also in the Lease), so a
hand-over neither loses a change nor repeats what the workflows already have (except what the
old leader sent after its last renewal: at most one retry period's worth, sent again with the
same content).

Threads run the blocking `kubernetes` client (one per watched kind); one asyncio task
applies their events, coalesces bursts for `coalesce_seconds` and sends signals with bounded
concurrency. A change that is only progress (`planning.pod_news`: a pod appearing, scheduled,
starting, serving before its Service's slice lists it) is held back up to `settle_seconds`
and goes with whatever follows it: the way up of a pod created with its serving gate costs
its Instance one signal (ready, serving and listed), of any other two or three, not five.
The way out of a pod its Instance took out of rotation (unlisted, deleted, stopped) is held
up to `way_out_settle_seconds` and goes with its going: one signal, not three. A change a
decision reads goes at once. Signals to Instances that do not exist (yet, or any
more) are dropped: a new Instance workflow lists its pods itself at start, or starts knowing
its index had none (`InstanceState.started_clean`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kubernetes.client import ApiClient
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from models.instance import SIGNAL_PODS_CHANGED
from models.pods import LABEL_INSTANCE_INDEX, LABEL_ISVC, InstancePods
from planning.leadership import already_delivered, held_text
from planning.pod_news import must_hear_now, only_on_the_way_out
from planning.pod_summary import InstanceKey, contribution, instance_key, instance_pods, listed_pods
from workers.watch.loop import STANDBY_GONE_KEPT, WatchLoop
from workers.watch.stream import KindWatch, WatchItem
from workflows.names import instance_workflow_id

logger = logging.getLogger("workers.watcher")

SignalSink = Callable[[str, InstancePods], Awaitable[bool]]
"""Delivers one summary to one workflow id; False when the workflow does not exist."""

PODS, NODES, SLICES = "pods", "nodes", "endpointslices"
SETTLE_SECONDS = 1.0
"""How long a summary that is only progress may wait for the next change (`planning.pod_news`);
it goes out within this plus one retry interval of the loop."""
WAY_OUT_SETTLE_SECONDS = 10.0
"""The same for progress only of pods on their way out (`only_on_the_way_out`): their Instance
waits for them to go, which goes at once; a busy worker can take over a second between taking
a pod out of rotation and deleting it."""


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


class PodIndex:
    """The product's pods by (namespace, name), by Instance and by node (also the Instances'
    EndpointSlices, which have no node).

    Events touch one pod; the indexes keep a node's failure and a flush proportional to the
    pods involved rather than to every pod in the cluster.
    """

    def __init__(self) -> None:
        self.by_name: dict[tuple[str, str], dict[str, Any]] = {}
        self.by_instance: dict[InstanceKey, set[tuple[str, str]]] = {}
        self.by_node: dict[str, set[tuple[str, str]]] = {}

    def put(self, pod: dict[str, Any]) -> None:
        key = _object_key(pod)
        self.remove(key)
        self.by_name[key] = pod
        instance = instance_key(pod)
        if instance is not None:
            self.by_instance.setdefault(instance, set()).add(key)
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            self.by_node.setdefault(node, set()).add(key)

    def remove(self, key: tuple[str, str]) -> None:
        pod = self.by_name.pop(key, None)
        if pod is None:
            return
        instance = instance_key(pod)
        if instance is not None:
            _discard(self.by_instance, instance, key)
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            _discard(self.by_node, node, key)

    def clear(self) -> None:
        self.by_name.clear()
        self.by_instance.clear()
        self.by_node.clear()

    def instance(self, key: InstanceKey) -> list[dict[str, Any]]:
        return [self.by_name[name] for name in self.by_instance.get(key, ())]


class PodWatcher(WatchLoop):
    """Watches one cluster and signals Instance workflows; `start()`/`stop()` or `run()`."""

    name = "pod-watcher"

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
        settle_seconds: float = SETTLE_SECONDS,
        way_out_settle_seconds: float = WAY_OUT_SETTLE_SECONDS,
    ) -> None:
        self.sink = sink
        self.settle_seconds = settle_seconds
        self.way_out_settle_seconds = way_out_settle_seconds
        self.cluster = cluster
        self.stats = WatcherStats()
        self._semaphore = asyncio.Semaphore(max_concurrent_signals)
        kinds = [
            KindWatch(api_client, PODS, "/api/v1/pods", LABEL_ISVC, read_timeout_seconds),
            KindWatch(api_client, NODES, "/api/v1/nodes", "", read_timeout_seconds),
        ]
        if watch_endpoints:
            kinds.append(
                # Only the Instances' headless Services' slices (they carry the Instance index
                # label): those are what "listed" reads. A component Service's slices list
                # every pod of the component and would make each change O(Instances).
                KindWatch(
                    api_client,
                    SLICES,
                    "/apis/discovery.k8s.io/v1/endpointslices",
                    f"{LABEL_ISVC},{LABEL_INSTANCE_INDEX}",
                    read_timeout_seconds,
                    optional=True,
                )
            )
        super().__init__(kinds, coalesce_seconds, logger)
        self._pods = PodIndex()
        # Each Instance has a headless Service, so as many slices as Instances: a flush reads
        # the slices of the Instances it summarizes, not all of them.
        self._slices = PodIndex()
        self._objects: dict[str, dict[tuple[str, str], dict[str, Any]]] = {
            kind.name: {} for kind in self._kinds
        }
        # The pod and slice stores are the indexes' own maps, so generic code reads them like other kinds.
        self._objects[PODS] = self._pods.by_name
        if SLICES in self._objects:
            self._objects[SLICES] = self._slices.by_name
        self._synced: set[str] = set()
        self._disabled: set[str] = set()
        self._resource_version = ""
        self._dirty: set[InstanceKey] = set()
        self._last_sent: dict[InstanceKey, InstancePods] = {}
        self._held: dict[InstanceKey, float] = {}
        """Instances whose progress is held back, with the loop time it was first held."""
        self._owed: set[InstanceKey] = set()
        """Instances this leader owes their summary since it took the lead (`lead`): changed past
        the old leader's mark, or held back by it; or, while leading, one of their pods was seen (a
        watch event, or new in a re-list) before they were told of any, so a pod that came and
        went between two passes is still news (a standby leaves that to `lead`, which counts it
        changed). Each is sent even when no pod is left, which an Instance this process never
        told of pods otherwise is not."""
        self._versions: dict[str, str] = {}
        """Per kind: the resourceVersion the view has reached."""
        self._delivered: dict[str, str] = {}
        """`_versions` as of the last pass after which nothing was left to send."""
        self._delivered_held = ""
        """`held_text` of the Instances held back at that pass: not told what `_delivered` covers."""
        self._changed: dict[InstanceKey, dict[str, str]] = {}
        """Per Instance and kind (pods, slices): the version of the last event that touched it."""
        self._node_changed: dict[str, str] = {}
        """Per node: the version of its last event (an Instance depends on its pods' nodes)."""

    # --- applying events ---------------------------------------------------------------------

    def _ready(self) -> bool:
        # Summaries need every kind: a pod judged before the nodes are listed would look
        # bound to a missing node, which is evidence for force-deletion.
        return self._synced == {kind.name for kind in self._kinds}

    def _has_dirty(self) -> bool:
        return bool(self._dirty)

    def _apply(self, item: WatchItem) -> None:
        store = self._objects[item.kind]
        # resourceVersions are one counter across kinds: a summary is as new as the newest
        # thing it reflects, so a node failure seen after the workflow's own pod list is not
        # discarded by the workflow as older than that list.
        self._resource_version = _newest_version(self._resource_version, item.resource_version)
        if item.resource_version:
            self._versions[item.kind] = item.resource_version
        if item.type == "BOOKMARK":
            return
        if item.type == "DISABLED":
            self._disabled.add(item.kind)
            self._synced.add(item.kind)
            self._replace_all(item.kind, [])
            self._dirty.update(self._last_sent)
            logger.info("watch disabled kind=%s cluster=%s reason=%s", item.kind, self.cluster, item.reason)
            return
        if item.type == "RESYNC":
            self.stats.resyncs[item.kind] = self.stats.resyncs.get(item.kind, 0) + 1
            before = dict(store)
            self._replace_all(item.kind, item.objects)
            self._synced.add(item.kind)
            self._disabled.discard(item.kind)
            for obj in list(before.values()) + item.objects:
                self._mark(item.kind, obj)
            after = {_object_key(obj): obj for obj in item.objects}
            if item.kind == PODS:
                self._owe_listed(before, after)
            for key in before.keys() | after.keys():
                # An object listed carries the version of its own last change; a vanished one
                # went at some point up to the list.
                # An object whose own version moved may have changed and changed back while we
                # were not watching (a pod Ready -> NotReady -> Ready): what the old leader
                # sent meanwhile is unknown, so it counts as changed whatever it looks like.
                old, new = before.get(key), after.get(key)
                version = _object_version(new) or item.resource_version
                self._note(item.kind, old, new, version, moved=_object_version(old) != _object_version(new))
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
        if item.kind == PODS:
            self._pods.remove(key)
            if item.type != "DELETED":
                self._pods.put(obj)
                self._owe(obj)
        elif item.kind == SLICES:
            self._slices.remove(key)
            if item.type != "DELETED":
                self._slices.put(obj)
        elif item.type == "DELETED":
            store.pop(key, None)
        else:
            store[key] = obj
        if old is not None:
            self._mark(item.kind, old)
        self._mark(item.kind, obj)
        self._note(item.kind, old, None if item.type == "DELETED" else obj, item.resource_version)

    def _owe(self, pod: dict[str, Any]) -> None:
        """While leading, a pod seen for an Instance not yet told of any (its Instance may have
        created it and wait to hear it went) owes that Instance a summary: one with no pods if
        the pod is gone again before the next pass."""
        owner = instance_key(pod)
        if self.sending and owner is not None and owner not in self._last_sent:
            self._owed.add(owner)

    def _owe_listed(
        self, before: dict[tuple[str, str], dict[str, Any]], after: dict[tuple[str, str], dict[str, Any]]
    ) -> None:
        """A re-list's pods that are new, or changed since the view last saw them, count as seen
        (`_owe`), as a watch event's would: they were created or changed while we were not
        watching."""
        for key, pod in after.items():
            old = before.get(key)
            if old is None or _object_version(old) != _object_version(pod):
                self._owe(pod)

    def _note(
        self, kind: str, old: dict[str, Any] | None, new: dict[str, Any] | None, version: str, *, moved: bool = False
    ) -> None:
        """Record, for a hand-over (`lead`), the version of a change that alters a summary (or,
        `moved`, may have altered one since the last look)."""
        if not moved and contribution(kind, old) == contribution(kind, new):
            return
        obj = new if new is not None else old
        assert obj is not None
        if kind == NODES:
            self._node_changed[_object_key(obj)[1]] = version
            return
        key = instance_key(obj)
        if key is not None:
            self._changed.setdefault(key, {})[kind] = version
            if not self.sending and len(self._changed) > len(self._pods.by_instance) + STANDBY_GONE_KEPT:
                self._forget_gone()

    def _forget_gone(self) -> None:
        """A standby forgets the oldest half of the Instances it saw lose all their pods."""
        gone = [key for key in self._changed if key not in self._pods.by_instance]
        for key in gone[: len(gone) // 2]:
            del self._changed[key]
            self._dirty.discard(key)

    def _mark(self, kind: str, obj: dict[str, Any]) -> None:
        """Mark the Instances an object's change may affect as needing a fresh summary."""
        if kind == PODS:
            key = instance_key(obj)
            if key is not None:
                self._dirty.add(key)
        elif kind == NODES:
            node_name = str((obj.get("metadata") or {}).get("name") or "")
            for pod_key in self._pods.by_node.get(node_name, ()):
                key = instance_key(self._pods.by_name[pod_key])
                if key is not None:
                    self._dirty.add(key)
        else:
            # An Instance's headless Service's slice concerns that Instance alone.
            key = instance_key(obj)
            if key is not None:
                self._dirty.add(key)

    def _replace_all(self, kind: str, objects: list[dict[str, Any]]) -> None:
        if kind in (PODS, SLICES):
            index = self._pods if kind == PODS else self._slices
            index.clear()
            for obj in objects:
                index.put(obj)
            return
        store = self._objects[kind]
        store.clear()
        for obj in objects:
            store[_object_key(obj)] = obj

    # --- leadership -----------------------------------------------------------------------------

    def delivered(self) -> dict[str, str]:
        """Per kind, the resourceVersion up to which every summary was delivered: what the
        leader writes into its Lease for whoever leads next."""
        return dict(self._delivered)

    def delivered_held(self) -> str:
        """The Instances whose progress was held back when `delivered()` was reached
        (`planning.leadership.held_text`): the next leader sends them whatever the mark says."""
        return self._delivered_held

    def lead(self, delivered: dict[str, str] | None = None, held: set[InstanceKey] | None = None) -> None:
        """Start sending. With the previous leader's `delivered` mark, an Instance whose pods,
        pods' nodes and slices all changed no later than the mark counts as already told,
        unless the previous leader was holding its progress back (`held`); every other Instance
        is signalled at the next pass."""
        mark = delivered or {}
        held = held or set()
        # Summaries carry the newest resourceVersion seen, and workflows drop older ones: ours
        # must not fall below what the old leader sent when our streams lag behind its.
        for version in mark.values():
            if version.isdigit():
                self._resource_version = _newest_version(self._resource_version, version)
        keys = set(self._pods.by_instance) | set(self._changed) | set(self._last_sent)
        # What this process sent while it led before says nothing of what the other sent since.
        self._last_sent.clear()
        self._held.clear()  # held while we led before: the hold starts again from now
        self._owed.clear()
        known = 0
        for key, summary in self.summaries(keys).items():
            if key not in held and already_delivered(self._instance_changes(key), mark):
                self._dirty.discard(key)
                known += 1
                if summary.pods:
                    self._last_sent[key] = summary
            else:
                self._dirty.add(key)
                self._owed.add(key)
            if not summary.pods:
                self._changed.pop(key, None)
        logger.info(
            "leading cluster=%s instances=%d already_delivered=%d to_send=%d held=%d mark=%s",
            self.cluster, len(keys), known, len(self._dirty), len(held), mark,
        )
        super().lead()

    def _instance_changes(self, key: InstanceKey) -> dict[str, str]:
        changes = dict(self._changed.get(key, {}))
        nodes = {
            str((pod.get("spec") or {}).get("nodeName") or "") for pod in self._pods.instance(key)
        }
        node_versions = [self._node_changed[node] for node in nodes if node in self._node_changed]
        if node_versions:
            changes[NODES] = max(node_versions, key=lambda v: int(v) if v.isdigit() else -1)
        return changes

    def quiet(self) -> bool:
        """Nothing held back and nothing waiting to be sent."""
        return not self._held and not self._has_dirty()

    def holding(self) -> int:
        """How many Instances' progress is held back now (sent within `settle_seconds`)."""
        return len(self._held)

    # --- summarizing and signalling ------------------------------------------------------------

    def summaries(self, keys: set[InstanceKey]) -> dict[InstanceKey, InstancePods]:
        """The current summary of each Instance in `keys` (empty pods when all are gone)."""
        members = {key: self._pods.instance(key) for key in keys}
        nodes = {name: node for (_, name), node in self._objects[NODES].items()}
        result = {}
        for key, pods in members.items():
            slices = self._slices.instance(key)
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
        versions = dict(self._versions)
        dirty, self._dirty = self._dirty, set()
        now = asyncio.get_running_loop().time()
        pending, held = [], []
        for key, summary in self.summaries(dirty).items():
            previous = self._last_sent.get(key)
            never_told = previous is None and key not in self._held and key not in self._owed
            if (not summary.pods and never_told) or summary.same_state(previous):
                self._held.pop(key, None)  # never reported nor held and gone, or nothing new
                self._owed.discard(key)
                continue
            news = must_hear_now(previous, summary) or not summary.pods  # all gone: at once
            settle = self.settle_seconds
            if not news and only_on_the_way_out(previous, summary):
                settle = max(settle, self.way_out_settle_seconds)
            if not news and now - self._held.setdefault(key, now) < settle:
                held.append(key)
                continue
            pending.append((key, summary))
        try:
            results = await asyncio.gather(*(self._send(key, summary) for key, summary in pending))
        except asyncio.CancelledError:
            self._dirty.update(dirty)  # `follow()`: whoever leads next sends them
            raise
        failed = [key for (key, _), ok in zip(pending, results, strict=True) if not ok]
        self._owed.difference_update(key for (key, _), ok in zip(pending, results, strict=True) if ok)
        self._dirty.update(failed)
        self._dirty.update(held)  # looked at again by the loop's next pass, within its retry interval
        if not failed and self.sending:
            self._delivered_held, left_out = held_text(held)
            self._delivered = self._below_held(versions, left_out)
        if not self._synced_event.is_set():
            logger.info("initial pass done cluster=%s instances=%d", self.cluster, len(self._last_sent))
        self._after_flush(bool(failed))

    def _below_held(self, versions: dict[str, str], held: Iterable[InstanceKey]) -> dict[str, str]:
        """`versions` lowered below every pod and slice change of a held Instance the Lease has
        no room to name (`held_text`): a new leader then counts each such Instance as not yet
        told (it sends it, and any other changed since that change). The nodes' mark stays:
        lowering it below a node's change would have the new leader resend every Instance on
        every node changed since (held news is a pod's or a slice's progress; a node's news
        that decisions read is never held)."""
        mark = dict(versions)
        for key in held:
            for kind, version in self._changed.get(key, {}).items():
                if version.isdigit() and mark.get(kind, "").isdigit():
                    mark[kind] = str(min(int(mark[kind]), int(version) - 1))
        return mark

    async def _send(self, key: InstanceKey, summary: InstancePods) -> bool:
        """Signal one Instance; True when handled (delivered or no such workflow)."""
        # A workload cluster's Instances are its home's workflows: `instance/...@{cluster}`.
        workflow_id = instance_workflow_id(*key, self.cluster or None)
        async with self._semaphore:
            try:
                delivered = await self.sink(workflow_id, summary)
            except Exception as error:  # a Temporal outage must not end the watcher
                self.stats.signal_failures += 1
                logger.warning("signal failed workflow_id=%s error=%s", workflow_id, str(error)[:300])
                return False
        self._held.pop(key, None)
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
            self._changed.pop(key, None)
        return True


def _discard(index: dict[Any, set[tuple[str, str]]], value: Any, key: tuple[str, str]) -> None:
    members = index.get(value)
    if members is not None:
        members.discard(key)
        if not members:
            del index[value]


def _newest_version(current: str, candidate: str) -> str:
    if not candidate:
        return current
    if current.isdigit() and candidate.isdigit():
        return candidate if int(candidate) > int(current) else current
    return candidate


def _object_version(obj: dict[str, Any] | None) -> str:
    return str(((obj or {}).get("metadata") or {}).get("resourceVersion") or "")


def _object_key(obj: dict[str, Any]) -> tuple[str, str]:
    metadata = obj.get("metadata") or {}
    return (str(metadata.get("namespace") or ""), str(metadata.get("name") or ""))
