"""Node lifecycle: node conditions and the taints that follow them, pods on unreachable nodes
losing readiness, NoExecute taint eviction after each pod's tolerationSeconds (scaled by the
timing factor), and garbage collection of pods bound to nodes that no longer exist.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kubesim.api import Api
from kubesim.controllers.base import Controller
from kubesim.errors import ApiError
from kubesim.events import record_event
from kubesim.fastjson import clone
from kubesim.store import Change, Object
from kubesim.subresources import evict
from kubesim.timing import Timing, parse_timestamp, timestamp

PODS = ("", "pods")
NODES = ("", "nodes")
UNREACHABLE = "node.kubernetes.io/unreachable"
NOT_READY = "node.kubernetes.io/not-ready"
UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
_MANAGED_TAINTS = {UNREACHABLE, NOT_READY, UNSCHEDULABLE}


def ready_status(node: Object) -> str:
    for c in (node.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return str(c.get("status"))
    return "Missing"


def healthy_conditions() -> list[Object]:
    now = timestamp()

    def cond(ctype: str, status: str, reason: str, message: str) -> Object:
        return {"type": ctype, "status": status, "reason": reason, "message": message,
                "lastHeartbeatTime": now, "lastTransitionTime": now}

    return [
        cond("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
        cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        cond("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
        cond("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
    ]


def unknown_conditions(node: Object) -> list[Object]:
    now = timestamp()
    out = []
    for c in (node.get("status") or {}).get("conditions") or healthy_conditions():
        out.append({**c, "status": "Unknown", "reason": "NodeStatusUnknown",
                    "message": "Kubelet stopped posting node status.", "lastTransitionTime": now})
    return out


def tolerates(pod: Object, taint: Object) -> tuple[bool, float | None]:
    """Whether the pod tolerates the taint, and for how long (None: forever)."""
    for t in (pod.get("spec") or {}).get("tolerations") or []:
        if t.get("effect") and t.get("effect") != taint.get("effect"):
            continue
        if t.get("operator") == "Exists":
            if t.get("key") and t.get("key") != taint.get("key"):
                continue
        elif t.get("key") != taint.get("key") or (t.get("value") or "") != (taint.get("value") or ""):
            continue
        seconds = t.get("tolerationSeconds")
        return True, None if seconds is None else max(0.0, float(seconds))
    return False, 0.0


class NodeLifecycle(Controller):
    name = "node-lifecycle"
    watches = (NODES, PODS)

    def __init__(self, api: Api, timing: Timing) -> None:
        super().__init__(api)
        # When this controller first saw each (pod uid, NoExecute taint key) pair.
        self._seen: dict[tuple[str, Any], float] = {}
        # Nodes being drained whose pods a disruption budget still holds.
        self.draining: set[str] = set()
        # Scales tolerationSeconds and kubectl drain's retry interval.
        self.timing = timing
        # What changed since the last pass: a node (or nothing seen yet) means a full pass; else
        # only the pods that changed need a look, unless a NoExecute window is running. A store
        # restore replaces the objects unannounced (`Store.restores`, as the GC reads it).
        self._nodes_changed = True
        self._changed_pods: set[tuple[str, str]] = set()
        self._restores = self.store.restores

    def on_change(self, change: Change) -> None:
        if change.type_key == NODES:
            self._nodes_changed = True
        elif change.type_key == PODS and change.type != "DELETED":
            meta = change.obj["metadata"]
            self._changed_pods.add((meta.get("namespace", ""), meta["name"]))
        super().on_change(change)

    def reconcile(self) -> None:
        nodes_rt, pods_rt = self.api.type_of(*NODES), self.api.type_of(*PODS)
        nodes: dict[str, Object | None] = {n["metadata"]["name"]: n for n in self.store.list(NODES)}
        for name, node in list(nodes.items()):
            nodes[name] = self._sync_node(nodes_rt, node)
        # A pod that did not change, on a node that did not change, was seen as it is by the last
        # pass; NoExecute windows (`_seen`) need every pass while one runs.
        full = self._nodes_changed or bool(self._seen) or self._restores != self.store.restores
        changed, self._changed_pods = self._changed_pods, set()
        self._nodes_changed, self._restores = False, self.store.restores
        pods = self.store.list(PODS) if full else [
            pod for ns, name in sorted(changed) if (pod := self.store.get(PODS, ns, name)) is not None]
        try:
            self._check_pods(pods, nodes, pods_rt)
        except Exception:
            self._nodes_changed = True  # the pods this pass took are looked at again, all of them
            raise
        self._continue_drains(nodes)
        if not full:
            return
        live = {(p["metadata"]["uid"], t.get("key")) for p in self.store.list(PODS)
                for t in (nodes.get((p.get("spec") or {}).get("nodeName", "")) or {}).get("spec", {}).get("taints", [])}
        self._seen = {k: v for k, v in self._seen.items() if k in live}

    def _check_pods(self, pods: list[Object], nodes: dict[str, Object | None], pods_rt: Any) -> None:
        for pod in pods:
            node_name = (pod.get("spec") or {}).get("nodeName")
            if not node_name:
                continue
            node = nodes.get(node_name)
            if node is None:
                # Pod GC: a pod bound to a node that is gone cannot be terminated by anyone.
                self.api.force_remove(pods_rt, {**pod, "metadata": {**pod["metadata"], "finalizers": []}})
                continue
            if ready_status(node) != "True":
                self._mark_not_ready(pods_rt, pod)
            self._taint_evict(pods_rt, pod, node)

    def _continue_drains(self, nodes: dict[str, Object | None]) -> None:
        for name in sorted(self.draining):
            node = nodes.get(name)
            if node is None or not (node.get("spec") or {}).get("unschedulable"):
                self.draining.discard(name)
                continue
            _, blocked = drain_pass(self.api, name)
            if not blocked:
                self.draining.discard(name)
            else:
                # kubectl drain retries refused evictions every 5 seconds.
                self.wake_in(max(0.05, self.timing.scaled(5.0)))

    def _sync_node(self, rt: Any, node: Object | None) -> Object | None:
        if node is None:
            return None
        status = node.get("status") or {}
        if ready_status(node) == "Missing":
            # A node registered without status gets what its kubelet would post at start.
            node = self.api.write_status(rt, node, {**status, "conditions": healthy_conditions()}, "kubelet")
        ready = ready_status(node)
        spec = node.get("spec") or {}
        taints = [t for t in spec.get("taints") or [] if t.get("key") not in _MANAGED_TAINTS]
        current = {(t.get("key"), t.get("effect")): t for t in spec.get("taints") or []}
        wanted: list[tuple[str, str]] = []
        if ready == "Unknown":
            wanted = [(UNREACHABLE, "NoSchedule"), (UNREACHABLE, "NoExecute")]
        elif ready == "False":
            wanted = [(NOT_READY, "NoSchedule"), (NOT_READY, "NoExecute")]
        if spec.get("unschedulable"):
            wanted.append((UNSCHEDULABLE, "NoSchedule"))
        for key, effect in wanted:
            taint = current.get((key, effect)) or {"key": key, "effect": effect}
            if effect == "NoExecute" and "timeAdded" not in taint:
                taint = {**taint, "timeAdded": timestamp()}
            taints.append(taint)
        if taints != (spec.get("taints") or []):
            updated = clone(node)
            if taints:
                updated["spec"]["taints"] = taints
            else:
                updated["spec"].pop("taints", None)
            node = self.api.write(rt, updated, "node-controller")
        return node

    def _mark_not_ready(self, rt: Any, pod: Object) -> None:
        conditions = clone((pod.get("status") or {}).get("conditions") or [])
        changed = False
        for c in conditions:
            if c.get("type") == "Ready" and c.get("status") != "False":
                c.update(status="False", reason="NodeNotReady", message="Node is not ready",
                         lastTransitionTime=timestamp())
                changed = True
        if changed:
            self.api.write_status(rt, pod, {**pod["status"], "conditions": conditions}, "node-controller")

    def _taint_evict(self, rt: Any, pod: Object, node: Object) -> None:
        if pod["metadata"].get("deletionTimestamp"):
            return
        loop_now = asyncio.get_running_loop().time()
        wall_now = parse_timestamp(timestamp())
        evict_in: float | None = None
        for taint in (node.get("spec") or {}).get("taints") or []:
            if taint.get("effect") != "NoExecute":
                continue
            ok, seconds = tolerates(pod, taint)
            if ok and seconds is None:
                continue
            window = 0.0 if not ok else self.timing.scaled(seconds or 0.0)
            added = parse_timestamp(taint["timeAdded"]) if taint.get("timeAdded") else wall_now
            remaining = window - (wall_now - added).total_seconds()
            # Timestamps have second precision; measure short (scaled) windows on our own clock.
            key = (pod["metadata"]["uid"], taint.get("key"))
            first_seen = self._seen.setdefault(key, loop_now)
            remaining = min(remaining, window - (loop_now - first_seen)) if window < 5 else remaining
            evict_in = remaining if evict_in is None else min(evict_in, remaining)
        if evict_in is None:
            return
        if evict_in > 0:
            self.wake_in(evict_in)
            return
        status = clone(pod.get("status") or {})
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "DisruptionTarget"]
        conditions.append({"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager",
                           "message": "Taint manager: deleting due to NoExecute taint",
                           "lastTransitionTime": timestamp()})
        pod = self.api.write_status(rt, pod, {**status, "conditions": conditions}, "taint-eviction-controller")
        record_event(self.api, pod, "Normal", "TaintManagerEviction",
                     f"Marking for deletion Pod {pod['metadata'].get('namespace')}/{pod['metadata']['name']}",
                     "taint-eviction-controller")
        try:
            self.api.delete(rt, pod["metadata"].get("namespace", ""), pod["metadata"]["name"])
        except ApiError:
            return



def drain_pass(api: Api, node: str) -> tuple[list[str], list[str]]:
    """Evict every pod on `node` except DaemonSet pods; (evicted, blocked by a budget)."""
    evicted, blocked = [], []
    for pod in api.store.list(PODS):
        if (pod.get("spec") or {}).get("nodeName") != node or pod["metadata"].get("deletionTimestamp"):
            continue
        if any(o.get("kind") == "DaemonSet" for o in pod["metadata"].get("ownerReferences") or []):
            continue
        ref = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
        try:
            evict(api, pod["metadata"]["namespace"], pod["metadata"]["name"], {})
            evicted.append(ref)
        except ApiError as exc:
            if exc.code != 429:
                raise
            blocked.append(ref)
    return evicted, blocked
