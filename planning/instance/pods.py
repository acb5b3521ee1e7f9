"""Render an Instance's Kubernetes objects: its pods, its PodGroup, its headless Service.

Pure functions of the `InstanceSpec`, the incarnation and the active ordinal. Names follow
ARCHITECTURE.md: pods are `{isvc}-{component}-{index}-{leader|worker|default}-{n}`, the
headless Service is `{isvc}-{component}-{index}` and gives the leader a stable DNS name
(`hostname`.`subdomain`) that the workers read from `OME_LEADER_ADDRESS` before anything is
ready, which is why that Service publishes not-ready addresses. Also: whose object holds the
PodGroup name (ours, another owner's, or one still terminating).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any

from models.instance import SERVING_GATE, InstanceSpec
from models.pods import (
    LABEL_COMPONENT,
    LABEL_INCARNATION,
    LABEL_INSTANCE_INDEX,
    LABEL_ISVC,
    LABEL_PAIRING_PROTOCOL,
    LABEL_REVISION,
    LABEL_ROLE,
    PodSummary,
)
from planning.objects import object_metadata

ROLE_DEFAULT = "default"
ROLE_LEADER = "leader"
ROLE_WORKER = "worker"

POD_GROUP_API_VERSION = "scheduling.x-k8s.io/v1alpha1"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"

# Environment every container of an Instance's pods receives. OME replaces LWS_* with these.
ENV_ROLE = "OME_ROLE"
ENV_INSTANCE_INDEX = "OME_INSTANCE_INDEX"
ENV_INSTANCE_NAME = "OME_INSTANCE_NAME"
ENV_LEADER_ADDRESS = "OME_LEADER_ADDRESS"
ENV_WORKER_COUNT = "OME_WORKER_COUNT"
ENV_WORKER_INDEX = "OME_WORKER_INDEX"
ENV_GROUP_SIZE = "OME_GROUP_SIZE"
ENV_INCARNATION = "OME_INCARNATION"
ENV_REVISION = "OME_REVISION"


def pod_name(spec: InstanceSpec, role: str, ordinal: int) -> str:
    return f"{spec.instance_name}-{role}-{ordinal}"


def leader_pod_name(spec: InstanceSpec, active_ordinal: int = 0) -> str:
    """The leader's name, or the only pod's: single-pod surges alternate ordinals 0 and 1."""
    if spec.multi_pod:
        return pod_name(spec, ROLE_LEADER, 0)
    return pod_name(spec, ROLE_DEFAULT, active_ordinal)


def pod_names(spec: InstanceSpec, active_ordinal: int = 0) -> list[str]:
    """Every pod name of the Instance at `active_ordinal`, leader first."""
    names = [leader_pod_name(spec, active_ordinal)]
    names += [pod_name(spec, ROLE_WORKER, n) for n in range(spec.worker_count)]
    return names


def leader_address(spec: InstanceSpec, active_ordinal: int = 0) -> str:
    """Stable DNS name of the leader through the Instance's headless Service."""
    return f"{leader_pod_name(spec, active_ordinal)}.{spec.instance_name}.{spec.namespace}.svc"


def instance_selector(spec: InstanceSpec) -> dict[str, str]:
    """Labels that select every pod of this Instance, whatever its revision or incarnation."""
    return {
        LABEL_ISVC: spec.isvc,
        LABEL_COMPONENT: spec.component,
        LABEL_INSTANCE_INDEX: str(spec.index),
    }


def _labels(spec: InstanceSpec, role: str, incarnation: int) -> dict[str, str]:
    labels = dict(spec.labels)
    labels.update(instance_selector(spec))
    labels[LABEL_REVISION] = spec.revision
    labels[LABEL_ROLE] = role
    labels[LABEL_INCARNATION] = str(incarnation)
    if spec.pairing_protocol:
        labels[LABEL_PAIRING_PROTOCOL] = spec.pairing_protocol
    if spec.multi_pod and spec.gang_scheduling:
        labels[POD_GROUP_LABEL] = spec.instance_name
    return labels


def _instance_object_metadata(spec: InstanceSpec) -> dict[str, Any]:
    """Metadata of an object that belongs to the whole Instance (its PodGroup, its Service)."""
    return object_metadata(spec.instance_name, spec.namespace, instance_selector(spec), spec.isvc, spec.isvc_uid)


def _with_env(container: dict[str, Any], env: list[dict[str, str]]) -> None:
    """Put our variables first-class in the container, replacing same-named ones the user set."""
    ours = {item["name"] for item in env}
    kept = [item for item in container.get("env", []) if item.get("name") not in ours]
    container["env"] = kept + env


def _worker_affinity(spec: InstanceSpec, incarnation: int) -> dict[str, Any]:
    """Required pod affinity that keeps workers in their leader's `topology_key` domain."""
    selector = instance_selector(spec)
    selector[LABEL_ROLE] = ROLE_LEADER
    selector[LABEL_INCARNATION] = str(incarnation)
    return {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": selector}, "topologyKey": spec.topology_key}
        ]
    }


def _render_one(
    spec: InstanceSpec,
    pod_spec: dict[str, Any],
    role: str,
    ordinal: int,
    incarnation: int,
    active_ordinal: int,
    worker_index: int | None,
) -> dict[str, Any]:
    name = pod_name(spec, role, ordinal)
    body = copy.deepcopy(pod_spec)
    env = [
        {"name": ENV_ROLE, "value": role},
        {"name": ENV_INSTANCE_INDEX, "value": str(spec.index)},
        {"name": ENV_INSTANCE_NAME, "value": spec.instance_name},
        {"name": ENV_LEADER_ADDRESS, "value": leader_address(spec, active_ordinal)},
        {"name": ENV_WORKER_COUNT, "value": str(spec.worker_count)},
        {"name": ENV_GROUP_SIZE, "value": str(spec.pod_count)},
        {"name": ENV_INCARNATION, "value": str(incarnation)},
        {"name": ENV_REVISION, "value": spec.revision},
    ]
    if worker_index is not None:
        env.append({"name": ENV_WORKER_INDEX, "value": str(worker_index)})
    for key in ("initContainers", "containers"):
        for container in body.get(key, []):
            _with_env(container, env)
    gates = [g for g in body.get("readinessGates", []) if g.get("conditionType") != SERVING_GATE]
    body["readinessGates"] = gates + [{"conditionType": SERVING_GATE}]
    body["hostname"] = name
    body["subdomain"] = spec.instance_name
    if role == ROLE_WORKER and spec.topology_key:
        affinity = body.setdefault("affinity", {})
        affinity["podAffinity"] = _worker_affinity(spec, incarnation)
    labels = _labels(spec, role, incarnation)
    metadata = object_metadata(name, spec.namespace, labels, spec.isvc, spec.isvc_uid, spec.annotations)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": body}


def render_pods(spec: InstanceSpec, incarnation: int, ordinal: int = 0) -> list[dict[str, Any]]:
    """Full Pod manifests of the Instance, leader (or only pod) first.

    `ordinal` is the single-pod active ordinal (0 or 1); a multi-pod Instance always has
    `leader-0` and `worker-0..n-1` and ignores it.
    """
    if not spec.multi_pod:
        return [_render_one(spec, spec.leader_pod_spec, ROLE_DEFAULT, ordinal, incarnation, ordinal, None)]
    assert spec.worker_pod_spec is not None  # guaranteed by InstanceSpec's validator
    pods = [_render_one(spec, spec.leader_pod_spec, ROLE_LEADER, 0, incarnation, 0, None)]
    for n in range(spec.worker_count):
        pods.append(_render_one(spec, spec.worker_pod_spec, ROLE_WORKER, n, incarnation, 0, n))
    return pods


def render_pod_group(spec: InstanceSpec) -> dict[str, Any] | None:
    """The scheduler-plugins PodGroup of a multi-pod Instance: all its pods or none.

    `scheduleTimeoutSeconds` follows `instanceReadyTimeout`, as the spec says the same
    timeout sets the gang schedule timeout.
    """
    if not spec.multi_pod or not spec.gang_scheduling:
        return None
    group_spec: dict[str, Any] = {"minMember": spec.pod_count}
    if spec.instance_ready_timeout_seconds:
        group_spec["scheduleTimeoutSeconds"] = int(spec.instance_ready_timeout_seconds)
    metadata = _instance_object_metadata(spec)
    return {"apiVersion": POD_GROUP_API_VERSION, "kind": "PodGroup", "metadata": metadata, "spec": group_spec}


class PodGroupStanding(StrEnum):
    """What holds the Instance's PodGroup name before pods that name the group are created."""

    ABSENT = "Absent"
    OURS = "Ours"
    TERMINATING = "Terminating"
    """Being deleted (a finalizer may hold it): wait until it is gone, then make a fresh one."""
    TAKEN = "Taken"
    """Another owner's PodGroup: adopting it would put our gang under someone else's rules."""


def pod_group_standing(spec: InstanceSpec, existing: Mapping[str, Any] | None) -> PodGroupStanding:
    """Classify the object found under the Instance's PodGroup name (spec reference §9).

    Terminating comes first, whoever owns it: the name frees when it goes. Ours means it
    carries the Instance's labels and either no owner (one made before the uid was known,
    which the apply then gives our owner reference) or, when the InferenceService uid is
    known, an owner reference to that uid; without a uid, every owner must be the
    InferenceService of our name.
    """
    if existing is None:
        return PodGroupStanding.ABSENT
    metadata = existing.get("metadata") or {}
    if metadata.get("deletionTimestamp"):
        return PodGroupStanding.TERMINATING
    labels = metadata.get("labels") or {}
    if any(labels.get(key) != value for key, value in instance_selector(spec).items()):
        return PodGroupStanding.TAKEN
    owners = metadata.get("ownerReferences") or []
    if not owners:
        return PodGroupStanding.OURS
    if spec.isvc_uid:
        ours = any(owner.get("uid") == spec.isvc_uid for owner in owners)
    else:
        ours = all(
            owner.get("kind") == "InferenceService" and owner.get("name") == spec.isvc for owner in owners
        )
    return PodGroupStanding.OURS if ours else PodGroupStanding.TAKEN


def describe_owner(existing: Mapping[str, Any]) -> str:
    """The owner of a found object as a person would name it: `InferenceService other (uid u-2)`."""
    metadata = existing.get("metadata") or {}
    owners = metadata.get("ownerReferences") or []
    if owners:
        return ", ".join(
            f"{owner.get('kind', '?')} {owner.get('name', '?')} (uid {owner.get('uid', '?')})"
            for owner in owners
        )
    labels = metadata.get("labels") or {}
    shown = ", ".join(f"{key}={value}" for key, value in sorted(labels.items())) or "none"
    return f"no owner reference (labels: {shown})"


def render_headless_service(spec: InstanceSpec) -> dict[str, Any]:
    """The Instance's headless Service: DNS for the leader, and the 'listed' level of Available."""
    metadata = _instance_object_metadata(spec)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata,
        "spec": {
            "clusterIP": "None",
            "selector": instance_selector(spec),
            # Workers resolve the leader before it is ready; a not-ready leader must resolve.
            "publishNotReadyAddresses": True,
        },
    }


def _without_images(pod_spec: dict[str, Any] | None) -> dict[str, Any] | None:
    if pod_spec is None:
        return None
    body = copy.deepcopy(pod_spec)
    for key in ("containers", "initContainers"):
        for container in body.get(key, []):
            container.pop("image", None)
    return body


def in_place_possible(old: InstanceSpec, new: InstanceSpec) -> bool:
    """True when the two revisions differ only in container images (spec reference §7).

    Kubernetes lets only `image` change on a running container, and init containers have
    already run, so any other difference (including an init image) needs new pods.
    """
    if old.worker_count != new.worker_count or old.labels != new.labels:
        return False
    if old.annotations != new.annotations or old.pairing_protocol != new.pairing_protocol:
        return False
    if old.topology_key != new.topology_key:
        return False
    for before, after in (
        (old.leader_pod_spec, new.leader_pod_spec),
        (old.worker_pod_spec, new.worker_pod_spec),
    ):
        if before is None or after is None:
            if before is not after:
                return False
            continue
        if before.get("initContainers") != after.get("initContainers"):
            return False
        if _without_images(before) != _without_images(after):
            return False
    return True


def in_place_image_patches(
    new: InstanceSpec, incarnation: int, active_ordinal: int = 0
) -> dict[str, dict[str, Any]]:
    """Per pod name, the strategic-merge patch that moves it to `new`'s images and revision.

    The environment is fixed when a container starts, so `OME_REVISION` keeps the old value
    after an in-place update; the `ome.io/revision` label is what tells the revisions apart.
    """
    patches: dict[str, dict[str, Any]] = {}
    for pod in render_pods(new, incarnation, active_ordinal):
        containers = [
            {"name": c["name"], "image": c.get("image", "")} for c in pod["spec"].get("containers", [])
        ]
        patches[pod["metadata"]["name"]] = {
            "metadata": {"labels": {LABEL_REVISION: new.revision}},
            "spec": {"containers": containers},
        }
    return patches


def still_present(observed: Sequence[PodSummary], targets: Mapping[str, str]) -> list[str]:
    """The `targets` (name -> uid, "" for any pod of that name) an observation still lists,
    terminating or not, sorted. A pod missing from a watcher observation taken after its
    delete is gone: the watch reports a pod's removal only once it is removed."""
    listed = {(pod.name, pod.uid) for pod in observed} | {(pod.name, "") for pod in observed}
    return sorted(name for name, uid in targets.items() if (name, uid) in listed)
