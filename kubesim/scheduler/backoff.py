"""When a pod that did not fit is tried again: kube-scheduler's back-off and unschedulable queue.

A pod that fits nowhere is not retried on every change of the cluster. kube-scheduler parks
it until a cluster event that could help (a pod leaving or placed, a node changing) moves it
back, and even then not before its back-off has passed: 1 s after its first failed attempt,
doubling with each failure up to 10 s (`podInitialBackoffSeconds`, `podMaxBackoffSeconds`).
A pod that no event has moved is tried again after 5 minutes (`podMaxInUnschedulablePodsDuration`).
So a thousand pending pods cost at most one attempt each per back-off, however fast pods come
and go around them.

Pure bookkeeping over the times the caller gives; `scale` turns the cluster's seconds into the
simulation's (kubesim's time factor, as for the kubelet's back-offs).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

INITIAL_BACKOFF_SECONDS = 1.0
MAX_BACKOFF_SECONDS = 10.0
MAX_UNSCHEDULABLE_SECONDS = 300.0
# Never wait less: a time factor of 0 must not spin the scheduling loop.
MIN_WAIT_SECONDS = 0.001


def backoff_seconds(failures: int) -> float:
    """The back-off after `failures` failed attempts, in cluster seconds."""
    return min(INITIAL_BACKOFF_SECONDS * 2.0 ** max(0, failures - 1), MAX_BACKOFF_SECONDS)


@dataclass
class _Failed:
    failures: int
    at: float  # when the last attempt failed
    events: int  # the count of cluster events when it failed


class SchedulingBackoff:
    """Failed attempts per pod uid, and the cluster events since."""

    def __init__(self, scale: Callable[[float], float]) -> None:
        self._scale = scale
        self._failed: dict[str, _Failed] = {}
        self._events = 0

    def cluster_changed(self) -> None:
        """A change that could make a parked pod fit: every parked pod is moved to back-off."""
        self._events += 1

    def moved(self, uid: str) -> None:
        """The pod itself changed: it is moved to back-off as by a cluster event."""
        failed = self._failed.get(uid)
        if failed is not None:
            failed.events = -1

    def failed(self, uid: str, now: float) -> None:
        last = self._failed.get(uid)
        self._failed[uid] = _Failed((last.failures if last else 0) + 1, now, self._events)

    def forget(self, uid: str) -> None:
        """The pod was placed (or is gone): its next life starts without back-off."""
        self._failed.pop(uid, None)

    def keep_only(self, uids: Collection[str]) -> None:
        self._failed = {uid: failed for uid, failed in self._failed.items() if uid in uids}

    def failures(self, uid: str) -> int:
        failed = self._failed.get(uid)
        return failed.failures if failed else 0

    def wait(self, uid: str, now: float) -> float:
        """Seconds until the pod may be tried again; 0: now."""
        failed = self._failed.get(uid)
        if failed is None:
            return 0.0
        if failed.events == self._events:  # parked: no event since its last attempt
            due = failed.at + self._scale(MAX_UNSCHEDULABLE_SECONDS)
        else:
            due = failed.at + self._scale(backoff_seconds(failed.failures))
        return 0.0 if due <= now else max(MIN_WAIT_SECONDS, due - now)
