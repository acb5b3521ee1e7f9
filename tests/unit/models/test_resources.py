"""InferenceReplica, TrafficMap, WorkloadCluster and ServingRuntime models: wire names,
round trips and the shape rules they enforce themselves."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from models.inferencereplica import InferenceReplica, InferenceReplicaStatus, inference_replica_name
from models.runtime import ClusterServingRuntime, ServingRuntime
from models.trafficmap import TrafficMap
from models.workloadcluster import WorkloadCluster

pytestmark = pytest.mark.unit

IREP = {
    "apiVersion": "ome.io/v1beta1",
    "kind": "InferenceReplica",
    "metadata": {"name": "chat-engine", "namespace": "prod"},
    "spec": {"inferenceService": "chat", "component": "engine", "replicas": 2, "revision": "chat-engine-rev-1a2b3c4d",
             "leader": {}, "worker": {"size": 3}, "paused": False,
             "pacing": {"partition": 1, "rollbackToRevision": "chat-engine-rev-00000000"}},
    "status": {
        "observedGeneration": 3, "replicas": 3, "readyReplicas": 2, "servingReplicas": 2, "availableReplicas": 2,
        "updatedReplicas": 1, "updatedReadyReplicas": 1,
        "currentRevision": "chat-engine-rev-00000000", "updateRevision": "chat-engine-rev-1a2b3c4d",
        "instanceStatuses": [
            {"index": 0, "phase": "Ready", "incarnation": 1, "runningRevision": "chat-engine-rev-00000000",
             "targetRevision": "chat-engine-rev-00000000", "pods": {"total": 4, "ready": 4, "serving": 4, "available": 4},
             "readySince": "2026-11-29T12:00:00Z"},
            {"index": 2, "phase": "Failed", "incarnation": 2, "targetRevision": "chat-engine-rev-1a2b3c4d",
             "pods": {"total": 4, "ready": 0, "serving": 0, "available": 0},
             "lastFailure": {"podName": "chat-engine-2-leader-0", "containerName": "engine", "reason": "ErrImagePull",
                             "message": "pull access denied", "time": "2026-11-29T12:05:00Z"}},
        ],
        "retryBlocks": [{"targetRevision": "chat-engine-rev-1a2b3c4d", "state": "Held", "attemptsStarted": 3,
                         "reason": "ErrImagePull"}],
        "conditions": [{"type": "Ready", "status": "False", "reason": "InstanceFailed",
                        "message": "At least one Instance has Phase=Failed"}],
        "rolloutHold": {"gate": "Held", "reason": "retries exhausted", "target": "chat-engine-rev-1a2b3c4d"},
    },
}


def test_inference_replica_round_trips_with_wire_names() -> None:
    replica = InferenceReplica.model_validate(IREP)
    assert replica.spec.pods_per_instance == 4
    assert replica.status.instance_statuses[1].last_failure is not None
    assert replica.status.condition("Ready") is not None
    assert replica.to_manifest()["status"]["instanceStatuses"][0]["readySince"] == "2026-11-29T12:00:00Z"
    assert InferenceReplica.model_validate(replica.to_manifest()) == replica
    assert inference_replica_name("chat", "engine") == "chat-engine"


def test_inference_replica_refuses_unknown_phases_and_gates() -> None:
    with pytest.raises(ValidationError):
        InferenceReplicaStatus.model_validate({"instanceStatuses": [{"index": 0, "phase": "Running"}]})
    with pytest.raises(ValidationError):
        InferenceReplicaStatus.model_validate({"rolloutHold": {"gate": "Sleepy", "reason": "x"}})


TRAFFIC_MAP = {
    "apiVersion": "ome.io/v1beta1",
    "kind": "TrafficMap",
    "metadata": {"name": "chat", "namespace": "prod", "generation": 4},
    "spec": {
        "service": "chat", "mode": "All", "observedISVCGeneration": 6,
        "entries": [
            {"cluster": "worker-a", "endpoint": "https://a", "weight": 2, "healthy": True,
             "capacity": {"allocated": 4, "ready": 4}},
            {"cluster": "worker-b", "endpoint": "https://b", "weight": 3, "healthy": True,
             "capacity": {"allocated": 2, "ready": 2, "factor": "3"}},
            {"cluster": "worker-c", "weight": 0, "healthy": False, "capacity": {"factor": "1500m"}, "drainRefs": ["maint-1"]},
        ],
    },
    "status": {"sourceUID": "u-1", "published": True, "observedTrafficMapGeneration": 4, "conditions": []},
}


def test_traffic_map_round_trips_and_omits_zero_counts() -> None:
    tmap = TrafficMap.model_validate(TRAFFIC_MAP)
    assert tmap.spec.observed_isvc_generation == 6
    assert tmap.status.source_uid == "u-1"
    entry_c = tmap.spec.entry("worker-c")
    assert entry_c is not None and entry_c.capacity.allocated == 0
    assert str(entry_c.capacity.factor_amount) == "1.500"
    worker_a = tmap.spec.entry("worker-a")
    assert worker_a is not None and worker_a.capacity.factor_amount == 1
    assert tmap.to_manifest() == TRAFFIC_MAP


def test_workload_cluster_needs_exactly_one_source() -> None:
    base = {"apiVersion": "ome.io/v1beta1", "kind": "WorkloadCluster", "metadata": {"name": "worker-a"}}
    cluster = WorkloadCluster.model_validate({**base, "spec": {"clusterSource": {"kubeConfig": {"secretRef": {
        "name": "worker-a-kubeconfig", "namespace": "ome"}}}}})
    kube_config = cluster.spec.cluster_source.kube_config
    assert kube_config is not None and kube_config.effective_key == "kubeconfig"
    assert not cluster.status.ready
    with pytest.raises(ValidationError, match="exactly one"):
        WorkloadCluster.model_validate({**base, "spec": {"clusterSource": {}}})
    with pytest.raises(ValidationError, match="exactly one"):
        WorkloadCluster.model_validate({**base, "spec": {"clusterSource": {
            "kubeConfig": {"secretRef": {"name": "s"}}, "clusterProfileRef": {"name": "p"}}}})


def test_runtimes_keep_fields_we_do_not_model_but_check_component_configs() -> None:
    manifest = {"apiVersion": "ome.io/v1beta1", "kind": "ClusterServingRuntime", "metadata": {"name": "srt-x"},
                "spec": {"protocolVersions": ["openAI"], "modelSizeRange": {"min": "1B", "max": "10B"},
                         "engineConfig": {"runner": {"image": "sglang:1"}, "worker": {"size": 1}}}}
    runtime = ClusterServingRuntime.model_validate(manifest)
    assert runtime.spec.component_config("engine") is not None
    assert runtime.to_manifest()["spec"]["protocolVersions"] == ["openAI"]
    with pytest.raises(ValidationError):
        ServingRuntime.model_validate({**manifest, "kind": "ServingRuntime",
                                       "spec": {"engineConfig": {"replicas": 3}}})


def test_inference_service_status_round_trips() -> None:
    from models.isvc_status import InferenceServiceStatus

    wire = {
        "observedGeneration": 6,
        "conditions": [{"type": "EngineReady", "status": "True", "reason": "Ready", "message": "All Instances are Ready"}],
        "components": {
            "engine": {
                "deploymentMode": "OMENative",
                "lifecycle": {"currentRevision": "chat-engine-rev-00000000", "updateRevision": "chat-engine-rev-1a2b3c4d",
                              "replicas": 4, "readyReplicas": 4, "servingReplicas": 4, "availableReplicas": 4,
                              "updatedReplicas": 1, "updatedReadyReplicas": 1, "conditions": [],
                              "rolloutHold": {"gate": "Sequential", "reason": "Sequential waiting on decoder"}},
                "rolloutPhase": "Paused",
                "canary": {"canaryRevisionHash": "1a2b3c4d", "stableRevisionHash": "00000000", "currentStep": 0,
                           "metricResults": [], "analysisFailedChecks": 0, "preStepHold": False},
                "traffic": [{"revisionName": "chat-engine-rev-1a2b3c4d", "percent": 10, "tag": "canary",
                             "latestRevision": True},
                            {"revisionName": "chat-engine-rev-00000000", "percent": 90, "tag": "stable",
                             "latestRevision": False}],
            }
        },
    }
    status = InferenceServiceStatus.model_validate(wire)
    engine = status.components["engine"]
    assert engine.lifecycle is not None and engine.lifecycle.rollout_hold is not None
    assert engine.lifecycle.rollout_hold.gate == "Sequential"
    assert status.condition("EngineReady") is not None
    assert InferenceServiceStatus.model_validate(status.to_manifest()) == status
