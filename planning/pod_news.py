"""Which pod changes an Instance must hear at once, and which are progress that can wait.

The watcher signals an Instance whenever its pods' summary changes; every signal costs the
Instance's history a signal event and a workflow task. Most of a pod's way up is progress no
decision waits for: it appears Pending (the Instance created it, it knows), is scheduled, its
containers start, its headless Service lists it before it serves. The watcher holds such a
summary back for a moment (`workers.watch.pods.PodWatcher`, `settle_seconds`) and sends
only the newest one, unless a change a decision reads comes first, which goes at once with
everything else the summary says. Nothing is dropped: progress is only late by the hold.

A decision reads (per pod, against the last summary sent): the pod going or a new uid,
deletion (its timestamp, grace and finalizers), a terminal phase, readiness, the
`ome.io/serving` gate of a ready pod, being listed while serving (Available), container
restarts and failure reasons, a node turning bad or vanishing, scheduling trouble
(Unschedulable, scheduling gates). A pod that appears without any of those is progress, and
so is a pod that turned serving while its headless Service's slices do not list it yet: it
goes out with the listing, serving and Available in one signal.

A pod the Instance took out of rotation (its `ome.io/serving` gate False: only the Instance
writes it, and only on its way to deleting the pod, or holding it drained) is on its way out:
the gate going False, the pod's deletion starting, its readiness and its listing ending are
what the Instance did or waits through, and are progress too (held longer: nothing waits
for them, `only_on_the_way_out`), as are its containers
stopping and its terminal phase once it is being deleted. Its going is news (the Instance
waits for that), and so is anything that goes wrong with it: a crash or a terminal phase
before its deletion, a restart, its node, a finalizer, a new uid.
"""

from __future__ import annotations

from models.pods import InstancePods, PodSummary

PROGRESS_WAITING_REASONS = frozenset({"ContainerCreating", "PodInitializing"})
"""Waiting reasons of a container on its normal way up; any other (ErrImagePull,
CrashLoopBackOff, CreateContainerConfigError, ...) is news."""


def must_hear_now(previous: InstancePods | None, current: InstancePods) -> bool:
    """Whether `current` tells the Instance something its decisions read that `previous` (the
    last summary it was sent; None: none yet) did not."""
    before = {pod.name: pod for pod in previous.pods} if previous is not None else {}
    after = {pod.name: pod for pod in current.pods}
    if before.keys() - after.keys():
        return True  # a pod went
    for name, pod in after.items():
        old = before.get(name)
        pod = _until_listed(pod, current)
        way_out = _way_out(pod)
        if old is None:
            if _decision_facts(pod, current, way_out) != _decision_facts(_arrived(pod), current, way_out):
                return True
        elif _decision_facts(_until_listed(old, previous), previous, way_out) != _decision_facts(pod, current, way_out):
            return True
    return False


def only_on_the_way_out(previous: InstancePods | None, current: InstancePods) -> bool:
    """Whether every change from `previous` to `current` is a pod's on its way out (its gate
    False now): nothing waits for such progress, so the watcher may hold it longer, until the
    pod goes (news) or the longer hold ends."""
    if previous is None:
        return False
    before = {pod.name: pod for pod in previous.pods}
    after = {pod.name: pod for pod in current.pods}
    if before.keys() != after.keys():
        return False
    leaving = {name for name, pod in after.items() if _way_out(pod)}
    if not leaving or any(before[name] != pod for name, pod in after.items() if name not in leaving):
        return False
    listed_before, listed_after = set(previous.endpoints_listed or ()), set(current.endpoints_listed or ())
    return (listed_before ^ listed_after) <= leaving


def _way_out(pod: PodSummary) -> int:
    """0: in rotation (or never put there); 1: out of rotation (its gate False); 2: out of
    rotation and being deleted, its containers shutting down."""
    if pod.serving != "False":
        return 0
    return 2 if pod.terminating else 1


def _until_listed(pod: PodSummary, pods: InstancePods | None) -> PodSummary:
    """A pod that serves but its headless Service's slices do not list yet is still on its way
    up: the slice follows Ready within moments, and the Instance hears serving and Available
    together (or after the hold, if the listing is late). Where no slice says (None), as is."""
    listed = pods.endpoints_listed if pods is not None else None
    if listed is None or not pod.is_serving or pod.name in listed:
        return pod
    return pod.model_copy(update={"containers_ready": False})


def _arrived(pod: PodSummary) -> PodSummary:
    """What a pod on its normal way up looks like to decisions: the baseline a new pod is
    compared with."""
    return pod.model_copy(
        update={
            "phase": "Pending",
            "terminating": False,
            "deletion_timestamp": None,
            "deletion_grace_seconds": None,
            "containers_ready": False,
            "serving": None,
            "node_ready": None,
            "node_missing": False,
            "node_unreachable_since": None,
            "unschedulable_reason": None,
            "scheduling_gated": False,
            "restart_count": 0,
            "containers": (),
        }
    )


def _decision_facts(pod: PodSummary, pods: InstancePods | None, way_out: int) -> tuple[object, ...]:
    """What decisions read of `pod`; on its `way_out` now (`_way_out`), its way out so far
    reads, before and now alike, as the moment before its gate went False, and once it is
    being deleted, so does its containers' shutting down."""
    listed = pods is not None and pods.endpoints_listed is not None and pod.name in pods.endpoints_listed
    leaving, going = way_out >= 1, way_out == 2
    troubles = tuple(
        (container.name, container.waiting_reason, container.terminated_reason, container.last_terminated_reason)
        for container in pod.containers
        if (container.waiting_reason and container.waiting_reason not in PROGRESS_WAITING_REASONS)
        or container.terminated_reason
        or container.last_terminated_reason
    )
    return (
        pod.uid,
        None if leaving else pod.terminating,
        None if leaving else pod.deletion_timestamp,
        None if leaving else pod.deletion_grace_seconds,
        pod.finalizers,
        None if going else pod.is_terminal,
        True if leaving else pod.is_ready,
        # The gate of a pod not ready yet decides nothing: only the Instance writes it (a
        # single-pod Instance creates its pod with it, `planning.instance.serving`).
        "True" if leaving else (pod.serving if pod.is_ready else None),
        True if leaving else pod.is_serving and listed,
        pod.node_ready if pod.node_ready not in (None, "True") else None,
        pod.node_missing,
        pod.node_unreachable_since,
        pod.unschedulable_reason,
        pod.scheduling_gated,
        pod.restart_count,
        () if going else troubles,
    )
