"""Query answers as the workflows give them, for the `omectl rollout` view tests: a canary of
mistral-pd paused at its manual gate (step 2/3, one engine Instance moved, an analysis sample
passed), and a plain engine rolling update held by its budget."""

from __future__ import annotations

from typing import Any

from models.inferencereplica import InferenceReplicaStatus
from workers.omectl.rollout_tree import StatusSnapshot
from workflows.service.messages import RolloutStatusView, ServiceStatusView

OLD, NEW = "mistral-pd-engine-rev-aaaa1111", "mistral-pd-engine-rev-bbbb2222"


def instance(index: int, running: str, target: str | None = None, phase: str = "Ready") -> dict[str, Any]:
    return {
        "index": index,
        "phase": phase,
        "runningRevision": running,
        "targetRevision": target or running,
        "pods": {"total": 1, "ready": 1 if phase == "Ready" else 0, "serving": 1 if phase == "Ready" else 0},
        "nodeNames": [f"gpu-{index}"],
    }


def replica(instances: list[dict[str, Any]], current: str = OLD, update: str = NEW, **extra: Any) -> InferenceReplicaStatus:
    updated = sum(1 for i in instances if i["runningRevision"] == update)
    return InferenceReplicaStatus.model_validate(
        {
            "replicas": len(instances),
            "readyReplicas": sum(1 for i in instances if i["phase"] == "Ready"),
            "servingReplicas": sum(1 for i in instances if i["phase"] == "Ready"),
            "updatedReplicas": updated,
            "updatedReadyReplicas": updated,
            "currentRevision": current,
            "updateRevision": update,
            "instanceStatuses": instances,
            **extra,
        }
    )


def service(components: dict[str, Any], ready: str = "True", pause: str | None = None) -> ServiceStatusView:
    return ServiceStatusView.model_validate(
        {
            "name": "mistral-pd",
            "namespace": "canary-demo",
            "generation": 3,
            "phase": "Ready" if ready == "True" else "Progressing",
            "paused": pause is not None,
            "pause": pause,
            "deleting": False,
            "status": {"conditions": [{"type": "Ready", "status": ready}], "components": components},
        }
    )


CANARY_ROW = {
    "group": 0,
    "component": "engine",
    "strategy": "Canary",
    "group_phase": "Paused",
    "gate": "Manual",
    "reason": "canary bbbb2222 step 2/3 waits at its manual gate (pause: {})",
    "release": "promote",
    "capacity": "1/2",
    "ready": "1/2",
    "previous": OLD,
    "target": NEW,
    "phase": "Paused",
    "step": "2/3",
    "traffic": "50% -> 50%",
}


def canary_paused() -> StatusSnapshot:
    """Step 2/3 of a canary at its manual gate: Instance 0 on the canary, 1 on the stable revision."""
    engine = {
        "deploymentMode": "OMENative",
        "lifecycle": {"currentRevision": OLD, "updateRevision": NEW, "replicas": 2, "updatedReplicas": 1, "servingReplicas": 2},
        "rolloutPhase": "Paused",
        "canary": {
            "canaryRevisionHash": "bbbb2222",
            "stableRevisionHash": "aaaa1111",
            "currentStep": 1,
            "metricResults": [
                {"name": "error_rate", "value": "0.01", "threshold": "0.05", "operator": "LT", "passed": True,
                 "time": "2026-12-02T11:00:05Z"},
            ],
        },
        "traffic": [
            {"revisionName": OLD, "percent": 50, "tag": "stable"},
            {"revisionName": NEW, "percent": 50, "tag": "canary", "latestRevision": True},
        ],
    }
    rollout = RolloutStatusView(reported="Paused", run=3, active=True, plan_digest="rp1:133dcb0f0780", rows=[CANARY_ROW])
    return StatusSnapshot(
        service=service({"engine": engine}),
        rollout=rollout,
        replicas={"engine": replica([instance(0, NEW), instance(1, OLD)])},
    )


def rolling(instances: list[dict[str, Any]], ready: str = "True", **extra: Any) -> StatusSnapshot:
    """A plain engine (no rollout group) moving from OLD to NEW Instance by Instance."""
    status = replica(instances, **extra)
    engine = {"deploymentMode": "OMENative", "lifecycle": {"currentRevision": status.current_revision,
                                                           "updateRevision": status.update_revision,
                                                           "replicas": status.replicas}}
    return StatusSnapshot(
        service=service({"engine": engine}, ready=ready),
        rollout=RolloutStatusView(reported="NotConfigured"),
        replicas={"engine": status},
    )
