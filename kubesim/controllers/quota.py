"""ResourceQuota status, as kube-controller-manager's resource quota controller keeps it: each
quota's `status.hard` is its `spec.hard`, and `status.used` what the namespace's pods that hold
it use of each name that counts pods (`kubesim.quota`: what kubesim enforces). Woken by the
pods of namespaces that have a quota, by a quota's creation, deletion and change of limits (not
by status writes, its own or the admission's charges), when a Terminating pod's deletion grace
runs out (it stops counting), and every five minutes.
"""

from __future__ import annotations

import datetime as dt

from kubesim.controllers.base import Controller
from kubesim.quota import PODS, QUOTAS, pod_counts, quota_status, stops_counting, usage
from kubesim.quota_usage import Usage
from kubesim.store import Change, Object
from kubesim.timing import now

RESYNC_SECONDS = 300.0
"""kube-controller-manager's `--resource-quota-sync-period` default: every quota is counted
again this often, whatever changed."""


class QuotaStatus(Controller):
    name = "resourcequota-controller"
    watches = (PODS, QUOTAS)

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
                used[namespace] = usage(self.store, namespace, at)
                counting = [pod for pod in self.store.list(PODS, namespace) if pod_counts(pod, at)]
                stops += [stop for stop in map(stops_counting, counting) if stop is not None]
            self.api.write_status(rt, quota, quota_status(quota, used[namespace]), self.name)
        if used:
            # A full recount every `RESYNC_SECONDS` puts right a status someone else overwrote.
            self.wake_in(RESYNC_SECONDS)
        if stops:
            self.wake_in(max(0.0, (min(stops) - at).total_seconds()) + 0.01)


def hard_of(quota: Object | None) -> object:
    return ((quota or {}).get("spec") or {}).get("hard")


def counting_moved(change: Change) -> bool:
    """Whether a pod's change may move what it counts: its phase, or its deletion (a pod's
    readiness flips and status writes do not)."""
    old, new = change.old or {}, change.obj
    return (old.get("status") or {}).get("phase") != (new.get("status") or {}).get("phase") or (
        old.get("metadata") or {}
    ).get("deletionTimestamp") != new["metadata"].get("deletionTimestamp")
