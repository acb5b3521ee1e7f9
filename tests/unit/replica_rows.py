"""An InferenceReplica's config and a Ready single-pod Instance's report, for unit tests of the
InferenceReplica workflow's pure parts (its status rows, when it is at rest)."""

from __future__ import annotations

from datetime import datetime

from models.inferencereplica import InferenceReplicaSpec
from models.instance import InstancePhase, InstanceStatus
from workflows.replica.messages import ReplicaConfig


def replica_config(revision: str) -> ReplicaConfig:
    """The engine component of `chat` in namespace `ns`, on `revision`."""
    return ReplicaConfig(
        namespace="ns",
        isvc="chat",
        component="engine",
        generation=1,
        component_spec={},
        ir_spec=InferenceReplicaSpec(inference_service="chat", component="engine", revision=f"chat-engine-rev-{revision}"),
        revision_hash=revision,
        revision_name=f"chat-engine-rev-{revision}",
    )


def ready_report(index: int, revision: str, since: datetime, phase: InstancePhase = InstancePhase.READY) -> InstanceStatus:
    """What Instance `index` reports once its one pod serves on `revision` (in `phase`)."""
    return InstanceStatus(
        namespace="ns", isvc="chat", component="engine", index=index, phase=phase, incarnation=1,
        running_revision=revision, target_revision=revision, desired_pods=1, total_pods=1, ready_pods=1,
        serving_pods=1, available_pods=1, ready=True, serving=True, available=True, ready_since=since,
    )  # fmt: skip
