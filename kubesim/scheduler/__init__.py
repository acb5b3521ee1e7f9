"""kubesim's scheduler: where one pending pod goes, decided the way kube-scheduler decides.

Pure functions over the JSON objects the store holds; the loop that feeds them pending
pods and binds the result is `kubesim.controllers.scheduling`. Modules:

    core.py      `schedule_pod`, `explain`: the filter and score plugins in kube-scheduler's order
    match.py     selectors, node selector terms, taints and tolerations, resource quantities
    spread.py    the PodTopologySpread plugin
    affinity.py  the InterPodAffinity plugin
    node_pods.py the pods counting on each node and their summed requests, kept per pod change
"""

from kubesim.scheduler.core import (
    Rejection,
    ScheduleResult,
    explain,
    failed_scheduling_message,
    live_pods_by_node,
    schedule_pod,
)
from kubesim.scheduler.match import QuantityError

__all__ = [
    "QuantityError",
    "Rejection",
    "ScheduleResult",
    "explain",
    "failed_scheduling_message",
    "live_pods_by_node",
    "schedule_pod",
]
