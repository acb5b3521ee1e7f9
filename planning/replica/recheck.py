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
from models.kube_ops import ComponentPods, InstancePodStates
from planning.instance.resting import rests_on_parent_net

RECHECK_INTERVAL = timedelta(minutes=20)
"""The default of the cluster's `pod_relist_seconds`: how long a lost pod change of a resting Instance can go unnoticed. Three re-lists an hour
per component keep a 20-Instance component's idle cost under one Temporal action per
Instance per hour (issue 17: timer and activity of the net, the InferenceService's hourly
timer), and 2000 idle Instances at a few requests per hour in all."""


def disagrees(reported: InstanceStatus, fresh: InstancePodStates | None) -> bool:
    """Whether the pods as listed (`fresh`, None: the Instance has none) say something else
    than the Instance's last report counts: a pod of its gone or being deleted, a stray one,
    or another number ready or serving."""
    members = set(reported.pod_names)
    live = set(fresh.live) if fresh is not None else set()
    ready = members & set(fresh.ready) if fresh is not None else set()
    serving = members & set(fresh.serving) if fresh is not None else set()
    return (
        not members <= live
        or len(live) != reported.total_pods
        or len(ready) != reported.ready_pods
        or len(serving) != reported.serving_pods
    )


def stale_views(reported: Mapping[int, InstanceStatus], listed: ComponentPods) -> list[int]:
    """The indexes of the resting Instances whose last report the listing contradicts, in
    order. Instances in an operation are left out: they re-list on their own safety timer, and
    their reports trail their pods by design."""
    fresh = {states.index: states for states in listed.instances}
    return [
        index
        for index, status in sorted(reported.items())
        if rests_on_parent_net(status.phase, status.operation, status.draining)
        and not status.deleted
        and disagrees(status, fresh.get(index))
    ]
