"""The InferenceService resource (`ome.io/v1beta1`), as users write it in manifests.

Field names are the spec's camelCase on the wire and snake_case in Python; every model is
closed (`extra="forbid"`), so an unknown or removed field is refused with its path.
Defaults that the spec states are exposed as properties or constants here rather than
filled into the fields, so a manifest round-trips unchanged
(`isvc.to_manifest() == manifest`) and admission can tell "unset" from "set to the default".

Public API:
- `InferenceService`, `InferenceServiceSpec`, `ObjectMeta`
- components: `ComponentSpec`, `RunnerSpec`, `LeaderSpec`, `WorkerSpec`, `EnvVar`,
  `ResourceRequirements`, `LifecycleSpec`, `UpdateStrategy`, `UpdateBudget`, `MigrationPolicy`
- placement and routing: `PlacementSpec`, `ClusterAffinityTerm`, `SelectorRequirement`,
  `PlacementSplit`, `RoutingSpec`, `RoutingProbe`, `RoutingCapacity`
- rollout: `RolloutSpec`, `RolloutGroup`, `GroupCanary`, `CanaryStep`, `CanaryPause`,
  `CanaryAnalysis`, `AnalysisMetric`, `PrometheusSource`, `BlueGreen`, `GroupRollingUpdate`,
  `MaintainRatio`, `PolicyRef` (their defaults: `DEFAULT_*` constants below)
- `COMPONENTS`, `ComponentName`, `DEPLOYMENT_MODE_ANNOTATION`
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, StrictInt, StrictStr

from models.base import SpecModel
from models.duration import Duration
from models.quantity import QuantityText

ComponentName = Literal["engine", "decoder", "router"]
COMPONENTS: tuple[ComponentName, ...] = ("engine", "decoder", "router")

DeploymentMode = Literal["OMENative", "RawDeployment", "MultiNode"]
DEPLOYMENT_MODE_ANNOTATION = "ome.io/deploymentMode"

IntOrString = StrictInt | StrictStr
"""A count or a percentage such as `"25%"`, as Kubernetes' `intstr.IntOrString`."""

# Defaults the spec states; they apply when the field is left out.
DEFAULT_INSTANCE_READY_TIMEOUT = "30m"
DEFAULT_UPDATE_STRATEGY = "SurgeThenDrain"
DEFAULT_RESTART_POLICY = "RecreateInstanceOnPodRestart"
DEFAULT_ROLLING_UPDATE_MAX_SURGE = "25%"
DEFAULT_ROLLING_UPDATE_MAX_UNAVAILABLE = "25%"
DEFAULT_RATIO_TOLERANCE_PERCENT = 5
DEFAULT_GROUP_ORDERING = "Sequential"
DEFAULT_MIGRATION_MODE = "Auto"
DEFAULT_ON_INCONCLUSIVE = "Hold"
MAX_ROLLOUT_GROUPS = 3
MAX_CANARY_STEPS = 20


class ObjectMeta(SpecModel):
    """The parts of Kubernetes object metadata a manifest or a `kubectl get` carries."""

    name: StrictStr
    namespace: StrictStr | None = None
    generation: StrictInt | None = None
    uid: StrictStr | None = None
    resource_version: StrictStr | None = None
    creation_timestamp: StrictStr | None = None
    deletion_timestamp: StrictStr | None = None
    labels: dict[str, StrictStr] | None = None
    annotations: dict[str, StrictStr] | None = None
    finalizers: list[StrictStr] | None = None
    # Carried by `kubectl get -o yaml` output; kept so such a manifest is accepted as is.
    owner_references: list[dict[str, Any]] | None = None
    managed_fields: list[dict[str, Any]] | None = None


class ModelRef(SpecModel):
    """`spec.model` / `spec.runtime`: a reference by name."""

    name: StrictStr
    kind: StrictStr | None = None
    api_group: StrictStr | None = None


class EnvVar(SpecModel):
    name: StrictStr
    value: StrictStr | None = None
    value_from: dict[str, Any] | None = None


class ResourceRequirements(SpecModel):
    requests: dict[str, QuantityText] | None = None
    limits: dict[str, QuantityText] | None = None


class RunnerSpec(SpecModel):
    """The main container of a component's pods."""

    name: StrictStr | None = None
    image: StrictStr | None = None
    command: list[StrictStr] | None = None
    args: list[StrictStr] | None = None
    env: list[EnvVar] | None = None
    resources: ResourceRequirements | None = None


class LeaderSpec(SpecModel):
    """The leader pod of a multi-pod Instance."""

    runner: RunnerSpec | None = None


class WorkerSpec(SpecModel):
    """The worker pods of a multi-pod Instance; `size` is their number per Instance."""

    size: StrictInt | None = None
    runner: RunnerSpec | None = None


class UpdateBudget(SpecModel):
    """`lifecycle.updateStrategy.rollingUpdate`: how many Instances move at once."""

    partition: StrictInt | None = None
    max_unavailable: IntOrString | None = None
    max_surge: IntOrString | None = None


class UpdateStrategy(SpecModel):
    type: Literal["SurgeThenDrain", "RecreatePod", "InPlaceIfPossible", "InPlaceOnly"] | None = None
    rolling_update: UpdateBudget | None = None

    @property
    def effective_type(self) -> str:
        return self.type or DEFAULT_UPDATE_STRATEGY


class MigrationPolicy(SpecModel):
    mode: Literal["Auto", "Surge", "Never"] | None = None


class LifecycleSpec(SpecModel):
    """Per-component OMENative settings (`spec.<component>.lifecycle`)."""

    restart_policy: Literal["None", "RecreateInstanceOnPodRestart"] | None = None
    update_strategy: UpdateStrategy | None = None
    ready_policy: dict[str, Any] | None = None
    instance_ready_timeout: Duration | None = None
    min_ready_seconds: StrictInt | None = None
    migration_policy: MigrationPolicy | None = None

    @property
    def effective_instance_ready_timeout(self) -> str:
        return self.instance_ready_timeout or DEFAULT_INSTANCE_READY_TIMEOUT


class ComponentSpec(SpecModel):
    """`spec.engine`, `spec.decoder`, `spec.router`, or a runtime's `<component>Config`."""

    min_replicas: StrictInt | None = None
    max_replicas: StrictInt | None = None
    annotations: dict[str, StrictStr] | None = None
    labels: dict[str, StrictStr] | None = None
    runner: RunnerSpec | None = None
    leader: LeaderSpec | None = None
    worker: WorkerSpec | None = None
    scheduler_name: StrictStr | None = None
    topology_key: StrictStr | None = None
    topology_spread: Literal["Required", "Preferred"] | None = None
    topology_spread_key: StrictStr | None = None
    lifecycle: LifecycleSpec | None = None

    @property
    def is_multi_pod(self) -> bool:
        return self.leader is not None or self.worker is not None


class SelectorRequirement(SpecModel):
    key: StrictStr
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[StrictStr] | None = None


class ClusterAffinityTerm(SpecModel):
    """One term of `spec.placement.clusterAffinity`; terms are ORed, requirements ANDed."""

    match_fields: list[SelectorRequirement] | None = None
    match_expressions: list[SelectorRequirement] | None = None


class PlacementSplit(SpecModel):
    replicas: StrictInt | None = None
    spread: StrictStr | None = None
    max_replicas_per_cluster: StrictInt | None = None
    min_replicas_per_cluster: StrictInt | None = None


class PlacementSpec(SpecModel):
    """`spec.placement`. The removed `capacityFactors` alias is deliberately absent."""

    policy: Literal["Legacy", "ClusterAffinity"] | None = None
    mode: Literal["Single", "All", "Split", "SplitByCapacity"] | None = None
    cluster_affinity: list[ClusterAffinityTerm] | None = None
    requirements: StrictStr | None = None
    cluster_selector: StrictStr | None = None
    max_surge: StrictInt | None = None
    replacement_timeout: Duration | None = None
    split: PlacementSplit | None = None


class RoutingProbe(SpecModel):
    """`spec.routing.probe`: replaces the chart's probe wholesale; nine required fields."""

    disabled: bool | None = None
    path: StrictStr | None = None
    method: Literal["GET", "HEAD", "POST"] | None = None
    accept_statuses: list[StrictInt] | None = None
    gate_statuses: list[StrictInt] | None = None
    period: Duration | None = None
    timeout: Duration | None = None
    failure_threshold: StrictInt | None = None
    success_threshold: StrictInt | None = None
    all_failed_policy: Literal["PreserveTraffic", "Drain"] | None = None


class RoutingCapacity(SpecModel):
    """`spec.routing.capacity`: replaces the chart's capacity poll wholesale."""

    disabled: bool | None = None
    path: StrictStr | None = None
    method: Literal["GET", "POST"] | None = None
    format: StrictStr | None = None
    samples: StrictInt | None = None
    quorum: StrictInt | None = None
    period: Duration | None = None
    timeout: Duration | None = None
    max_age: Duration | None = None
    options: dict[str, Any] | None = None


class RoutingSpec(SpecModel):
    enabled: bool | None = None
    capacity_factors: dict[str, QuantityText] | None = None
    probe: RoutingProbe | None = None
    capacity: RoutingCapacity | None = None


class CanaryPause(SpecModel):
    """`pause: {}` is a manual gate; `pause: {duration: X}` a timed one."""

    duration: Duration | None = None


class AnalysisMetric(SpecModel):
    name: StrictStr
    query: StrictStr
    operator: Literal["LT", "LTE", "GT", "GTE"]
    threshold: StrictStr


class CanaryAnalysis(SpecModel):
    interval: Duration
    initial_delay: Duration | None = None
    failure_limit: StrictInt
    on_inconclusive: Literal["Hold", "Rollback", "RollbackOnStall"] | None = None
    metrics: list[AnalysisMetric]


class CanaryStep(SpecModel):
    capacity: IntOrString
    traffic: StrictInt
    pause: CanaryPause | None = None
    analysis: CanaryAnalysis | None = None


class NameRef(SpecModel):
    name: StrictStr


class SecretKeyRef(SpecModel):
    name: StrictStr
    key: StrictStr


class PrometheusSource(SpecModel):
    provider_ref: NameRef | None = None
    server_address: StrictStr | None = None
    auth_ref: SecretKeyRef | None = None
    headers: dict[str, StrictStr] | None = None


class GroupCanary(SpecModel):
    steps: list[CanaryStep]
    ready_timeout: Duration | None = None
    scale_down_delay_seconds: StrictInt | None = None
    prometheus: PrometheusSource | None = None


class BlueGreen(SpecModel):
    """`blueGreen: {}`: each component updates at most 25% of its replicas at a time."""


class GroupRollingUpdate(SpecModel):
    max_surge: IntOrString | None = None
    max_unavailable: IntOrString | None = None

    @property
    def effective_max_surge(self) -> int | str:
        return DEFAULT_ROLLING_UPDATE_MAX_SURGE if self.max_surge is None else self.max_surge

    @property
    def effective_max_unavailable(self) -> int | str:
        if self.max_unavailable is None:
            return DEFAULT_ROLLING_UPDATE_MAX_UNAVAILABLE
        return self.max_unavailable


class MaintainRatio(SpecModel):
    tolerance: StrictInt | None = None

    @property
    def effective_tolerance(self) -> int:
        return DEFAULT_RATIO_TOLERANCE_PERCENT if self.tolerance is None else self.tolerance


class PolicyRef(SpecModel):
    name: StrictStr
    progression: StrictStr | None = None


Progression = Literal["canary", "blueGreen", "rollingUpdate"]


class RolloutGroup(SpecModel):
    # Components are plain strings so admission can name a bad one with its reason code.
    components: list[StrictStr]
    canary: GroupCanary | None = None
    blue_green: BlueGreen | None = None
    rolling_update: GroupRollingUpdate | None = None
    maintain_ratio: MaintainRatio | None = None
    soak: Duration | None = None
    policy_ref: PolicyRef | None = None

    def declared_progressions(self) -> list[Progression]:
        found: list[Progression] = []
        if self.canary is not None:
            found.append("canary")
        if self.blue_green is not None:
            found.append("blueGreen")
        if self.rolling_update is not None:
            found.append("rollingUpdate")
        return found

    @property
    def progression(self) -> Progression:
        """The group's progression; blue-green unless it sets another."""
        declared = self.declared_progressions()
        return declared[0] if declared else "blueGreen"


class RolloutSpec(SpecModel):
    groups: list[RolloutGroup] | None = None
    group_ordering: Literal["Sequential", "Concurrent"] | None = None
    pairing_protocol: StrictStr | None = None

    @property
    def effective_group_ordering(self) -> str:
        return self.group_ordering or DEFAULT_GROUP_ORDERING


class InferenceServiceSpec(SpecModel):
    deployment_mode: Literal["OMENative", "RawDeployment"] | None = None
    model: ModelRef | None = None
    runtime: ModelRef | None = None
    engine: ComponentSpec | None = None
    decoder: ComponentSpec | None = None
    router: ComponentSpec | None = None
    placement: PlacementSpec | None = None
    routing: RoutingSpec | None = None
    rollout: RolloutSpec | None = None

    def component(self, name: ComponentName) -> ComponentSpec | None:
        spec: ComponentSpec | None = getattr(self, name)
        return spec


class InferenceService(SpecModel):
    api_version: Literal["ome.io/v1beta1"] = "ome.io/v1beta1"
    kind: Literal["InferenceService"] = "InferenceService"
    metadata: ObjectMeta
    spec: InferenceServiceSpec = Field(default_factory=InferenceServiceSpec)
    # A `kubectl get -o yaml` carries status; admission ignores it.
    status: dict[str, Any] | None = None

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def namespace(self) -> str:
        return self.metadata.namespace or "default"
