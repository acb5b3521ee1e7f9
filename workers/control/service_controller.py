"""The InferenceService controller: `kubectl apply` / `annotate` / `delete` drive the workflows.

It lists, then watches (`workers.watch.stream.KindWatch`, with resume), InferenceServices and
InferenceReplicas in every namespace, and ServingRuntimes and ClusterServingRuntimes (and
TrafficMaps, which it only keeps for the state metrics), and runs
the watchers' coalescing pass loop (`workers.watch.loop.WatchLoop`). Each pass reconciles the
objects that changed, one task per object so that an Update waiting for a canary's answer holds
up nobody else, in this order:

1. an InferenceService labelled `ome.io/placement-source` is a member copy the product wrote:
   skipped;
2. deleting (deletionTimestamp, the product's finalizer): `delete` to its workflow, once, with
   the object's uid (`{"uid": ...}`: a workflow that owns another object of that name ignores
   it); with no workflow running, the controller removes the finalizer itself. An object that
   goes away without the finalizer gets `delete` too, unless it was seen carrying it (then its
   workflow removed it itself: it is tearing down or done, and a new run may own the name);
3. the spec (`planning.controller.spec`): the `apply` Update with start, unless the workflow
   holds it already; a refusal is a Warning Event `SpecRejected`, not retried;
4. a `runtime_changed` signal when a runtime it uses changed (not for the initial list);
5. the annotations (`planning.controller.annotations`): signals and Updates, refusals as
   Warning Events `AnnotationRefused`, then one guarded JSON patch removing what was consumed
   and writing the record `ome.io/relayed-annotations`.

A transient failure (Temporal or the API server unreachable) leaves the object dirty and retries
it with a back-off of its own; what was answered before the failure is remembered, so nothing
is sent twice. A restarted controller lists everything again; the `applied` query, the record
and the removed annotations keep it from resending.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kubernetes.client import ApiClient

from planning.controller import annotations as steering
from planning.controller.deletion import (
    delete_payload,
    gone_wants_delete_signal,
    holds_finalizer,
    release_finalizer,
)
from planning.controller.objects import annotations_of, identity, is_deleting, is_placement_copy, uid_of
from planning.controller.runtimes import (
    CLUSTER_SERVING_RUNTIME,
    SERVING_RUNTIME,
    RuntimeKind,
    generation_changed,
    runtime_users,
)
from planning.controller.spec import SPEC_REJECTED, SpecDecision, decide_spec, spec_relay
from workers.control.kube import KubeWriter, Patched
from workers.control.temporal import (
    SIGNAL_DELETE,
    SIGNAL_RUNTIME_CHANGED,
    NoWorkflow,
    Refused,
    TemporalSender,
)
from workers.watch.loop import FIRST_RETRY_SECONDS, LONGEST_RETRY_SECONDS, STANDBY_GONE_KEPT, WatchLoop
from workers.watch.stream import KindWatch, WatchItem
from workflows.names import isvc_workflow_id

logger = logging.getLogger("workers.controller")

ISVCS = "inferenceservices"
REPLICAS = "inferencereplicas"
SERVING_RUNTIMES = "servingruntimes"
CLUSTER_SERVING_RUNTIMES = "clusterservingruntimes"
TRAFFICMAPS = "trafficmaps"
RUNTIME_KINDS: dict[str, RuntimeKind] = {
    SERVING_RUNTIMES: SERVING_RUNTIME,
    CLUSTER_SERVING_RUNTIMES: CLUSTER_SERVING_RUNTIME,
}
WAKE = "wake"
"""Kind of the item a finished task posts to wake the pass loop."""

Key = tuple[str, str, str]
"""(kind, namespace, name); namespace '' for cluster-scoped runtimes."""


def _key(kind: str, obj: dict[str, Any]) -> Key:
    metadata = obj.get("metadata") or {}
    return (kind, str(metadata.get("namespace") or ""), str(metadata.get("name") or ""))


class InferenceServiceController(WatchLoop):
    """`start()`/`stop()` or `run(stop)`; `wait_synced()` once the first lists were handled."""

    name = "isvc-controller"

    def __init__(
        self,
        api_client: ApiClient,
        sender: TemporalSender,
        writer: KubeWriter,
        *,
        coalesce_seconds: float = 0.05,
        read_timeout_seconds: float = 90.0,
        concurrency: int = 32,
    ) -> None:
        self.sender = sender
        # A restart reconciles every object at once: at most this many talk to Temporal at a time.
        self._slots = asyncio.Semaphore(concurrency)
        self.writer = writer
        kinds = [
            KindWatch(api_client, kind, f"/apis/ome.io/v1beta1/{kind}", "", read_timeout_seconds)
            for kind in (ISVCS, REPLICAS, SERVING_RUNTIMES, CLUSTER_SERVING_RUNTIMES, TRAFFICMAPS)
        ]
        super().__init__(kinds, coalesce_seconds, logger)
        self._objects: dict[Key, dict[str, Any]] = {}
        """Current InferenceServices and InferenceReplicas."""
        self._gone: dict[Key, dict[str, Any]] = {}
        """Last state of InferenceServices deleted since the last pass."""
        self._runtimes: dict[Key, dict[str, Any]] = {}
        self._trafficmaps: dict[Key, dict[str, Any]] = {}
        """Current TrafficMaps: read by the state metrics only, never reconciled."""
        self._listed: set[str] = set()
        self._dirty: set[Key] = set()
        self._tasks: dict[Key, asyncio.Task[None]] = {}
        self._retry: dict[Key, float] = {}
        self._runtime_changed: set[Key] = set()
        self._spec_done: dict[str, tuple[int, str]] = {}
        """Per object uid: the last (generation, digest) relayed, refused or found applied. Only
        the last: an edit back to an earlier digest at the same generation is a change."""
        self._finalized: set[str] = set()
        """Uids of InferenceServices seen carrying the product's finalizer."""
        self._memory: dict[str, steering.Memory] = {}
        self._delete_sent: set[str] = set()
        self.applies_sent = 0
        self.messages_sent = 0

    # --- folding watch events ---------------------------------------------------------------

    def _ready(self) -> bool:
        return len(self._listed) == len(self._kinds)

    def _has_dirty(self) -> bool:
        return any(key not in self._tasks for key in self._dirty)

    def _apply(self, item: WatchItem) -> None:
        if item.type == "BOOKMARK":
            return
        if item.type == "DISABLED":
            logger.warning("watch of %s disabled (%s)", item.kind, item.reason)
            self._listed.add(item.kind)
            return
        if item.kind in RUNTIME_KINDS:
            self._apply_runtime(item)
            return
        if item.kind == TRAFFICMAPS:
            self._apply_trafficmap(item)
            return
        if item.type == "RESYNC":
            seen = {_key(item.kind, obj): obj for obj in item.objects}
            for obj in item.objects:
                self._note_finalizer(item.kind, obj)
            for key, last in list(self._objects.items()):
                if key[0] == item.kind and key not in seen:
                    self._gone_object(key, last)
            self._objects.update(seen)
            self._dirty.update(seen)
            self._listed.add(item.kind)
            return
        obj = item.objects[0]
        key = _key(item.kind, obj)
        self._note_finalizer(item.kind, obj)
        if item.type == "DELETED":
            self._objects.pop(key, None)
            self._gone_object(key, obj)
        else:
            self._objects[key] = obj
        self._dirty.add(key)

    def _note_finalizer(self, kind: str, obj: dict[str, Any]) -> None:
        if kind == ISVCS and holds_finalizer(obj):
            self._finalized.add(uid_of(obj))

    def _gone_object(self, key: Key, last: dict[str, Any]) -> None:
        self._objects.pop(key, None)
        if key[0] == ISVCS:
            self._gone[key] = last
            self._dirty.add(key)
            if not self.sending and len(self._gone) > STANDBY_GONE_KEPT:
                # A standby forgets the oldest half: the leader has long handled those.
                for old in list(self._gone)[: len(self._gone) // 2]:
                    del self._gone[old]
                    if old not in self._objects:
                        self._dirty.discard(old)
        else:
            self._memory.pop(uid_of(last), None)

    def _apply_trafficmap(self, item: WatchItem) -> None:
        if item.type == "RESYNC":
            self._trafficmaps = {_key(item.kind, obj): obj for obj in item.objects}
            self._listed.add(item.kind)
        elif item.type == "DELETED":
            self._trafficmaps.pop(_key(item.kind, item.objects[0]), None)
        else:
            self._trafficmaps[_key(item.kind, item.objects[0])] = item.objects[0]

    def _apply_runtime(self, item: WatchItem) -> None:
        initial = item.kind not in self._listed
        if item.type == "RESYNC":
            seen = {_key(item.kind, obj): obj for obj in item.objects}
            before = {key: obj for key, obj in self._runtimes.items() if key[0] == item.kind}
            for key in before.keys() - seen.keys():
                del self._runtimes[key]
            self._runtimes.update(seen)
            self._listed.add(item.kind)
            if initial:
                return  # only changes after the start reach the workflows
            changed = [
                key for key in before.keys() | seen.keys()
                if generation_changed(_generation(before.get(key)), seen.get(key))
            ]
        else:
            obj = item.objects[0]
            key = _key(item.kind, obj)
            previous = _generation(self._runtimes.get(key))
            current = None if item.type == "DELETED" else obj
            if current is None:
                self._runtimes.pop(key, None)
            else:
                self._runtimes[key] = current
            changed = [key] if generation_changed(previous, current) else []
        serving_runtimes = {(ns, name) for kind, ns, name in self._runtimes if kind == SERVING_RUNTIMES}
        isvcs = [obj for key, obj in self._objects.items() if key[0] == ISVCS]
        for kind, namespace, name in changed:
            for isvc_namespace, isvc_name in runtime_users(
                RUNTIME_KINDS[kind], namespace or None, name, isvcs, serving_runtimes
            ):
                target = (ISVCS, isvc_namespace, isvc_name)
                self._runtime_changed.add(target)
                self._dirty.add(target)
            logger.info("runtime changed kind=%s name=%s", RUNTIME_KINDS[kind], f"{namespace}/{name}".lstrip("/"))

    def replicas(self) -> list[dict[str, Any]]:
        """The InferenceReplicas as last listed or watched (the state metrics read them)."""
        return [obj for key, obj in self._objects.items() if key[0] == REPLICAS]

    def trafficmaps(self) -> list[dict[str, Any]]:
        """The TrafficMaps as last listed or watched (the state metrics read them)."""
        return list(self._trafficmaps.values())

    def idle(self) -> bool:
        """Listed, and nothing dirty or in flight (tests and a graceful stop wait for it)."""
        return self._ready() and not self._dirty and not self._tasks and not self._gone

    # --- passes -------------------------------------------------------------------------

    async def _flush(self) -> None:
        for key in sorted(self._dirty):
            if key not in self._tasks:
                self._dirty.discard(key)
                self._tasks[key] = asyncio.create_task(self._run_one(key), name=f"reconcile {'/'.join(key)}")
        self._after_flush(False)

    async def _run_one(self, key: Key) -> None:
        try:
            async with self._slots:
                done = await self._reconcile(key)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            logger.warning("%s %s/%s: will retry: %s", key[0], key[1], key[2], str(error)[:300])
            done = False
        if not done:
            delay = self._retry.get(key, FIRST_RETRY_SECONDS)
            self._retry[key] = min(delay * 2, LONGEST_RETRY_SECONDS)
            await asyncio.sleep(delay)
            self._dirty.add(key)
        else:
            self._retry.pop(key, None)
        del self._tasks[key]
        if key in self._dirty and self._queue is not None:
            self._queue.put_nowait(WatchItem(WAKE, "BOOKMARK"))

    async def stop(self) -> None:
        """Stop the watches and the pass loop first (no new tasks), then the tasks in flight:
        what they had not finished is picked up by the next start's re-list."""
        await super().stop()
        await self._cancel_tasks()

    async def follow(self) -> None:
        """Stop relaying (the Lease is lost or the process stops): no new tasks, and the tasks in
        flight (an Update awaiting its answer, then the annotation patch) are cancelled and
        awaited, their objects dirty again for the next `lead()`."""
        await super().follow()
        await self._cancel_tasks()

    async def _cancel_tasks(self) -> None:
        tasks = dict(self._tasks)
        for task in tasks.values():
            task.cancel()
        await asyncio.gather(*tasks.values(), return_exceptions=True)
        for key in tasks:
            self._tasks.pop(key, None)
        self._dirty.update(tasks)

    async def _reconcile(self, key: Key) -> bool:
        """True when the object is done with (for now); False to retry after a back-off."""
        obj = self._objects.get(key)
        if key[0] == REPLICAS:
            return obj is None or await self._steer(obj, steering.replica_requests, keeps_record=False)
        gone = self._gone.get(key)
        if obj is None:
            if gone is None:
                return True
            if not await self._on_gone(gone):
                return False
            # Kept until handled, so a failed `delete` is retried; a newer deletion replaces it.
            if self._gone.get(key) is gone:
                del self._gone[key]
            return True
        self._gone.pop(key, None)
        if gone is not None and uid_of(gone) != uid_of(obj):
            # Deleted and created again under the name: the workflow ID is the new object's now,
            # so no `delete` goes to it for the old one.
            self._memory.pop(uid_of(gone), None)
            self._spec_done.pop(uid_of(gone), None)
            self._finalized.discard(uid_of(gone))
        if is_placement_copy(obj):
            return True
        if is_deleting(obj):
            return await self._on_deleting(obj)
        if not await self._relay_spec(obj):
            return False
        if key in self._runtime_changed:
            await self._signal_runtime_changed(obj)
            self._runtime_changed.discard(key)
        return await self._steer(obj, steering.isvc_requests, keeps_record=True)

    # --- deletion -----------------------------------------------------------------------

    async def _on_deleting(self, obj: dict[str, Any]) -> bool:
        uid = uid_of(obj)
        if not holds_finalizer(obj) or uid in self._delete_sent:
            return True
        namespace, name = identity(obj)
        if await self.sender.running(namespace, name):
            await self.sender.signal(namespace, name, SIGNAL_DELETE, delete_payload(obj))
            self._delete_sent.add(uid)
            logger.info("kubectl delete isvc %s/%s: delete sent to %s", namespace, name, isvc_workflow_id(namespace, name))
            return True
        outcome = await self.writer.patch(obj, release_finalizer(obj))
        if outcome is Patched.DONE:
            self._delete_sent.add(uid)
            logger.info(
                "kubectl delete isvc %s/%s: no workflow runs for it, finalizer removed by the controller", namespace, name
            )
        return True

    async def _on_gone(self, obj: dict[str, Any]) -> bool:
        uid = uid_of(obj)
        self._memory.pop(uid, None)
        self._spec_done.pop(uid, None)
        seen_finalizer = uid in self._finalized
        if (
            uid in self._delete_sent
            or not gone_wants_delete_signal(obj, seen_finalizer=seen_finalizer)
            or is_placement_copy(obj)
        ):
            self._delete_sent.discard(uid)
            self._finalized.discard(uid)
            return True
        namespace, name = identity(obj)
        if await self.sender.running(namespace, name):
            try:
                await self.sender.signal(namespace, name, SIGNAL_DELETE, delete_payload(obj))
            except NoWorkflow:
                self._finalized.discard(uid)
                return True
            logger.info("isvc %s/%s deleted without the finalizer: delete sent to its workflow", namespace, name)
        self._finalized.discard(uid)
        return True

    # --- the spec -----------------------------------------------------------------------

    async def _relay_spec(self, obj: dict[str, Any]) -> bool:
        relay = spec_relay(obj)
        if self._spec_done.get(relay.uid) == relay.handled_key:
            return True
        where = f"isvc {relay.namespace}/{relay.name} generation={relay.generation} digest={relay.digest}"
        decision = decide_spec(relay, await self.sender.applied(relay.namespace, relay.name))
        if decision is SpecDecision.SKIP:
            self._spec_done[relay.uid] = relay.handled_key
            logger.info("%s: already applied by its workflow, nothing sent", where)
            return True
        if decision is SpecDecision.WAIT:
            logger.info("%s: waiting for the workflow of an earlier object of that name to finish deleting", where)
            return False
        try:
            result = await self.sender.apply(relay)
        except Refused as refusal:
            self._spec_done[relay.uid] = relay.handled_key
            logger.info("%s: apply refused (%s): %s", where, refusal.error_type, refusal.message.replace("\n", " | "))
            await self.writer.warning(obj, SPEC_REJECTED, refusal.message)
            return True
        self._spec_done[relay.uid] = relay.handled_key
        self.applies_sent += 1
        logger.info(
            "%s: applied to %s -> workflow generation=%s changed=%s%s",
            where,
            isvc_workflow_id(relay.namespace, relay.name),
            result.get("generation"),
            result.get("changed"),
            " superseded" if result.get("superseded") else "",
        )
        return True

    async def _signal_runtime_changed(self, obj: dict[str, Any]) -> None:
        namespace, name = identity(obj)
        try:
            await self.sender.signal(namespace, name, SIGNAL_RUNTIME_CHANGED)
        except NoWorkflow:
            return
        self.messages_sent += 1
        logger.info("isvc %s/%s: its runtime changed, %s sent", namespace, name, SIGNAL_RUNTIME_CHANGED)

    # --- annotations --------------------------------------------------------------------

    async def _steer(self, obj: dict[str, Any], plan: Any, *, keeps_record: bool) -> bool:
        uid = uid_of(obj)
        namespace, name = identity(obj)
        kind = str(obj.get("kind") or "InferenceService")
        memory = steering.observe(self._memory.get(uid, steering.Memory()), annotations_of(obj))
        self._memory[uid] = memory
        for request in plan(obj, memory):
            target = isvc_workflow_id(*request.target)
            if request.kind == "refuse":
                answer, text = steering.Answer.REFUSED, request.refusal
            else:
                try:
                    await self.sender.send(request)
                    answer, text = steering.Answer.ACCEPTED, ""
                except Refused as refusal:
                    answer, text = steering.Answer.REFUSED, refusal.message
                except NoWorkflow:
                    answer, text = steering.Answer.NO_WORKFLOW, steering.no_workflow_message(request, target)
                self.messages_sent += 1
            memory = steering.answered(memory, request, answer)
            self._memory[uid] = memory
            shown = "removed" if request.value is None else f"={request.value}"
            logger.info(
                "%s %s/%s annotation %s%s: %s %s to %s: %s%s",
                kind, namespace, name, request.key, shown, request.kind, request.message, target, answer.value,
                f" ({text})" if text else "",
            )
            event = steering.refusal_event(answer, text)
            if event is not None:
                await self.writer.warning(obj, *event)
        ops = steering.cleanup_patch(obj, memory, keeps_record=keeps_record)
        if ops:
            outcome = await self.writer.patch(obj, ops)
            logger.info("%s %s/%s: annotations cleaned up (%s)", kind, namespace, name, outcome.value)
        return True


def _generation(obj: dict[str, Any] | None) -> int | None:
    if obj is None:
        return None
    generation = (obj.get("metadata") or {}).get("generation")
    return int(generation) if generation is not None else 0
