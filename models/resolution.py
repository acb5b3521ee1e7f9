"""How a component's effective settings, deployment mode and revision are resolved.

Public API:
- `effective_component(isvc, runtime, component) -> ComponentSpec | None`: the runtime's
  `<component>Config` as defaults, the InferenceService's values over them field by field
  (nested blocks merge recursively; maps merge key by key; `env` merges by variable name;
  other lists are replaced whole). `None` when neither declares the component.
- `deployment_mode(isvc, runtime, component) -> "OMENative" | "RawDeployment" | "MultiNode"`,
  in the spec's order: the component's `ome.io/deploymentMode` annotation in the
  InferenceService, then in the runtime; `spec.deploymentMode`; a leader or worker makes an
  engine or decoder OMENative; otherwise a Deployment (`RawDeployment`).
- `declares_omenative_explicitly(isvc, component) -> bool`: what rollout groups and canaries
  need: `spec.deploymentMode: OMENative` or the component's own annotation in the
  InferenceService (a leader/worker or the runtime does not count).
- `component_revision(isvc, runtime, component) -> str`: 8 hex chars, a stable hash of what
  the component's pods run (runner, leader, worker, scheduler, model and runtime names,
  `topologyKey` when the component has workers, `pairingProtocol` on engine and decoder).
  Replica counts, `topologySpread`/`topologySpreadKey`, labels, annotations and lifecycle
  settings do not change it.
- `revision_name(isvc_name, component, revision_hash) -> str`: `<isvc>-<component>-rev-<hash>`.
- `inference_replica_spec(isvc, runtime, component, replicas=None) -> InferenceReplicaSpec`.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from models.inferencereplica import InferenceReplicaSpec
from models.inferenceservice import (
    DEPLOYMENT_MODE_ANNOTATION,
    ComponentName,
    ComponentSpec,
    DeploymentMode,
    InferenceService,
)
from models.runtime import ServingRuntimeSpec

REVISION_HASH_LENGTH = 8
_MODES: tuple[DeploymentMode, ...] = ("OMENative", "RawDeployment", "MultiNode")


def _merge(defaults: Any, overrides: Any, key: str = "") -> Any:
    if isinstance(defaults, dict) and isinstance(overrides, dict):
        merged = dict(defaults)
        for name, value in overrides.items():
            merged[name] = _merge(defaults[name], value, name) if name in defaults else value
        return merged
    if key == "env" and isinstance(defaults, list) and isinstance(overrides, list):
        # Environment variables merge by name, as a strategic merge patch of a pod would.
        by_name = {item["name"]: item for item in defaults}
        for item in overrides:
            by_name[item["name"]] = item
        return list(by_name.values())
    return overrides


def effective_component(
    isvc: InferenceService, runtime: ServingRuntimeSpec | None, component: ComponentName
) -> ComponentSpec | None:
    """The component as it runs: runtime defaults under the InferenceService's values."""
    own = isvc.spec.component(component)
    defaults = runtime.component_config(component) if runtime is not None else None
    if own is None and defaults is None:
        return None
    merged: dict[str, Any] = {}
    if defaults is not None:
        merged = defaults.model_dump(exclude_none=True)
    if own is not None:
        merged = _merge(merged, own.model_dump(exclude_none=True))
    if runtime is not None and runtime.scheduler_name and "scheduler_name" not in merged:
        merged["scheduler_name"] = runtime.scheduler_name
    return ComponentSpec.model_validate(merged)


def _annotation_mode(spec: ComponentSpec | None) -> DeploymentMode | None:
    if spec is None or not spec.annotations:
        return None
    value = spec.annotations.get(DEPLOYMENT_MODE_ANNOTATION)
    for mode in _MODES:
        if value == mode:
            return mode
    return None


def deployment_mode(
    isvc: InferenceService, runtime: ServingRuntimeSpec | None, component: ComponentName
) -> DeploymentMode:
    """How the component runs, in the order the spec gives."""
    own = _annotation_mode(isvc.spec.component(component))
    if own is not None:
        return own
    if runtime is not None:
        from_runtime = _annotation_mode(runtime.component_config(component))
        if from_runtime is not None:
            return from_runtime
    if isvc.spec.deployment_mode is not None:
        return isvc.spec.deployment_mode
    if component in ("engine", "decoder"):
        effective = effective_component(isvc, runtime, component)
        if effective is not None and effective.is_multi_pod:
            return "OMENative"
    return "RawDeployment"


MULTINODE_NOT_RUN = "MultiNodeNotSupported"
"""The reason a component pinned to `MultiNode` gives, at admission (a warning) and in its
`<Component>Ready` condition: OME runs it as a LeaderWorkerSet, which this product does not."""


def multinode_message(component: str) -> str:
    return (
        f'spec.{component}.annotations["ome.io/deploymentMode"] is MultiNode, which needs a '
        "LeaderWorkerSet this product does not run; remove the annotation to run the component "
        "on OMENative"
    )


def declares_omenative_explicitly(isvc: InferenceService, component: ComponentName) -> bool:
    """OMENative set by the InferenceService itself, as rollout groups require."""
    own = _annotation_mode(isvc.spec.component(component))
    if own is not None:
        return own == "OMENative"
    return isvc.spec.deployment_mode == "OMENative"


def explicit_mode_text(isvc: InferenceService, component: ComponentName) -> str:
    """The mode as the InferenceService states it, `""` when it states none (for messages)."""
    spec = isvc.spec.component(component)
    if spec is not None and spec.annotations and DEPLOYMENT_MODE_ANNOTATION in spec.annotations:
        return spec.annotations[DEPLOYMENT_MODE_ANNOTATION]
    return isvc.spec.deployment_mode or ""


def _pod_payload(
    isvc: InferenceService, effective: ComponentSpec, component: ComponentName
) -> dict[str, Any]:
    def dump(value: Any) -> Any:
        return None if value is None else value.model_dump(mode="json", exclude_none=True)

    rollout = isvc.spec.rollout
    pairing = rollout.pairing_protocol if rollout is not None else None
    return {
        "component": component,
        "model": isvc.spec.model.name if isvc.spec.model is not None else None,
        "runtime": isvc.spec.runtime.name if isvc.spec.runtime is not None else None,
        "runner": dump(effective.runner),
        "leader": dump(effective.leader),
        "worker": dump(effective.worker),
        "schedulerName": effective.scheduler_name,
        # topologyKey places workers beside their leader: it only shapes multi-pod Instances.
        "topologyKey": effective.topology_key if effective.worker is not None else None,
        # The pairing token labels engine and decoder pods; the router does not pair.
        "pairingProtocol": pairing if component in ("engine", "decoder") else None,
    }


def component_revision(
    isvc: InferenceService, runtime: ServingRuntimeSpec | None, component: ComponentName
) -> str:
    """A stable short hash of what the component's pods run."""
    effective = effective_component(isvc, runtime, component)
    if effective is None:
        raise ValueError(
            f"spec.{component} is declared by neither the InferenceService {isvc.name!r} "
            f"nor its runtime, so it has no revision; declare spec.{component} first"
        )
    payload = json.dumps(_pod_payload(isvc, effective, component), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()[:REVISION_HASH_LENGTH]


def revision_name(isvc_name: str, component: ComponentName, revision_hash: str) -> str:
    return f"{isvc_name}-{component}-rev-{revision_hash}"


def inference_replica_spec(
    isvc: InferenceService,
    runtime: ServingRuntimeSpec | None,
    component: ComponentName,
    replicas: int | None = None,
) -> InferenceReplicaSpec:
    """The InferenceReplica spec for an OMENative component (effective settings merged in).

    `replicas` defaults to the effective `minReplicas` (1 when unset), the count OME keeps
    until an autoscaler or a transient scale sets another.
    """
    effective = effective_component(isvc, runtime, component)
    if effective is None:
        raise ValueError(
            f"spec.{component} is declared by neither the InferenceService {isvc.name!r} "
            f"nor its runtime; declare spec.{component} to run it"
        )
    revision = revision_name(isvc.name, component, component_revision(isvc, runtime, component))
    rollout = isvc.spec.rollout
    desired = replicas if replicas is not None else (
        effective.min_replicas if effective.min_replicas is not None else 1
    )
    return InferenceReplicaSpec(
        inference_service=isvc.name,
        component=component,
        replicas=desired,
        min_replicas=effective.min_replicas,
        max_replicas=effective.max_replicas,
        revision=revision,
        model_name=isvc.spec.model.name if isvc.spec.model is not None else None,
        runtime_name=isvc.spec.runtime.name if isvc.spec.runtime is not None else None,
        pairing_protocol=(
            rollout.pairing_protocol if rollout is not None and component != "router" else None
        ),
        labels=effective.labels,
        annotations=effective.annotations,
        runner=effective.runner,
        leader=effective.leader,
        worker=effective.worker,
        scheduler_name=effective.scheduler_name,
        topology_key=effective.topology_key,
        topology_spread=effective.topology_spread,
        topology_spread_key=effective.topology_spread_key,
        lifecycle=effective.lifecycle,
    )
