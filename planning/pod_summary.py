"""Reduce Pod and Node API objects to `PodSummary`s and group them by Instance.

Pure functions over the JSON dicts the API server returns, shared by the watcher (which
keeps the latest objects in memory) and the `kube.list_instance_pods` activity (which
lists them once), so both describe a pod identically and the watcher's "did it change?"
comparison is the same comparison the workflow would make.

Only facts that lifecycle decisions read make it into a summary; anything that changes
without meaning (managedFields, resourceVersion, heartbeat times) is left out, otherwise
every kubelet status write would wake the Instance workflow.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from models.kube_ops import ComponentPods
from models.pods import (
    LABEL_COMPONENT,
    LABEL_INCARNATION,
    LABEL_INSTANCE_INDEX,
    LABEL_ISVC,
    LABEL_REVISION,
    LABEL_ROLE,
    SERVING_CONDITION,
    UNREACHABLE_TAINT,
    ConditionStatus,
    ContainerSummary,
    InstancePods,
    PodSummary,
    sort_key,
)

# Kubelet messages can be long (image pull errors quote registries' answers); the summary
# travels in a signal and lands in workflow history, so it is cut.
MESSAGE_LIMIT = 300

InstanceKey = tuple[str, str, str, int]
"""(namespace, isvc, component, index): identifies one Instance and its workflow."""


def _cap(text: Any) -> str | None:
    if not text:
        return None
    message = str(text)
    return message if len(message) <= MESSAGE_LIMIT else message[: MESSAGE_LIMIT - 3] + "..."


def parse_time(value: Any) -> datetime | None:
    """An RFC 3339 timestamp from the API ("2026-01-01T00:00:00Z"), or None."""
    if not value or not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _int(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _condition(conditions: Any, condition_type: str) -> dict[str, Any] | None:
    for condition in conditions or ():
        if isinstance(condition, dict) and condition.get("type") == condition_type:
            return condition
    return None


def _status(condition: dict[str, Any] | None) -> ConditionStatus | None:
    if condition is None:
        return None
    value = condition.get("status")
    if value in ("True", "False"):
        return "True" if value == "True" else "False"
    return "Unknown"


def _ordinal_from_name(name: str) -> int | None:
    _, _, tail = name.rpartition("-")
    return int(tail) if tail.isdigit() else None


def summarize_container(status: dict[str, Any], init: bool = False) -> ContainerSummary:
    """One entry of `status.containerStatuses` (or `initContainerStatuses`)."""
    state = status.get("state") or {}
    last = (status.get("lastState") or {}).get("terminated") or {}
    waiting = state.get("waiting")
    running = state.get("running")
    terminated = state.get("terminated")
    kind = (
        "waiting"
        if waiting is not None
        else "running"
        if running is not None
        else ("terminated" if terminated is not None else "unknown")
    )
    return ContainerSummary(
        name=str(status.get("name", "")),
        init=init,
        ready=bool(status.get("ready")),
        restart_count=_int(status.get("restartCount")) or 0,
        state=kind,
        started_at=parse_time((running or {}).get("startedAt")),
        waiting_reason=_cap((waiting or {}).get("reason")),
        waiting_message=_cap((waiting or {}).get("message")),
        terminated_reason=_cap((terminated or {}).get("reason")),
        terminated_exit_code=_int((terminated or {}).get("exitCode")),
        terminated_message=_cap((terminated or {}).get("message")),
        last_terminated_reason=_cap(last.get("reason")),
        last_terminated_exit_code=_int(last.get("exitCode")),
    )


def _node_facts(node_name: str | None, node: dict[str, Any] | None) -> dict[str, Any]:
    if not node_name:
        return {}
    if node is None:
        # A bound pod whose node object is gone: spec §15 "node-gone" evidence.
        return {"node_ready": "Unknown", "node_missing": True}
    status = node.get("status") or {}
    ready = _condition(status.get("conditions"), "Ready")
    unreachable_since = None
    for taint in (node.get("spec") or {}).get("taints") or ():
        if isinstance(taint, dict) and taint.get("key") == UNREACHABLE_TAINT:
            unreachable_since = parse_time(taint.get("timeAdded")) or unreachable_since
    return {
        "node_ready": _status(ready) or "Unknown",
        "node_ready_since": parse_time(ready.get("lastTransitionTime")) if ready else None,
        "node_unreachable_since": unreachable_since,
    }


def contribution(kind: str, obj: dict[str, Any] | None) -> object:
    """What one watched object (`kind`: pods, nodes or endpointslices) gives its Instances'
    summaries; None when absent. Two versions of an object with equal contributions change no
    summary: the watcher's hand-over (`planning.leadership.already_delivered`) counts only
    changes that do, not a node's heartbeat or a pod's new annotation."""
    if obj is None:
        return None
    if kind == "pods":
        return summarize_pod(obj, None)
    if kind == "nodes":
        return _node_facts(str((obj.get("metadata") or {}).get("name") or ""), obj)
    return frozenset(listed_pods([obj]))


def summarize_pod(pod: dict[str, Any], node: dict[str, Any] | None) -> PodSummary:
    """The `PodSummary` of one Pod object; `node` is the Node it is bound to, if known."""
    metadata = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    labels = metadata.get("labels") or {}
    conditions = status.get("conditions") or []
    name = str(metadata.get("name", ""))
    node_name = spec.get("nodeName") or None

    scheduled_condition = _condition(conditions, "PodScheduled")
    scheduled = bool(node_name) or _status(scheduled_condition) == "True"
    unscheduled = scheduled_condition if _status(scheduled_condition) == "False" and not scheduled else None
    ready_condition = _condition(conditions, "Ready")
    serving_condition = _condition(conditions, SERVING_CONDITION)
    gates = {gate.get("conditionType") for gate in spec.get("readinessGates") or () if isinstance(gate, dict)}

    containers = tuple(
        [summarize_container(item, init=True) for item in status.get("initContainerStatuses") or ()]
        + [summarize_container(item) for item in status.get("containerStatuses") or ()]
    )
    deletion = parse_time(metadata.get("deletionTimestamp"))
    return PodSummary(
        name=name,
        uid=str(metadata.get("uid", "")),
        role=str(labels.get(LABEL_ROLE, "")),
        ordinal=_ordinal_from_name(name),
        instance_index=_int(labels.get(LABEL_INSTANCE_INDEX)),
        revision=str(labels.get(LABEL_REVISION, "")),
        incarnation=_int(labels.get(LABEL_INCARNATION)),
        phase=str(status.get("phase") or "Pending"),
        pod_reason=_cap(status.get("reason")),
        pod_message=_cap(status.get("message")),
        created_at=parse_time(metadata.get("creationTimestamp")),
        pod_ip=status.get("podIP") or None,
        node_name=node_name,
        **_node_facts(node_name, node),
        scheduled=scheduled,
        unschedulable_reason=_cap((unscheduled or {}).get("reason")),
        unschedulable_message=_cap((unscheduled or {}).get("message")),
        scheduling_gated=bool(spec.get("schedulingGates")),
        containers_ready=_status(_condition(conditions, "ContainersReady")) == "True",
        ready=_status(ready_condition) == "True",
        ready_since=parse_time((ready_condition or {}).get("lastTransitionTime")),
        has_serving_gate=SERVING_CONDITION in gates,
        serving=_status(serving_condition),
        serving_since=parse_time((serving_condition or {}).get("lastTransitionTime")),
        terminating=deletion is not None,
        deletion_timestamp=deletion,
        deletion_grace_seconds=_int(metadata.get("deletionGracePeriodSeconds")),
        finalizers=tuple(metadata.get("finalizers") or ()),
        containers=containers,
        restart_count=sum(container.restart_count for container in containers),
    )


def instance_key(pod: dict[str, Any]) -> InstanceKey | None:
    """The Instance a pod belongs to, from its labels; None when it is not one of ours."""
    metadata = pod.get("metadata") or {}
    labels = metadata.get("labels") or {}
    isvc = labels.get(LABEL_ISVC)
    component = labels.get(LABEL_COMPONENT)
    index = _int(labels.get(LABEL_INSTANCE_INDEX))
    namespace = metadata.get("namespace") or ""
    if not isvc or not component or index is None or index < 0:
        return None
    return (str(namespace), str(isvc), str(component), index)


def listed_pods(endpoint_slices: Iterable[dict[str, Any]]) -> set[tuple[str, str]]:
    """(namespace, pod name) of every pod that an EndpointSlice lists as serving and not
    terminating: the endpoint controller has seen the pod Ready.

    Not the `ready` condition: the Instance's headless Service publishes not-ready addresses
    (its workers resolve a leader that is not ready yet), so there every endpoint is `ready:
    true` from the pod's first IP to its end. `serving` follows the pod's readiness in every
    Service. A missing condition means true (discovery/v1); a slice written before `serving`
    existed says it through `ready` alone."""
    listed: set[tuple[str, str]] = set()
    for endpoint_slice in endpoint_slices:
        namespace = (endpoint_slice.get("metadata") or {}).get("namespace") or ""
        for endpoint in endpoint_slice.get("endpoints") or ():
            target = endpoint.get("targetRef") or {}
            conditions = endpoint.get("conditions") or {}
            serving = conditions.get("serving", conditions.get("ready"))
            if (target.get("kind") == "Pod" and target.get("name") and serving is not False
                    and conditions.get("terminating") is not True):
                listed.add((str(target.get("namespace") or namespace), str(target["name"])))
    return listed


def instance_pods(
    key: InstanceKey,
    pods: Iterable[dict[str, Any]],
    nodes: Mapping[str, dict[str, Any]],
    *,
    resource_version: str = "",
    cluster: str = "",
    endpoints: set[tuple[str, str]] | None = None,
) -> InstancePods:
    """The `InstancePods` of one Instance from its Pod objects (any order)."""
    namespace, isvc, component, index = key
    summaries = sorted(
        (summarize_pod(pod, nodes.get((pod.get("spec") or {}).get("nodeName") or "")) for pod in pods),
        key=sort_key,
    )
    listed = None
    if endpoints is not None:
        listed = tuple(summary.name for summary in summaries if (namespace, summary.name) in endpoints)
    return InstancePods(
        namespace=namespace,
        isvc=isvc,
        component=component,
        index=index,
        pods=tuple(summaries),
        resource_version=resource_version,
        cluster=cluster,
        endpoints_listed=listed,
    )


def group_by_instance(
    pods: Iterable[dict[str, Any]],
    nodes: Mapping[str, dict[str, Any]],
    *,
    resource_version: str = "",
    cluster: str = "",
    endpoints: set[tuple[str, str]] | None = None,
) -> dict[InstanceKey, InstancePods]:
    """Every Instance with at least one pod among `pods`, summarized; other pods ignored."""
    grouped: dict[InstanceKey, list[dict[str, Any]]] = {}
    for pod in pods:
        key = instance_key(pod)
        if key is not None:
            grouped.setdefault(key, []).append(pod)
    return {
        key: instance_pods(
            key, members, nodes, resource_version=resource_version, cluster=cluster, endpoints=endpoints
        )
        for key, members in grouped.items()
    }


def pods_digest(pods: Iterable[PodSummary]) -> str:
    """A short digest of what an Instance would act on in its pods: per pod its name, uid
    (same name, new pod), summed container restarts (a crash that is Ready again by now),
    pod Ready condition (False on a NotReady node although the containers are ready),
    serving gate and deletion. The Instance reports the digest of what it last saw; the
    InferenceReplica's re-list computes it from the listing, and a difference means a lost
    change. Any order; equal pods give equal digests."""
    rows = sorted(
        (pod.name, pod.uid, pod.restart_count, pod.ready, pod.serving or "", pod.terminating) for pod in pods
    )
    return hashlib.blake2b(repr(rows).encode(), digest_size=8).hexdigest()


def component_pods(pods: Iterable[dict[str, Any]], resource_version: str = "") -> ComponentPods:
    """A component's pods reduced to one `pods_digest` per Instance with pods: what the
    InferenceReplica's re-list compares with the Instances' reports, some 30 bytes an
    Instance (2000 Instances stay far under the 2 MB payload limit). Readiness and the
    serving gate come from the pod alone, so no node is read."""
    grouped: dict[int, list[PodSummary]] = {}
    for pod in pods:
        key = instance_key(pod)
        if key is not None:
            grouped.setdefault(key[3], []).append(summarize_pod(pod, None))
    digests = tuple((index, pods_digest(found)) for index, found in sorted(grouped.items()))
    return ComponentPods(resource_version=resource_version, digests=digests)
