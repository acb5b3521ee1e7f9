"""Compact, comparable summaries of the product's pods, as the Instance workflow sees them.

The watcher and the `kube.list_instance_pods` activity reduce each pod (and the node it runs
on) to a `PodSummary` holding only what lifecycle decisions read: phase, readiness, the
`ome.io/serving` gate, scheduling, container waiting/terminated reasons, node health and
termination. `InstancePods` groups one Instance's pods; it is the payload of the
`pods_changed` signal. Both are frozen, so the watcher can compare a new summary with the
last one it sent and stay silent when nothing that matters changed.

Pure data: `planning/pod_summary.py` builds these from API objects.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

# Label keys the product puts on every pod (ARCHITECTURE.md "Kubernetes objects").
LABEL_ISVC = "ome.io/inferenceservice"
LABEL_COMPONENT = "ome.io/component"
LABEL_INSTANCE_INDEX = "ome.io/instance-index"
LABEL_REVISION = "ome.io/revision"
LABEL_ROLE = "ome.io/role"
LABEL_PAIRING_PROTOCOL = "ome.io/pairing-protocol"
LABEL_INCARNATION = "ome.io/incarnation"
# The readiness gate / pod condition that puts a ready pod into rotation.
SERVING_CONDITION = "ome.io/serving"
# Taint the node lifecycle controller puts on a node it cannot reach; its timeAdded dates
# the outage for force-delete evidence (spec reference §15 `node-unreachable-taint`).
UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"

ConditionStatus = Literal["True", "False", "Unknown"]
ROLE_ORDER = {"leader": 0, "default": 1, "worker": 2}


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ContainerSummary(_Frozen):
    """One container's state: enough to name a failure (reason, exit code, message)."""

    name: str
    init: bool = False
    ready: bool = False
    restart_count: int = 0
    state: Literal["waiting", "running", "terminated", "unknown"] = "unknown"
    started_at: datetime | None = None
    waiting_reason: str | None = None
    waiting_message: str | None = None
    terminated_reason: str | None = None
    terminated_exit_code: int | None = None
    terminated_message: str | None = None
    # The previous run's end, which is where a CrashLoopBackOff's exit code lives.
    last_terminated_reason: str | None = None
    last_terminated_exit_code: int | None = None


class PodSummary(_Frozen):
    """What lifecycle decisions need to know about one pod and its node."""

    name: str
    uid: str
    role: str = ""
    ordinal: int | None = None
    instance_index: int | None = None
    revision: str = ""
    incarnation: int | None = None
    phase: str = "Pending"
    pod_reason: str | None = None
    pod_message: str | None = None
    created_at: datetime | None = None
    pod_ip: str | None = None

    node_name: str | None = None
    # None while unscheduled; "Unknown" also when the node object is gone (see node_missing).
    node_ready: ConditionStatus | None = None
    node_ready_since: datetime | None = None
    node_missing: bool = False
    node_unreachable_since: datetime | None = None

    scheduled: bool = False
    unschedulable_reason: str | None = None
    unschedulable_message: str | None = None
    # Kueue (or any admission controller) holds the pod back with spec.schedulingGates.
    scheduling_gated: bool = False

    containers_ready: bool = False
    ready: bool = False
    ready_since: datetime | None = None
    has_serving_gate: bool = False
    # Status of the ome.io/serving condition; None when the condition was never set.
    serving: ConditionStatus | None = None
    serving_since: datetime | None = None

    terminating: bool = False
    deletion_timestamp: datetime | None = None
    deletion_grace_seconds: int | None = None
    finalizers: tuple[str, ...] = ()

    containers: tuple[ContainerSummary, ...] = ()
    restart_count: int = 0

    @property
    def is_ready(self) -> bool:
        """Spec §9: a pod is Ready when its containers are ready (-> readyReplicas)."""
        return self.containers_ready and not self.terminating

    @property
    def is_serving(self) -> bool:
        """Spec §9: Serving = ready and the `ome.io/serving` gate True (-> servingReplicas)."""
        return self.is_ready and self.serving == "True"

    @property
    def is_terminal(self) -> bool:
        """Succeeded or Failed pods never run again; create/restart recycles them."""
        return self.phase in ("Succeeded", "Failed")

    def waiting_reasons(self) -> list[tuple[str, str, str]]:
        """(container, reason, message) of every waiting container, init containers first."""
        return [
            (container.name, container.waiting_reason, container.waiting_message or "")
            for container in self.containers
            if container.waiting_reason
        ]


def sort_key(pod: PodSummary) -> tuple[int, int, str]:
    """Leader first, then default, then workers by ordinal: the order people read them in."""
    return (ROLE_ORDER.get(pod.role, 3), pod.ordinal if pod.ordinal is not None else -1, pod.name)


class InstancePods(_Frozen):
    """All pods of one Instance at one moment: the `pods_changed` signal's payload.

    `resource_version` and `cluster` say where the observation came from; `same_state`
    ignores the resource version, so two observations of unchanged pods compare equal.
    `endpoints_listed` names the pods the headless Service's slices list as serving and not
    terminating (spec §9 "Available"; `planning.pod_summary.listed_pods`); None when the
    observer does not read EndpointSlices.
    """

    namespace: str
    isvc: str
    component: str
    index: int
    pods: tuple[PodSummary, ...] = ()
    resource_version: str = ""
    cluster: str = ""
    endpoints_listed: tuple[str, ...] | None = None

    def same_state(self, other: InstancePods | None) -> bool:
        """True when `other` says the same about the pods, whatever its resource version."""
        if other is None:
            return False
        return self.model_copy(update={"resource_version": ""}) == other.model_copy(
            update={"resource_version": ""}
        )

    def pod(self, name: str) -> PodSummary | None:
        """The summary of the named pod, if it exists."""
        return next((pod for pod in self.pods if pod.name == name), None)

    @property
    def live_pods(self) -> tuple[PodSummary, ...]:
        """Pods not being deleted: the ones that can serve."""
        return tuple(pod for pod in self.pods if not pod.terminating)

    @property
    def ready_count(self) -> int:
        return sum(1 for pod in self.pods if pod.is_ready)

    @property
    def serving_count(self) -> int:
        return sum(1 for pod in self.pods if pod.is_serving)
