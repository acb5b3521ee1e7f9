"""Build each Instance's `InstanceSpec` from the component as it runs.

The InferenceReplica resolves everything an Instance needs once, from the effective
component (`models.resolution.effective_component`: runtime defaults under the
InferenceService's values) and the cluster-wide lifecycle settings:

- pod specs: the component's `runner` is the container of a single-pod Instance; a
  multi-pod Instance's leader and workers run `leader.runner` / `worker.runner` over it
  (field by field, `env` by variable name), `worker.size` workers (1 when unset);
  `schedulerName` on every pod; the topology spread constraint on the leader (or only) pod;
- lifecycle: restart policy, update strategy, `instanceReadyTimeout` (component, else the
  cluster's; `0s` and negatives count as unset), `minReadySeconds`, and the cluster's
  grace periods, `updateRetry`, `forceDelete` and teardown deadline.

`ClusterLifecycle` carries the cluster-wide values (the chart's `ome.controller.lifecycle`)
into the workflows, which read no environment.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from models.duration import parse_duration
from models.inferenceservice import ComponentSpec, RunnerSpec
from models.instance import (
    ForceDeletePolicy,
    InstancePauseMode,
    InstanceSpec,
    RestartPolicy,
    UpdateRetryPolicy,
    UpdateStrategyType,
)
from planning.replica.batching import BATCH_SIZE_KEYS, DEFAULT_POD_BATCH_SIZE, check_pod_batch_size
from planning.replica.budget import CHART_DEFAULT_POLICY, UpdatePolicy
from planning.replica.recheck import RECHECK_INTERVAL
from planning.replica.spread import SpreadSettings, spread_constraint, with_spread

DEFAULT_CONTAINER_NAME = "ome-container"
DEFAULT_WORKER_SIZE = 1


class ClusterLifecycle(BaseModel):
    """Cluster-wide lifecycle settings, defaulting to what the ome-resources chart writes."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    instance_ready_timeout_seconds: float | None = 1800.0
    """Chart `30m`; a component's `lifecycle.instanceReadyTimeout` wins. None: no deadline."""
    stuck_pod_grace_seconds: float | None = 60.0
    """Chart `60s`: a container stuck this long fails the Instance before the deadline does."""
    unschedulable_grace_seconds: float | None = 900.0
    """Chart `15m`: an Instance that cannot schedule this long fails."""
    update_retry: UpdateRetryPolicy | None = Field(default_factory=UpdateRetryPolicy)
    """Chart: three attempts, 1m then 2m apart. None (a manifest install): the first failure holds."""
    force_delete: ForceDeletePolicy | None = None
    """Off in the chart: pods stuck Terminating on a dead node wait for the node."""
    teardown_deadline_seconds: float | None = 1800.0
    """Chart `30m`: how long deletion waits for pods before leaving them to garbage collection."""
    drain_seconds: float = 5.0
    """Time out of rotation before pods are deleted, so in-flight requests finish."""
    strategy: UpdateStrategyType = CHART_DEFAULT_POLICY.strategy
    max_surge: int | str | None = CHART_DEFAULT_POLICY.max_surge
    """Chart `ome.controller.updateStrategy`: 25% for both budgets."""
    max_unavailable: int | str | None = CHART_DEFAULT_POLICY.max_unavailable
    revision_history_limit: int | None = 10
    """Chart keeps 10 revisions that nothing runs; the ISVC annotation overrides."""
    scale_up_pod_batch_size: int | None = DEFAULT_POD_BATCH_SIZE
    """Chart `scaleUpPodBatchSize` 100 (§14): missing pods started per pass per component, so a
    large scale-up does not flood the API server and scheduler at once. None: unbounded."""
    scale_down_pod_batch_size: int | None = DEFAULT_POD_BATCH_SIZE
    """Chart `scaleDownPodBatchSize` 100 (§14): pod-equivalent cost of drains and deletes in
    flight per component, scale-down and InferenceReplica deletion alike. None: unbounded."""
    scale_down_requeue_interval_seconds: float | None = 5.0
    """Chart `scaleDownRequeueInterval` `5s` (§14): a fallback look while deletion work remains
    (a deferred batch, a teardown waiting for its pods). None: no periodic check."""

    @field_validator("scale_up_pod_batch_size", "scale_down_pod_batch_size")
    @classmethod
    def _positive_batch(cls, value: int | None, info: ValidationInfo) -> int | None:
        # OME refuses to start on these (§14); here the InferenceService refuses the settings.
        check_pod_batch_size(BATCH_SIZE_KEYS[info.field_name or ""], value)
        return value

    auto_migrate_max_attempts: int | None = 3
    """Chart `autoMigrate.maxAttempts` 3: how many times one Instance is relocated off a node
    after a stuck or timed-out create or single-pod update (§13). None: no relocation."""

    @field_validator("auto_migrate_max_attempts")
    @classmethod
    def _positive_attempts(cls, value: int | None) -> int | None:
        if value is not None and value < 1:
            raise ValueError(
                f"auto_migrate_max_attempts (autoMigrate.maxAttempts) must be at least 1, got {value}; "
                "leave it unset (null) to turn automatic relocation off"
            )
        return value

    pod_relist_seconds: float = Field(default=RECHECK_INTERVAL.total_seconds(), gt=0)
    """How often each InferenceReplica re-lists its component's pods for a lost pod change of a
    resting Ready Instance (`planning.replica.recheck`; issue 17). Not a chart setting."""

    @property
    def update_policy(self) -> UpdatePolicy:
        return UpdatePolicy(
            strategy=self.strategy, max_surge=self.max_surge, max_unavailable=self.max_unavailable
        )


@dataclass(frozen=True)
class PodTemplate:
    leader_pod_spec: dict[str, Any]
    worker_pod_spec: dict[str, Any] | None
    worker_count: int


def _merged_runner(base: RunnerSpec | None, override: RunnerSpec | None) -> dict[str, Any]:
    merged: dict[str, Any] = base.model_dump(exclude_none=True) if base is not None else {}
    if override is None:
        return merged
    own = override.model_dump(exclude_none=True)
    for key, value in own.items():
        if key == "env" and "env" in merged:
            by_name = {item["name"]: item for item in merged["env"]}
            for item in value:
                by_name[item["name"]] = item
            merged["env"] = list(by_name.values())
        else:
            merged[key] = value
    return merged


def _container(runner: dict[str, Any]) -> dict[str, Any]:
    """A Kubernetes container from a runner's fields, in wire form."""
    parsed = RunnerSpec.model_validate(runner)
    container = parsed.model_dump(by_alias=True, exclude_none=True, mode="json")
    container.setdefault("name", DEFAULT_CONTAINER_NAME)
    return container


def _pod_spec(runner: dict[str, Any], scheduler_name: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [_container(runner)]}
    if scheduler_name:
        spec["schedulerName"] = scheduler_name
    return spec


SPREAD_COMPONENTS = ("engine", "decoder")
"""Spec 003 sets the spread on the engine or the decoder; the router's Instances don't spread."""


def pod_template(effective: ComponentSpec, isvc: str, component: str) -> PodTemplate:
    """The leader (or only) pod spec, the worker pod spec and the worker count."""
    constraint = (
        spread_constraint(SpreadSettings.of(effective), isvc, component)
        if component in SPREAD_COMPONENTS
        else None
    )
    if not effective.is_multi_pod:
        single = _pod_spec(_merged_runner(None, effective.runner), effective.scheduler_name)
        return PodTemplate(with_spread(single, constraint), None, 0)
    leader_runner = effective.leader.runner if effective.leader is not None else None
    worker_runner = effective.worker.runner if effective.worker is not None else None
    size = effective.worker.size if effective.worker is not None and effective.worker.size else None
    leader = _pod_spec(_merged_runner(effective.runner, leader_runner), effective.scheduler_name)
    worker = _pod_spec(_merged_runner(effective.runner, worker_runner), effective.scheduler_name)
    return PodTemplate(with_spread(leader, constraint), worker, size or DEFAULT_WORKER_SIZE)


def instance_ready_timeout_seconds(effective: ComponentSpec, cluster: ClusterLifecycle) -> float | None:
    """The component's timeout when it sets a positive one, else the cluster's (§10)."""
    lifecycle = effective.lifecycle
    if lifecycle is not None and lifecycle.instance_ready_timeout is not None:
        seconds = parse_duration(lifecycle.instance_ready_timeout)
        if seconds > 0:
            return seconds
    timeout = cluster.instance_ready_timeout_seconds
    return timeout if timeout is not None and timeout > 0 else None


@dataclass(frozen=True)
class InstanceIdentity:
    """Who an Instance is and which revision it runs; the rest comes from the component."""

    namespace: str
    isvc: str
    component: str
    index: int
    revision: str
    """The template hash (`ome.io/revision` label)."""
    revision_name: str
    isvc_uid: str | None = None
    pairing_protocol: str | None = None
    gang_surge_of: int | None = None
    parent_workflow_id: str | None = None
    pause_mode: InstancePauseMode | None = None
    """The component's pause when the Instance starts (`spec.pauseMode`); later ones are signals."""


def instance_spec(
    identity: InstanceIdentity,
    effective: ComponentSpec,
    cluster: ClusterLifecycle,
    update_policy: UpdatePolicy,
) -> InstanceSpec:
    """The `InstanceSpec` a child `Instance` workflow starts (or updates) with."""
    template = pod_template(effective, identity.isvc, identity.component)
    lifecycle = effective.lifecycle
    restart = (
        RestartPolicy(lifecycle.restart_policy)
        if lifecycle is not None and lifecycle.restart_policy is not None
        else None
    )
    labels = {
        key: value
        for key, value in (effective.labels or {}).items()
        # Our own labels identify the pod; a user value must not redirect selectors.
        if not key.startswith("ome.io/")
    }
    # Component annotations reach the pods; ours (`ome.io/deploymentMode`, ...) steer OME, not pods.
    annotations = {
        key: value for key, value in (effective.annotations or {}).items() if not key.startswith("ome.io/")
    }
    return InstanceSpec(
        namespace=identity.namespace,
        isvc=identity.isvc,
        isvc_uid=identity.isvc_uid,
        component=identity.component,
        index=identity.index,
        revision=identity.revision,
        revision_name=identity.revision_name,
        leader_pod_spec=template.leader_pod_spec,
        worker_pod_spec=template.worker_pod_spec,
        worker_count=template.worker_count,
        labels=labels,
        annotations=annotations,
        pairing_protocol=identity.pairing_protocol,
        topology_key=effective.topology_key if template.worker_count > 0 else None,
        # The Instance creates a PodGroup when the CRD exists and reports when it doesn't.
        gang_scheduling=True,
        gang_surge_of=identity.gang_surge_of,
        parent_workflow_id=identity.parent_workflow_id,
        pause_mode=identity.pause_mode,
        restart_policy=restart,
        update_strategy_type=update_policy.strategy,
        instance_ready_timeout_seconds=instance_ready_timeout_seconds(effective, cluster),
        min_ready_seconds=update_policy.min_ready_seconds,
        drain_seconds=cluster.drain_seconds,
        stuck_pod_grace_seconds=cluster.stuck_pod_grace_seconds,
        unschedulable_grace_seconds=cluster.unschedulable_grace_seconds,
        update_retry=cluster.update_retry,
        force_delete=cluster.force_delete,
        teardown_deadline_seconds=cluster.teardown_deadline_seconds,
    )
