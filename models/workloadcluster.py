"""WorkloadCluster (`wlc`): a cluster-scoped registration of a cluster that runs
InferenceService replicas (reference §16).

`spec.clusterSource` names exactly one of a kubeconfig Secret or a ClusterProfile; status
carries only conditions, whose `Ready` reflects reachability (GET /version), never capacity.

Public API: `WorkloadCluster`, `WorkloadClusterSpec`, `ClusterSource`, `KubeConfigSource`,
`SecretReference`, `ClusterProfileRef`, `WorkloadClusterStatus`, `READY_REASONS`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, StrictStr, model_validator

from models.base import SpecModel, StatusModel
from models.inferencereplica import Condition
from models.inferenceservice import ObjectMeta

READY_REASONS: dict[str, str] = {
    "Reachable": "True",
    "ProbeFailedRetrying": "True",
    "ConnectionFailed": "False",
    "SecretNotFound": "False",
    "BadKubeConfig": "False",
    "ClusterProfileUnsupported": "False",
}
DEFAULT_KUBECONFIG_KEY = "kubeconfig"
DEFAULT_CONNECTION_GRACE = "2m"


class SecretReference(SpecModel):
    name: StrictStr
    namespace: StrictStr | None = None


class KubeConfigSource(SpecModel):
    secret_ref: SecretReference
    key: StrictStr | None = None

    @property
    def effective_key(self) -> str:
        return self.key or DEFAULT_KUBECONFIG_KEY


class ClusterProfileRef(SpecModel):
    name: StrictStr


class ClusterSource(SpecModel):
    kube_config: KubeConfigSource | None = None
    cluster_profile_ref: ClusterProfileRef | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> ClusterSource:
        if (self.kube_config is None) == (self.cluster_profile_ref is None):
            raise ValueError(
                "spec.clusterSource must set exactly one of kubeConfig and clusterProfileRef"
            )
        return self


class WorkloadClusterSpec(SpecModel):
    cluster_source: ClusterSource


class WorkloadClusterStatus(StatusModel):
    conditions: list[Condition] = Field(default_factory=list)

    @property
    def ready(self) -> bool:
        return any(c.type == "Ready" and c.status == "True" for c in self.conditions)


class WorkloadCluster(SpecModel):
    api_version: Literal["ome.io/v1beta1"] = "ome.io/v1beta1"
    kind: Literal["WorkloadCluster"] = "WorkloadCluster"
    metadata: ObjectMeta
    spec: WorkloadClusterSpec
    status: WorkloadClusterStatus = Field(default_factory=WorkloadClusterStatus)
