"""Lifecycle settings that reach running Instances without a new revision.

The revision hash covers the pod template only (spec reference §7), so a change to
`lifecycle.restartPolicy`, `instanceReadyTimeout`, the update strategy, `minReadySeconds`
or the cluster's drain and grace settings makes no new revision and moves no pod. The
InferenceReplica still owes its running Instances those settings: when the part of the
Instance spec named here changes, it sends every live Instance its spec again on the
revision it already targets, and the Instance adopts it without touching its pods.
"""

from __future__ import annotations

from models.instance import InstanceSpec
from planning.replica.publish import digest

LIFECYCLE_FIELDS = frozenset(
    {
        "restart_policy",
        "update_strategy_type",
        "instance_ready_timeout_seconds",
        "min_ready_seconds",
        "drain_seconds",
        "stuck_pod_grace_seconds",
        "unschedulable_grace_seconds",
        "update_retry",
        "force_delete",
        "teardown_deadline_seconds",
        "safety_recheck_seconds",
    }
)
"""`InstanceSpec` fields outside the pod template (so outside the revision hash)."""


def lifecycle_digest(spec: InstanceSpec) -> str:
    """A fingerprint of `spec`'s lifecycle settings; equal digests need no resend."""
    settings = spec.model_dump(mode="json", include=set(LIFECYCLE_FIELDS))
    return digest(settings)
