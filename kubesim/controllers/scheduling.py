"""The scheduling loop: pods without a node whose `schedulerName` is unset or
`default-scheduler` are placed by `kubesim.scheduler.schedule_pod` and bound; a pod that fits
nowhere gets `PodScheduled=False` (reason Unschedulable) and a `FailedScheduling` Warning
event, and is tried again once pods or nodes change and its back-off has passed
(`kubesim.scheduler.backoff`). Pods naming another scheduler wait, as in a cluster where that
scheduler is not installed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from kubesim.api import Api
from kubesim.controllers.base import Controller
from kubesim.errors import ApiError
from kubesim.events import record_event
from kubesim.follow import Follower
from kubesim.scheduler import ScheduleResult, schedule_pod
from kubesim.scheduler.backoff import SchedulingBackoff
from kubesim.scheduler.node_pods import PodsByNode
from kubesim.store import Change, Object, ObjectKey, object_key
from kubesim.subresources import bind_pod
from kubesim.timing import Timing, timestamp

PODS = ("", "pods")
NODES = ("", "nodes")
NAMESPACES = ("", "namespaces")
SchedulePod = Callable[..., ScheduleResult]


class Scheduling(Controller):
    name = "scheduler"
    watches = (PODS, NODES)

    def __init__(self, api: Api, timing: Timing, schedule: SchedulePod = schedule_pod) -> None:
        super().__init__(api)
        self.schedule = schedule
        self._backoff = SchedulingBackoff(lambda seconds: timing.scaled(seconds))
        # The last verdict per pod uid, so an unchanged failure is not re-recorded on every pass.
        self._last: dict[str, str] = {}
        # Bumped by every change that can make room or add nodes: each is a new scheduling
        # attempt for the pods still pending, counted on their FailedScheduling event.
        self._epoch = 0
        # Folded from pod changes: the pods counting on each node (a binding below lands in
        # it as the store commits it) and the pods waiting for this scheduler, by key.
        self._by_node = PodsByNode()
        self._pending: dict[ObjectKey, Object] = {}
        self._pods = Follower(self.store, PODS, self._fold, self._reset)

    def _reset(self) -> None:
        self._by_node.clear()
        self._pending.clear()
        self._backoff.cluster_changed()  # a change may have been missed: one that could help

    def _fold(self, old: Object | None, new: Object | None) -> None:
        key = object_key(new if new is not None else old)  # type: ignore[arg-type]
        if new is None:
            self._by_node.drop(key)
            self._pending.pop(key, None)
            return
        self._by_node.put(key, new)
        if self._wants_scheduling(new):
            self._pending[key] = new
        else:
            self._pending.pop(key, None)

    def relevant(self, change: Change) -> bool:
        if change.type_key == NODES or change.type == "DELETED":
            self._epoch += 1
            self._backoff.cluster_changed()
            return True
        # Status-only kubelet updates of bound pods do not change what fits where, but a pod
        # leaving (deleted or finished) frees room, and any new unbound pod needs placing.
        obj, old = change.obj, change.old
        if change.type == "MODIFIED" and old is not None and obj.get("spec") == old.get("spec") and (
            (obj.get("status") or {}).get("phase") == (old.get("status") or {}).get("phase")
        ) and bool(obj["metadata"].get("deletionTimestamp")) == bool(old["metadata"].get("deletionTimestamp")) and (
            obj["metadata"].get("labels") == old["metadata"].get("labels")
        ):
            return not (obj.get("spec") or {}).get("nodeName")
        if (obj.get("spec") or {}).get("nodeName"):
            # A pod placed, finishing, leaving or relabelled (affinity and spread count labels).
            self._backoff.cluster_changed()
        elif change.type == "MODIFIED":
            # The pending pod itself changed (labels, tolerations, a scheduling gate lifted).
            self._backoff.moved(obj["metadata"]["uid"])
        return True

    def _namespace_labels(self, namespace: str) -> Mapping[str, str]:
        ns = self.store.get(NAMESPACES, "", namespace)
        return dict((ns or {}).get("metadata", {}).get("labels") or {})

    def reconcile(self) -> None:
        self._pods.sync()
        pending = list(self._pending.values())
        if not pending:
            self._last.clear()
            self._backoff.keep_only(())
            return
        # Ties fall to namespace last, the order of a list by key.
        pending.sort(key=lambda p: (-int((p.get("spec") or {}).get("priority") or 0),
                                    p["metadata"].get("creationTimestamp", ""), p["metadata"]["name"],
                                    p["metadata"].get("namespace", "")))
        nodes = self.store.list(NODES)
        pods_rt = self.api.type_of(*PODS)
        live = {p["metadata"]["uid"] for p in pending}
        self._last = {uid: v for uid, v in self._last.items() if uid in live}
        self._backoff.keep_only(live)
        next_try: float | None = None  # when the first pod backing off may be tried again

        def try_again_in(uid: str, now: float) -> bool:
            nonlocal next_try
            wait = self._backoff.wait(uid, now)
            if wait > 0:
                next_try = now + wait if next_try is None else min(next_try, now + wait)
            return wait > 0

        for pod in pending:
            if try_again_in(pod["metadata"]["uid"], time.monotonic()):
                continue
            # Current again after any write of this pass (a binding is folded in as it is committed).
            self._pods.sync()
            result = self.schedule(pod, nodes, (), namespace_labels=self._namespace_labels, by_node=self._by_node)
            if result.node_name:
                try:
                    bound = bind_pod(self.api, pod, result.node_name)
                except ApiError:
                    continue  # deleted or bound meanwhile; the next pass sees it
                record_event(self.api, bound, "Normal", "Scheduled",
                             f"Successfully assigned {pod['metadata'].get('namespace')}/{pod['metadata']['name']} "
                             f"to {result.node_name}", "default-scheduler")
                self._last.pop(pod["metadata"]["uid"], None)
                self._backoff.forget(pod["metadata"]["uid"])
                continue
            self._unschedulable(pods_rt, pod, result)
            failed_at = time.monotonic()
            self._backoff.failed(pod["metadata"]["uid"], failed_at)
            try_again_in(pod["metadata"]["uid"], failed_at)
        if next_try is not None:
            self.wake_in(next_try - time.monotonic())

    @staticmethod
    def _wants_scheduling(pod: Object) -> bool:
        spec = pod.get("spec") or {}
        if spec.get("nodeName") or pod["metadata"].get("deletionTimestamp"):
            return False
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return False
        return spec.get("schedulerName") in (None, "", "default-scheduler")

    def _unschedulable(self, rt: Any, pod: Object, result: ScheduleResult) -> None:
        reason = result.reason or "Unschedulable"
        status = dict(pod.get("status") or {})
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
        previous = next((c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), None)
        condition: Object = {"type": "PodScheduled", "status": "False", "reason": reason,
                             "message": result.message, "lastProbeTime": None,
                             "lastTransitionTime": timestamp()}
        if previous and previous.get("status") == "False":
            condition["lastTransitionTime"] = previous.get("lastTransitionTime", condition["lastTransitionTime"])
            condition["lastProbeTime"] = previous.get("lastProbeTime")
        conditions.append(condition)
        self.api.write_status(rt, pod, {**status, "conditions": conditions}, "kube-scheduler")
        verdict = f"{reason}:{result.message}:{self._epoch}"
        if reason == "Unschedulable" and self._last.get(pod["metadata"]["uid"]) != verdict:
            # The real scheduler records one event per attempt; attempts follow cluster changes
            # that could help, and the recorder folds repeats into one Event's count.
            record_event(self.api, pod, "Warning", "FailedScheduling", result.message, "default-scheduler")
        self._last[pod["metadata"]["uid"]] = verdict
