"""The simulated kubelets: one loop that runs every bound pod on every Ready node through the
states a real kubelet reports.

A container goes ContainerCreating (image pull) -> Running -> ready, each step taking the time
set for its image; an image can fail its pull (ErrImagePull, then ImagePullBackOff), crash
(terminated with exit code 1, restarted per `restartPolicy` with CrashLoopBackOff back-off) or
stop being ready after a while. The pod's Ready condition honours `readinessGates`.

Deleting a pod works as on a real node: the kubelet sends SIGTERM to each running container
(event `Killing`); a container exits after its image's `stop_seconds` (terminated, exit 0,
`Completed`) or, if it has not exited when the grace period ends, is SIGKILLed (exit 137,
`Error`). Once no container runs, the kubelet reports the final status and removes the pod, so
the pod is gone after min(stop_seconds, grace), not the whole grace period. A failed node's
kubelet does nothing, so its pods stay as they were until force-deleted.

A stalled node (`stalled`) is Ready but its container runtime is wedged, as when the CNI or
containerd hangs: a pod bound there gets no sandbox (Warning `FailedCreatePodSandBox`, once)
and its containers stay waiting in ContainerCreating; such a pod is removed at once when
deleted (nothing runs in it). Pods that were running before the stall keep running as they
were. Once the node is no longer stalled, its waiting pods start normally.
"""

from __future__ import annotations

import asyncio
import hashlib
import heapq
from dataclasses import dataclass, field
from typing import Any

from kubesim.allocation import PodIPs
from kubesim.api import Api
from kubesim.controllers.base import Controller
from kubesim.events import record_event
from kubesim.store import Change, Object, ObjectKey, object_key
from kubesim.timing import Timing, timestamp

PODS = ("", "pods")
NODES = ("", "nodes")
KUBELET_CONDITIONS = ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
MAX_BACKOFF_SECONDS = 300.0


def node_ready(node: Object | None) -> bool:
    if node is None:
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class ContainerRun:
    """One container's simulated runtime state."""

    name: str
    image: str
    stage: str = "pulling"  # pulling, pull-error, pull-backoff, creating, running, backoff, terminated, done
    next_at: float | None = None
    started_at: str = ""
    ready: bool = False
    ready_since: float | None = None
    ever_started: bool = False
    restart_count: int = 0
    pull_failures: int = 0
    terminated: dict[str, Any] | None = None
    last_terminated: dict[str, Any] | None = None
    container_id: str = ""
    message: str = ""
    exits_at: float | None = None  # after SIGTERM: when the process exits (None: it ignores SIGTERM)


@dataclass
class PodRun:
    uid: str
    node: str
    containers: list[ContainerRun]
    init: list[ContainerRun]
    pod_ip: str
    start_time: str
    terminating_since: float | None = None  # when the kubelet sent SIGTERM
    kill_at: float | None = None  # end of the grace period: SIGKILL for whatever still runs
    extra: dict[str, Any] = field(default_factory=dict)
    # The pod as the last status write left it and the node it was computed against: while
    # both are unchanged and no timer of the run is due, its status would come out the same.
    written: Object | None = None
    written_on: Object | None = None


class Kubelet(Controller):
    name = "kubelet"
    watches = (PODS, NODES)

    def __init__(self, api: Api, timing: Timing) -> None:
        super().__init__(api)
        self.runs: dict[str, PodRun] = {}
        self.stalled: set[str] = set()
        """Nodes whose container runtime is wedged: new pods there never get a sandbox."""
        self.stalled_pods: set[str] = set()
        """Uids of pods already reported stuck without a sandbox."""
        # Per image: how long it takes to pull, start, get ready and stop; the factor scales
        # grace periods and back-offs. Shared with the cluster, which changes it at run time.
        self.timing = timing
        # Pod IPs taken by stored pods and by the runs, so admitting a pod need not gather them.
        self._ips = PodIPs(self.store)
        # A pass looks only at the pods that changed (and forgets the runs of those deleted)
        # and at those whose timer is due; a node change, a poke (a stall, a kill, new timing),
        # a store restore or a failed pass make the next one look at every pod.
        self._full = True
        self._changed: set[ObjectKey] = set()
        self._gone: set[str] = set()
        self._restores = self.store.restores
        self._timers: list[tuple[float, ObjectKey]] = []  # heap of (loop time, pod)
        self._timer_of: dict[ObjectKey, float] = {}

    def relevant(self, change: Change) -> bool:
        if change.type_key == NODES:
            return True
        spec = change.obj.get("spec") or {}
        return bool(spec.get("nodeName"))

    # ---- entry points from the control API -------------------------------------------------

    def kill(self, uid: str) -> bool:
        """A container runtime kill: every running container exits 137 and restarts per policy."""
        run = self.runs.get(uid)
        if run is None:
            return False
        now = self._now()
        for c in run.containers:
            if c.stage == "running":
                self._terminate(c, now, exit_code=137, reason="Error")
        self.poke()
        return True

    # ---- reconcile -------------------------------------------------------------------------

    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    def on_change(self, change: Change) -> None:
        if change.type_key == NODES:
            self._full = True
        elif change.type_key == PODS and (change.obj.get("spec") or {}).get("nodeName"):
            if change.type == "DELETED":
                self._gone.add(change.obj["metadata"]["uid"])
            else:
                self._changed.add(object_key(change.obj))
        super().on_change(change)

    def poke(self) -> None:
        self._full = True  # what changed is outside the store (a stall, a kill, the timing)
        super().poke()

    def reconcile(self) -> None:
        now = self._now()
        nodes = {n["metadata"]["name"]: n for n in self.store.list(NODES)}
        full = self._full or self._restores != self.store.restores
        changed, gone = self._changed, self._gone
        self._changed, self._gone, self._full, self._restores = set(), set(), False, self.store.restores
        try:
            if full:
                self._full_pass(nodes, now)
            else:
                self._pass(changed | self._timers_due(now), gone, nodes, now)
        except Exception:
            self._full = True  # the changes this pass took are looked at again, with every pod
            raise
        if self._timers:
            # Each pass starts with no wake-up asked for: the pods it did not visit keep theirs.
            self.wake_in(self._timers[0][0] - now)

    def _full_pass(self, nodes: dict[str, Object], now: float) -> None:
        self._timers.clear()
        self._timer_of.clear()
        alive: set[str] = set()
        for pod in self.store.list(PODS):
            if (pod.get("spec") or {}).get("nodeName"):
                alive.add(pod["metadata"]["uid"])
                self._visit(pod, nodes, now)
        for uid in list(self.runs):
            if uid not in alive:
                self._forget(uid)
        self.stalled_pods &= alive

    def _pass(self, keys: set[ObjectKey], gone: set[str], nodes: dict[str, Object], now: float) -> None:
        """Only the pods that changed or have a timer due: the others would come out the same."""
        for uid in gone:
            self._forget(uid)
            self.stalled_pods.discard(uid)
        for namespace, name in sorted(keys):
            pod = self.store.get(PODS, namespace, name)
            if pod is not None and (pod.get("spec") or {}).get("nodeName"):
                self._visit(pod, nodes, now)

    def _visit(self, pod: Object, nodes: dict[str, Object], now: float) -> None:
        uid = pod["metadata"]["uid"]
        node_name = pod["spec"]["nodeName"]
        node = nodes.get(node_name)
        if not node_ready(node):
            return  # no kubelet answers for this node
        run = self.runs.get(uid)
        if run is None and node_name in self.stalled:
            self._stalled_pod(pod, node, now)
            return
        self.stalled_pods.discard(uid)
        if run is None:
            run = self.runs[uid] = self._admit(pod, node, now)
            self._ips.run_started(uid, run.pod_ip)
        if pod["metadata"].get("deletionTimestamp"):
            self._terminate_pod(pod, run, now)
            return
        if pod is not run.written or node is not run.written_on or any(
                self._due(c, now) for c in run.init + run.containers):
            for c in run.init + run.containers:
                self._advance(pod, run, c, now)
            run.written = self.api.write_status(self.api.type_of(*PODS), pod, self._status(pod, run), "kubelet")
            run.written_on = node
        pending = [c.next_at for c in run.init + run.containers if c.next_at is not None]
        if pending:
            self._wake_for(pod, min(pending), now)

    def _forget(self, uid: str) -> None:
        if self.runs.pop(uid, None) is not None:
            self._ips.run_ended(uid)

    def _wake_for(self, pod: Object, at: float, now: float) -> None:
        """Look at `pod` again at `at` (loop time)."""
        key = object_key(pod)
        if self._timer_of.get(key) != at:
            self._timer_of[key] = at
            heapq.heappush(self._timers, (at, key))
        self.wake_in(at - now)

    def _timers_due(self, now: float) -> set[ObjectKey]:
        due = set()
        while self._timers and self._timers[0][0] <= now:
            at, key = heapq.heappop(self._timers)
            if self._timer_of.get(key) == at:  # else a later (or earlier) timer replaced it
                del self._timer_of[key]
                due.add(key)
        return due

    @staticmethod
    def _due(c: ContainerRun, now: float) -> bool:
        """Whether `_advance` would change the container now (a timer due, or a restart to decide)."""
        return (c.next_at is not None and c.next_at <= now) or (c.stage == "terminated" and c.next_at is None)

    def _stalled_pod(self, pod: Object, node: Object | None, now: float) -> None:
        """A pod on a stalled node: no sandbox, containers waiting in ContainerCreating."""
        pods_rt = self.api.type_of(*PODS)
        uid = pod["metadata"]["uid"]
        if pod["metadata"].get("deletionTimestamp"):
            # Nothing was ever started in it: nothing to stop.
            self.stalled_pods.discard(uid)
            self.api.force_remove(pods_rt, pod)
            return
        if uid in self.stalled_pods:
            return
        self.stalled_pods.add(uid)
        spec = pod.get("spec") or {}
        waiting = PodRun(
            uid=uid,
            node=spec["nodeName"],
            containers=[ContainerRun(c["name"], c.get("image", "")) for c in spec.get("containers") or []],
            init=[ContainerRun(c["name"], c.get("image", "")) for c in spec.get("initContainers") or []],
            pod_ip="",
            start_time=(pod.get("status") or {}).get("startTime") or timestamp(),
        )
        status = self._status(pod, waiting)
        status.pop("podIP", None)
        status.pop("podIPs", None)
        for condition in status["conditions"]:
            if condition["type"] == "PodReadyToStartContainers":
                condition["status"] = "False"
        self.api.write_status(pods_rt, pod, status, "kubelet")
        record_event(self.api, pod, "Warning", "FailedCreatePodSandBox",
                     "Failed to create pod sandbox: rpc error: code = DeadlineExceeded desc = context deadline "
                     "exceeded", "kubelet", host=spec["nodeName"])

    def _admit(self, pod: Object, node: Object | None, now: float) -> PodRun:
        spec, status = pod.get("spec") or {}, pod.get("status") or {}
        if spec.get("hostNetwork"):
            pod_ip = self._host_ip(node)
        else:
            pod_ip = status.get("podIP") or self._ips.first_free()
        run = PodRun(
            uid=pod["metadata"]["uid"],
            node=spec["nodeName"],
            containers=[ContainerRun(c["name"], c.get("image", "")) for c in spec.get("containers") or []],
            init=[ContainerRun(c["name"], c.get("image", "")) for c in spec.get("initContainers") or []],
            pod_ip=pod_ip,
            start_time=status.get("startTime") or timestamp(),
        )
        # After a restart of kubesim, containers that were running keep running, as they would
        # on a real node while the API server was away.
        known = {s["name"]: s for s in status.get("containerStatuses") or []}
        for c in run.containers:
            seen = known.get(c.name)
            if seen and "running" in (seen.get("state") or {}):
                c.stage, c.ever_started, c.ready = "running", True, bool(seen.get("ready"))
                c.started_at = seen["state"]["running"].get("startedAt", timestamp())
                c.restart_count = int(seen.get("restartCount") or 0)
                c.container_id = seen.get("containerID") or ""
                c.ready_since = now if c.ready else None
        if any(c.ever_started for c in run.containers):
            for c in run.init:
                c.stage, c.ever_started = "done", True
        for c in self._schedule_first(run, now):
            self._event(pod, run, "Normal", "Pulling", f'Pulling image "{c.image}"')
        return run

    @staticmethod
    def _host_ip(node: Object | None) -> str:
        return next((a["address"] for a in ((node or {}).get("status") or {}).get("addresses") or []
                     if a.get("type") == "InternalIP"), "10.0.0.1")

    def _schedule_first(self, run: PodRun, now: float) -> list[ContainerRun]:
        """Start the first pulls; returns the containers whose image pull began."""
        timing = self.timing
        first = next((c for c in run.init if c.stage != "done"), None)
        targets = [first] if first else [c for c in run.containers if c.stage in ("pulling", "running")]
        pulling = []
        for c in targets:
            if c.stage == "pulling" and c.next_at is None:
                c.next_at = now + timing.phase_seconds(c.image)[0]
                pulling.append(c)
            if c.stage == "running" and not c.ready and c.next_at is None:
                c.next_at = now + timing.phase_seconds(c.image)[2]
        return pulling

    def _event(self, pod: Object, run: PodRun, event_type: str, reason: str, message: str) -> None:
        record_event(self.api, pod, event_type, reason, message, "kubelet", host=run.node)

    def _advance(self, pod: Object, run: PodRun, c: ContainerRun, now: float) -> None:
        timing = self.timing
        is_init = c in run.init
        while c.next_at is not None and c.next_at <= now:
            behavior = timing.behavior(c.image)
            pull, start, ready = timing.phase_seconds(c.image)
            at = c.next_at
            c.next_at = None
            if c.stage in ("pulling", "pull-backoff"):
                if behavior.fail_pull:
                    c.pull_failures += 1
                    c.stage = "pull-error"
                    c.message = (f'failed to pull and unpack image "{c.image}": failed to resolve reference '
                                 f'"{c.image}": not found')
                    c.next_at = at + self._backoff(c.pull_failures)
                    self._event(pod, run, "Warning", "Failed", f'Failed to pull image "{c.image}": {c.message}')
                    self._event(pod, run, "Warning", "Failed", "Error: ErrImagePull")
                else:
                    c.stage, c.next_at = "creating", at + start
                    self._event(pod, run, "Normal", "Pulled", f'Successfully pulled image "{c.image}" in {pull:g}s')
            elif c.stage == "pull-error":
                c.stage, c.message = "pull-backoff", f'Back-off pulling image "{c.image}"'
                c.next_at = at + self._backoff(c.pull_failures)
                self._event(pod, run, "Normal", "BackOff", c.message)
                self._event(pod, run, "Warning", "Failed", "Error: ImagePullBackOff")
            elif c.stage in ("creating", "backoff"):
                if c.stage == "backoff":
                    c.restart_count += 1
                self._event(pod, run, "Normal", "Created", f"Created container: {c.name}")
                self._event(pod, run, "Normal", "Started", f"Started container {c.name}")
                c.stage, c.ever_started, c.started_at, c.ready = "running", True, timestamp(), False
                c.container_id = "containerd://" + _digest(f"{run.uid}/{c.name}/{c.restart_count}")
                c.terminated = None
                c.next_at = at + (start if is_init else ready)
            elif c.stage == "running" and is_init:
                c.stage = "done"
                c.terminated = {"exitCode": 0, "reason": "Completed", "startedAt": c.started_at,
                                "finishedAt": timestamp(), "containerID": c.container_id}
                following = next((i for i in run.init if i.stage == "pulling" and i.next_at is None), None)
                for starting in [following] if following is not None else run.containers:
                    if starting.stage == "pulling" and starting.next_at is None:
                        starting.next_at = at + timing.phase_seconds(starting.image)[0]
                        self._event(pod, run, "Normal", "Pulling", f'Pulling image "{starting.image}"')
            elif c.stage == "running" and not c.ready:
                if behavior.crash:
                    self._terminate(c, at, exit_code=1, reason="Error")
                elif c.ready_since is None:
                    c.ready, c.ready_since = True, at
                    if behavior.unready_after_seconds is not None:
                        c.next_at = at + behavior.unready_after_seconds
            elif c.stage == "running" and c.ready and behavior.unready_after_seconds is not None:
                c.ready = False  # the readiness probe started failing; it stays failed
                self._event(pod, run, "Warning", "Unhealthy",
                            "Readiness probe failed: HTTP probe failed with statuscode: 503")
        if c.stage == "terminated" and c.next_at is None:
            self._maybe_restart(pod, c, now)

    def _backoff(self, failures: int) -> float:
        """Kubelet back-off (10s doubling to 5 minutes), scaled, never below 10 ms so that a
        time factor of 0 cannot spin the state machine."""
        return max(0.01, self.timing.scaled(min(10.0 * 2.0 ** max(0, failures - 1), MAX_BACKOFF_SECONDS)))

    def _terminate(self, c: ContainerRun, at: float, exit_code: int, reason: str) -> None:
        c.terminated = {"exitCode": exit_code, "reason": reason, "startedAt": c.started_at or timestamp(),
                        "finishedAt": timestamp(), "containerID": c.container_id}
        c.stage, c.ready, c.ready_since, c.next_at = "terminated", False, None, None

    def _maybe_restart(self, pod: Object, c: ContainerRun, now: float) -> None:
        policy = (pod.get("spec") or {}).get("restartPolicy", "Always")
        exit_code = (c.terminated or {}).get("exitCode", 0)
        if policy == "Never" or (policy == "OnFailure" and exit_code == 0):
            return
        c.last_terminated = c.terminated
        # The first restart is immediate; later ones back off 10s, 20s, 40s ... up to 5 minutes.
        delay = 0.0 if c.restart_count == 0 else self._backoff(c.restart_count)
        shown = 0 if c.restart_count == 0 else min(10 * 2 ** (c.restart_count - 1), int(MAX_BACKOFF_SECONDS))
        c.stage = "backoff"
        where = f"{pod['metadata']['name']}_{pod['metadata'].get('namespace', '')}({pod['metadata']['uid']})"
        c.message = f"back-off {shown}s restarting failed container={c.name} pod={where}"
        if c.restart_count > 0:
            self._event(pod, self.runs[pod["metadata"]["uid"]], "Warning", "BackOff",
                        f"Back-off restarting failed container {c.name} in pod {where}")
        c.next_at = now + delay + self.timing.phase_seconds(c.image)[1]

    def _terminate_pod(self, pod: Object, run: PodRun, now: float) -> None:
        timing = self.timing
        if run.terminating_since is None:
            run.terminating_since = now
            for c in run.init + run.containers:
                if c.stage == "running":
                    self._event(pod, run, "Normal", "Killing", f"Stopping container {c.name}")
                    stop = timing.stop_after(c.image)
                    c.exits_at = None if stop is None else now + stop
        # A second delete may shorten the grace period (never lengthen it), as with the kubelet;
        # the shorter period counts from that delete.
        grace = pod["metadata"].get("deletionGracePeriodSeconds") or 0
        kill_at = now + timing.scaled(grace)
        if run.kill_at is None or kill_at < run.kill_at:
            run.kill_at = kill_at
        changed = False
        for c in run.init + run.containers:
            if c.stage != "running":
                continue  # never started or between restarts: no process to stop
            if c.exits_at is not None and c.exits_at <= min(now, run.kill_at):
                self._terminate(c, now, exit_code=0, reason="Completed")
                changed = True
            elif run.kill_at <= now:
                self._terminate(c, now, exit_code=137, reason="Error")
                changed = True
        pods_rt = self.api.type_of(*PODS)
        running = [c for c in run.init + run.containers if c.stage == "running"]
        if running:
            if changed:
                self.api.write_status(pods_rt, pod, self._status(pod, run), "kubelet")
            wake = min([run.kill_at] + [c.exits_at for c in running if c.exits_at is not None])
            self._wake_for(pod, wake, now)
            return
        current = self.api.write_status(pods_rt, pod, self._status(pod, run), "kubelet")
        self.api.force_remove(pods_rt, current)

    # ---- status ----------------------------------------------------------------------------

    def _container_status(self, pod: Object, run: PodRun, c: ContainerRun, initializing: bool) -> Object:
        state: Object
        if c.stage in ("running",):
            state = {"running": {"startedAt": c.started_at}}
        elif c.stage in ("terminated", "done"):
            state = {"terminated": dict(c.terminated or {})}
        elif c.stage in ("pull-error", "pull-backoff"):
            state = {"waiting": {"reason": "ErrImagePull" if c.stage == "pull-error" else "ImagePullBackOff",
                                 "message": c.message}}
        elif c.stage == "backoff":
            delay_shown = c.restart_count > 0
            state = {"waiting": {"reason": "CrashLoopBackOff", "message": c.message}} if delay_shown else {
                "waiting": {"reason": "ContainerCreating"}}
        else:
            state = {"waiting": {"reason": "PodInitializing" if initializing else "ContainerCreating"}}
        pulled = c.stage not in ("pulling", "pull-error", "pull-backoff") or c.ever_started
        status: Object = {
            "name": c.name,
            "image": c.image,
            "imageID": f"{c.image.split(':')[0]}@sha256:{_digest(c.image)}" if pulled else "",
            "ready": c.ready,
            "restartCount": c.restart_count,
            "started": c.stage == "running",
            "state": state,
            "lastState": {"terminated": dict(c.last_terminated)} if c.last_terminated else {},
        }
        if c.container_id:
            status["containerID"] = c.container_id
        return status

    def _status(self, pod: Object, run: PodRun) -> Object:
        old = pod.get("status") or {}
        spec = pod.get("spec") or {}
        host_ip = self._host_ip(self.store.get(NODES, "", run.node))
        initialized = all(c.stage == "done" for c in run.init)
        statuses = [self._container_status(pod, run, c, not initialized) for c in run.containers]
        unready = [c.name for c in run.containers if not c.ready]
        policy = spec.get("restartPolicy", "Always")
        finished = run.containers and all(c.stage == "terminated" for c in run.containers) and (
            policy == "Never" or (policy == "OnFailure" and all((c.terminated or {}).get("exitCode") == 0
                                                                for c in run.containers)))
        if finished:
            failed = any((c.terminated or {}).get("exitCode") for c in run.containers)
            phase = "Failed" if failed else "Succeeded"
        elif initialized and all(c.ever_started for c in run.containers):
            phase = "Running"
        else:
            phase = "Pending"
        gates = [g.get("conditionType") for g in spec.get("readinessGates") or []]
        existing = {c.get("type"): c for c in old.get("conditions") or []}
        gate_problem = ""
        for gate in gates:
            gate_condition = existing.get(gate)
            if gate_condition is None:
                gate_problem = f'corresponding condition of pod readiness gate "{gate}" does not exist.'
                break
            if gate_condition.get("status") != "True":
                gate_problem = (f'the status of pod readiness gate "{gate}" is not "True", '
                                f'but {gate_condition.get("status")}')
                break
        containers_ready = not unready
        not_ready_message = f"containers with unready status: [{' '.join(unready)}]"
        wanted: list[tuple[str, bool, str, str]] = [
            ("PodReadyToStartContainers", True, "", ""),
            ("Initialized", initialized, "ContainersNotInitialized",
             f"containers with incomplete status: [{' '.join(c.name for c in run.init if c.stage != 'done')}]"),
            ("Ready", containers_ready and not gate_problem,
             "ContainersNotReady" if not containers_ready else "ReadinessGatesNotReady",
             not_ready_message if not containers_ready else gate_problem),
            ("ContainersReady", containers_ready, "ContainersNotReady", not_ready_message),
            ("PodScheduled", True, "", ""),
        ]
        if phase in ("Succeeded", "Failed"):
            wanted[2] = ("Ready", False, "PodCompleted", "")
            wanted[3] = ("ContainersReady", False, "PodCompleted", "")
        # PodObservedGenerationTracking (on by default since 1.34): the kubelet reports the spec
        # generation its status reflects.
        generation = pod["metadata"].get("generation", 1)
        conditions = []
        for ctype, ok, reason, message in wanted:
            value = "True" if ok else "False"
            prev = existing.get(ctype)
            cond: Object = {"type": ctype, "status": value, "observedGeneration": generation}
            if not ok and reason:
                cond["reason"] = reason
                if message:
                    cond["message"] = message
            cond["lastTransitionTime"] = (prev.get("lastTransitionTime") if prev and prev.get("status") == value
                                          else timestamp())
            if ctype == "PodScheduled" and prev:
                cond = {**prev, "status": "True"}
                cond.pop("reason", None)
                cond.pop("message", None)
            conditions.append(cond)
        # Conditions other components own (readiness gates, DisruptionTarget ...) are kept.
        conditions += [c for t, c in existing.items() if t not in KUBELET_CONDITIONS]
        status: Object = {
            **{k: v for k, v in old.items() if k in ("qosClass", "nominatedNodeName")},
            "observedGeneration": generation,
            "phase": phase,
            "conditions": conditions,
            "hostIP": host_ip,
            "hostIPs": [{"ip": host_ip}],
            "podIP": run.pod_ip,
            "podIPs": [{"ip": run.pod_ip}],
            "startTime": run.start_time,
            "containerStatuses": statuses,
        }
        if run.init:
            status["initContainerStatuses"] = [self._container_status(pod, run, c, False) for c in run.init]
        return status
