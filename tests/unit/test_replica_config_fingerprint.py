"""What the InferenceService sends an InferenceReplica is fingerprinted to send nothing twice;
a coordination field a running service never set must not change the fingerprint (a running
service would otherwise resend every config after an upgrade, and replays would diverge)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from models.inferencereplica import InferenceReplicaSpec
from planning.replica.coordination import Coordination
from planning.replica.template import ClusterLifecycle
from workflows.replica.messages import ReplicaConfig
from workflows.service.components import CLUSTER_ADDITIONS, config_fingerprint

pytestmark = pytest.mark.unit

RUN = Coordination(run=2, target="bbbbbbbb", limit=1, group=0, group_phase="Progressing")


def config(coordination: Coordination | None) -> ReplicaConfig:
    return ReplicaConfig(
        namespace="ns",
        isvc="chat",
        component="engine",
        generation=2,
        component_spec={},
        ir_spec=InferenceReplicaSpec(inference_service="chat", component="engine", revision="chat-engine-rev-bbbbbbbb"),
        revision_hash="bbbbbbbb",
        revision_name="chat-engine-rev-bbbbbbbb",
        coordination=coordination,
    )


def coordination_sent(coordination: Coordination | None) -> dict[str, object] | None:
    sent = json.loads(config_fingerprint(config(coordination))).get("coordination")
    assert sent is None or isinstance(sent, dict)
    return sent


def test_unset_stable_and_rollback_leave_the_fingerprint_as_before() -> None:
    sent = coordination_sent(RUN)
    assert sent is not None and "stable" not in sent and "rollback_to" not in sent
    opening = coordination_sent(replace(RUN, group=None, group_phase=None))
    assert opening is not None and set(opening) == set(sent) - {"group", "group_phase"}
    assert coordination_sent(None) is None


def test_a_stable_revision_or_a_rollback_is_news() -> None:
    before = coordination_sent(RUN)
    assert before is not None
    assert coordination_sent(replace(RUN, stable="aaaaaaaa")) == {**before, "stable": "aaaaaaaa"}
    back = coordination_sent(replace(RUN, stable="aaaaaaaa", rollback_to="aaaaaaaa"))
    assert back is not None and back["rollback_to"] == "aaaaaaaa"
    assert config_fingerprint(config(replace(RUN, rollback_to="aaaaaaaa"))) != config_fingerprint(config(RUN))


def test_cluster_settings_added_later_leave_the_fingerprint_as_before_at_their_defaults() -> None:
    sent = json.loads(config_fingerprint(config(None)))["cluster"]
    assert set(sent) == set(ClusterLifecycle.model_fields) - set(CLUSTER_ADDITIONS)
    assert "auto_migrate_max_attempts" in CLUSTER_ADDITIONS and "scale_up_pod_batch_size" in CLUSTER_ADDITIONS
    for value in (1, None):
        changed = config(None).model_copy(update={"cluster": ClusterLifecycle(auto_migrate_max_attempts=value)})
        assert json.loads(config_fingerprint(changed))["cluster"]["auto_migrate_max_attempts"] == value


@pytest.mark.parametrize("value", [0, -2])
def test_auto_migrate_attempts_must_be_positive(value: int) -> None:
    with pytest.raises(ValueError, match=rf"auto_migrate_max_attempts \(autoMigrate.maxAttempts\) must be at least 1, got {value}"):
        ClusterLifecycle(auto_migrate_max_attempts=value)
