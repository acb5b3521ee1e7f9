"""ResourceQuota status, as kube-controller-manager's resource quota controller keeps it: each
quota's `status.hard` is its `spec.hard`, and `status.used` what the namespace uses of each name
kubesim counts (`kubesim.quota`: what kubesim enforces): its pods that hold it, and its objects
of the kinds a name counts (`services`, `count/configmaps`). Woken by the pods of namespaces
that have a quota, by the creation and deletion of objects a quota of their namespace counts (a
Service's change of type or ports too), by a quota's creation, deletion and change of limits
(not by status writes, its own or the admission's charges), when a Terminating pod's deletion
grace runs out (it stops counting), and every five minutes.
"""

from __future__ import annotations

import datetime as dt

from kubesim.controllers.base import Controller
from kubesim.quota import QUOTAS, pod_counts, quota_status, stops_counting, usage
from kubesim.quota_objects import PODS, SERVICES, counted_kind, object_usage
from kubesim.quota_usage import Usage
from kubesim.store import Change, Object
from kubesim.timing import now

RESYNC_SECONDS = 300.0
"""kube-controller-manager's `--resource-quota-sync-period` default: every quota is counted
again this often, whatever changed."""


class QuotaStatus(Controller):
    name = "resourcequota-controller"
    watches = (PODS, QUOTAS)

    def on_change(self, change: Change) -> None:
        if change.type_key in self.watches:
            super().on_change(change)
        elif self.counts_objects(change):
            self.poke()

    def counts_objects(self, change: Change) -> bool:
        """Whether `change` moves an object count a quota of its namespace keeps: a creation or
        deletion of an object of a kind one counts, or a Service's change of what it uses."""
        if change.type == "MODIFIED" and not (change.type_key == SERVICES and service_usage_moved(change)):
            return False
        namespace = change.obj["metadata"].get("namespace") or ""
        quotas = self.store.list(QUOTAS, namespace) if namespace else []
        return any(counted_kind(key) == change.type_key for quota in quotas for key in hard_of(quota))

    def relevant(self, change: Change) -> bool:
        if change.type_key == QUOTAS:
            # Not its own status writes, nor the admission's charges: a new limit or a new quota.
            return change.type != "MODIFIED" or hard_of(change.old) != hard_of(change.obj)
        if change.type == "MODIFIED" and not counting_moved(change):
            return False
        namespace = change.obj["metadata"].get("namespace") or ""
        return bool(self.store.list(QUOTAS, namespace))

    def reconcile(self) -> None:
        at = now()
        rt = self.api.type_of(*QUOTAS)
        used: dict[str, Usage] = {}
        stops: list[dt.datetime] = []
        for quota in self.store.list(QUOTAS):
            namespace = quota["metadata"].get("namespace") or ""
            if namespace not in used:
                names = {key for each in self.store.list(QUOTAS, namespace) for key in hard_of(each)}
                used[namespace] = usage(self.store, namespace, at, names)
                counting = [pod for pod in self.store.list(PODS, namespace) if pod_counts(pod, at)]
                stops += [stop for stop in map(stops_counting, counting) if stop is not None]
            self.api.write_status(rt, quota, quota_status(quota, used[namespace]), self.name)
        if used:
            # A full recount every `RESYNC_SECONDS` puts right a status someone else overwrote.
            self.wake_in(RESYNC_SECONDS)
        if stops:
            self.wake_in(max(0.0, (min(stops) - at).total_seconds()) + 0.01)


def hard_of(quota: Object | None) -> dict[str, object]:
    hard: dict[str, object] = ((quota or {}).get("spec") or {}).get("hard") or {}
    return hard


def service_usage_moved(change: Change) -> bool:
    """Whether a Service's change moves what it uses (its type, its ports)."""
    return object_usage(SERVICES, change.old or {}) != object_usage(SERVICES, change.obj)


def counting_moved(change: Change) -> bool:
    """Whether a pod's change may move what it counts: its phase, or its deletion (a pod's
    readiness flips and status writes do not)."""
    old, new = change.old or {}, change.obj
    return (old.get("status") or {}).get("phase") != (new.get("status") or {}).get("phase") or (
        old.get("metadata") or {}
    ).get("deletionTimestamp") != new["metadata"].get("deletionTimestamp")
