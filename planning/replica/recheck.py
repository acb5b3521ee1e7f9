"""The InferenceReplica's safety net for lost pod changes: one re-list per component.

The watcher tells each Instance of its pods' changes. When one of those signals is lost (the
watcher was down, a signal failed), a resting Ready Instance would not notice a pod that
died. Instead of every Instance re-listing its own pods every five minutes (24 Temporal
actions and some 36 Kubernetes requests an hour per Instance), the InferenceReplica lists the
component's pods in one label-selector request every `pod_relist_seconds` (default
`RECHECK_INTERVAL`), compares them with
what each resting Instance last reported (`stale_views`), and sends a fresh summary only to
the Instances whose report disagrees; each of those drops it if it already knows better
(`newer_observation`). Idle, the net costs one timer and one activity per component per
interval, and one Kubernetes request.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from models.instance import InstanceStatus
from models.kube_ops import ComponentPods
from planning.instance.resting import rests_on_parent_net
from planning.pod_summary import pods_digest

RECHECK_INTERVAL = timedelta(minutes=20)
"""The default of the cluster's `pod_relist_seconds`: how long a lost pod change of a resting Instance can go unnoticed. Three re-lists an hour
per component keep a 20-Instance component's idle cost under one Temporal action per
Instance per hour (issue 17: timer and activity of the net, the InferenceService's hourly
timer), and 2000 idle Instances at a few requests per hour in all."""


NO_PODS_DIGEST = pods_digest(())
"""The digest of an Instance the listing found no pod of."""

MAX_RELISTS_PER_PASS = 100
"""At most this many Instances are re-listed in full after one component re-list; the rest
wait for the next pass (a few hundred pod lists at once would stall the component's lock)."""


def disagrees(reported: InstanceStatus, fresh: str | None) -> bool:
    """Whether the pods as listed (`fresh`: their `pods_digest`, None: the Instance has none)
    say something else than what the Instance last reported seeing: a pod gone, replaced (new
    uid), restarted, not Ready (a NotReady node), its serving gate or deletion changed. A
    report with no digest is not under the net (it re-lists on its own)."""
    if reported.pods_digest is None:
        return False
    return reported.pods_digest != (fresh if fresh is not None else NO_PODS_DIGEST)


def stale_views(reported: Mapping[int, InstanceStatus], listed: ComponentPods) -> list[int]:
    """The indexes of the resting Instances whose last report the listing contradicts, in
    order. Instances in an operation are left out: they re-list on their own safety timer, and
    their reports trail their pods by design."""
    fresh = dict(listed.digests)
    return [
        index
        for index, status in sorted(reported.items())
        if rests_on_parent_net(status.phase, status.operation, status.draining)
        and not status.deleted
        and disagrees(status, fresh.get(index))
    ]


def relist_batch(stale: list[int], after: int, limit: int = MAX_RELISTS_PER_PASS) -> list[int]:
    """At most `limit` of the sorted `stale` indexes, the ones after `after` first, wrapping
    around: Instances left out come first in the next pass."""
    ordered = [index for index in stale if index > after] + [index for index in stale if index <= after]
    return sorted(ordered[:limit])
