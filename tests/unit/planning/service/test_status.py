"""InferenceService status: lifecycle blocks and conditions (reference §7, §8)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from kubesim.patch import merge_patch as apply_merge_patch
from models.inferencereplica import Condition, InferenceReplicaStatus, RolloutHoldRow
from models.pods import LABEL_COMPONENT, LABEL_ISVC
from planning.replica.conditions import PlannedCondition
from planning.service.deployment import observe_deployment
from planning.service.status import (
    DELETING,
    ComponentReport,
    deployment_component_report,
    isvc_status,
    lifecycle_model,
    lifecycle_status,
    merge_patch,
    multinode_component_report,
    ready_condition,
)
from tests.unit.planning.replica.rows import NEW, NOW, OLD

pytestmark = pytest.mark.unit


def test_lifecycle_copies_totals_revisions_conditions_and_hold() -> None:
    status = InferenceReplicaStatus(
        observed_generation=3,
        replicas=3,
        ready_replicas=2,
        serving_replicas=2,
        available_replicas=2,
        updated_replicas=1,
        updated_ready_replicas=1,
        current_revision=OLD,
        update_revision=NEW,
        collision_count=0,
        label_selector="ome.io/component=engine,ome.io/inferenceservice=chat",
        conditions=[Condition(type="Ready", status="Unknown", reason="RolloutInProgress", message="m")],
        rollout_hold=RolloutHoldRow(gate="Budget", reason="r", target=NEW, since=NOW),
    )
    block = lifecycle_status(status)
    assert block["replicas"] == 3 and block["servingReplicas"] == 2 and block["updatedReadyReplicas"] == 1
    assert (block["currentRevision"], block["updateRevision"]) == (OLD, NEW)
    assert block["rolloutHold"]["gate"] == "Budget"
    assert block["conditions"][0]["reason"] == "RolloutInProgress"
    assert "instanceStatuses" not in block, "per-Instance rows stay on the InferenceReplica"


def test_lifecycle_leaves_out_an_absent_hold() -> None:
    assert "rolloutHold" not in lifecycle_status(InferenceReplicaStatus())


def test_lifecycle_model_matches_the_dict() -> None:
    status = InferenceReplicaStatus(
        replicas=2,
        ready_replicas=1,
        current_revision=OLD,
        rollout_hold=RolloutHoldRow(gate="Held", reason="r", target=NEW, since=NOW),
    )
    model = lifecycle_model(status)
    assert (model.replicas, model.ready_replicas, model.current_revision) == (2, 1, OLD)
    assert model.rollout_hold is not None and model.rollout_hold.gate == "Held"


def test_blocking_condition_makes_ready_false() -> None:
    blocking = PlannedCondition("RuntimeResolved", "False", "RuntimeNotFound", "no runtime srt-x")
    status = isvc_status(1, [_report("engine", "True")], [], NOW, blocking)
    by_type = {c["type"]: c for c in status["conditions"]}
    assert (by_type["Ready"]["status"], by_type["Ready"]["reason"]) == ("False", "RuntimeNotFound")
    assert by_type["RuntimeResolved"]["message"] == "no runtime srt-x"


def _report(
    name: str, status: str, reason: str = "Ready", message: str = "All Instances are Ready"
) -> ComponentReport:
    kind = f"{name.capitalize()}Ready"
    return ComponentReport(name=name, condition=PlannedCondition(kind, status, reason, message))  # type: ignore[arg-type]


def test_ready_when_every_component_is() -> None:
    condition = ready_condition([_report("router", "True"), _report("engine", "True")])
    assert (condition.status, condition.reason, condition.message) == (
        "True",
        "ComponentsReady",
        "router, engine ready",
    )


def test_not_ready_names_the_first_component_that_is_not() -> None:
    condition = ready_condition(
        [
            _report("router", "True"),
            _report("engine", "False", "InsufficientAvailable", "0/2 Instances serving, need 2"),
        ]
    )
    assert (condition.status, condition.reason) == ("False", "InsufficientAvailable")
    assert condition.message == "engine: 0/2 Instances serving, need 2"


def test_a_multinode_component_is_named_not_ready_with_its_fix() -> None:
    """Not "the InferenceService declares no component": the component is there, pinned to a
    mode this product does not run, and the user reads how to run it."""
    body = isvc_status(1, [multinode_component_report("engine")], [], NOW)
    conditions = {c["type"]: c for c in body["conditions"]}
    message = (
        'engine: spec.engine.annotations["ome.io/deploymentMode"] is MultiNode, which needs a LeaderWorkerSet '
        "this product does not run; remove the annotation to run the component on OMENative"
    )
    assert (conditions["Ready"]["status"], conditions["Ready"]["reason"]) == ("False", "MultiNodeNotSupported")
    assert conditions["Ready"]["message"] == message
    assert (conditions["EngineReady"]["status"], conditions["EngineReady"]["reason"]) == ("False", "MultiNodeNotSupported")
    assert body["components"] == {"engine": {}}


def test_rollout_in_flight_is_unknown() -> None:
    condition = ready_condition([_report("engine", "Unknown", "RolloutInProgress", "Rolling out x")])
    assert condition.status == "Unknown"


@pytest.mark.parametrize(
    ("desired", "status", "reason"),
    [
        (2, {"replicas": 2, "readyReplicas": 2, "availableReplicas": 2, "updatedReplicas": 2}, "Ready"),
        (
            4,
            {"replicas": 4, "readyReplicas": 3, "availableReplicas": 3, "updatedReplicas": 4},
            "MinimumAvailable",
        ),
        (4, {"replicas": 4, "readyReplicas": 1, "availableReplicas": 1}, "InsufficientAvailable"),
        (2, None, "InsufficientAvailable"),
        (0, None, "NoReplicas"),
    ],
)
def test_deployment_component(desired: int, status: dict[str, int] | None, reason: str) -> None:
    observed = None
    if status is not None:
        deployment = {
            "metadata": {"labels": {LABEL_ISVC: "chat", LABEL_COMPONENT: "router"}, "generation": 1},
            "spec": {"replicas": desired},
            "status": {"observedGeneration": 1, **status},
        }
        observed = observe_deployment(deployment)
    report = deployment_component_report("router", desired, observed)
    assert (report.condition.type, report.condition.reason) == ("RouterReady", reason)
    assert report.lifecycle is None, "§7: the lifecycle block is for OMENative components only"


def test_isvc_status_keeps_transition_times() -> None:
    earlier = NOW - timedelta(minutes=5)
    previous = [
        Condition(type="Ready", status="True", reason="ComponentsReady", last_transition_time=earlier)
    ]
    lifecycle = {"replicas": 1}
    status = isvc_status(4, [_report("engine", "True")], previous, NOW)
    assert status["observedGeneration"] == 4
    by_type = {c["type"]: c for c in status["conditions"]}
    assert by_type["Ready"]["lastTransitionTime"].startswith(earlier.strftime("%Y-%m-%dT%H:%M"))
    assert by_type["EngineReady"]["status"] == "True"
    assert status["components"] == {"engine": {}}
    with_lifecycle = isvc_status(
        4, [ComponentReport("engine", _report("engine", "True").condition, lifecycle)], [], NOW
    )
    assert with_lifecycle["components"] == {"engine": {"lifecycle": {"replicas": 1}}}


def test_a_deleting_service_is_not_ready_because_it_is_being_deleted() -> None:
    body = isvc_status(3, [], [], NOW, DELETING)
    (ready,) = body["conditions"]
    assert (ready["type"], ready["status"], ready["reason"]) == ("Ready", "False", "Deleting")
    assert "being deleted" in ready["message"]


def test_the_status_patch_names_what_the_last_body_had_and_this_one_lacks_as_null() -> None:
    """A completed canary's `stableRevisionHash`, a lifted `rolloutHold` and a removed
    component leave the object; lists are replaced whole; a key we never wrote stays."""
    before = {
        "observedGeneration": 2,
        "conditions": [{"type": "Ready", "status": "True"}],
        "components": {
            "engine": {
                "lifecycle": {"replicas": 4, "rolloutHold": {"gate": "Budget"}},
                "rolloutPhase": "Canarying",
                "canary": {"currentStep": 2, "stableRevisionHash": "4eada280", "capacityWaitSince": "t"},
                "traffic": [{"revisionName": "a", "percent": 50}, {"revisionName": "b", "percent": 50}],
            },
            "decoder": {"lifecycle": {"replicas": 2}},
        },
    }
    after = {
        "observedGeneration": 2,
        "conditions": [{"type": "Ready", "status": "True"}],
        "components": {
            "engine": {
                "lifecycle": {"replicas": 4},
                "rolloutPhase": "Stable",
                "canary": {"currentStep": 3},
                "traffic": [{"revisionName": "b", "percent": 100}],
            },
        },
    }
    patch = merge_patch(before, after)
    assert patch["components"]["decoder"] is None
    engine = patch["components"]["engine"]
    assert engine["lifecycle"] == {"replicas": 4, "rolloutHold": None}
    assert engine["canary"] == {"currentStep": 3, "stableRevisionHash": None, "capacityWaitSince": None}
    assert engine["traffic"] == [{"revisionName": "b", "percent": 100}]
    on_object = {**before, "someoneElses": {"x": 1}}
    assert apply_merge_patch(on_object, patch) == {**after, "someoneElses": {"x": 1}}
    assert merge_patch(None, after) == after

