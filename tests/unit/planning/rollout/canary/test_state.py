"""The canary's status block and recorded traffic (§1.5, §1.7, §2.6)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from pydantic import TypeAdapter

from models.isvc_status import ComponentStatus
from planning.rollout.canary.requests import Mailbox, PromoteRequest, RollbackRequest
from planning.rollout.canary.state import CanaryState, Failure, primary_of
from planning.rollout.canary.traffic import traffic_targets
from tests.unit.planning.rollout.canary.rows import at, fresh

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "components, primary",
    [(("engine", "decoder"), "engine"), (("router",), "router"), (("router", "engine", "decoder"), "router")],
    ids=["engine and decoder", "router alone", "router with the others"],
)
def test_primary_is_the_router_when_in_the_group_else_the_engine(
    components: tuple[str, ...], primary: str
) -> None:
    assert primary_of(components) == primary


@pytest.mark.parametrize(
    "weight, completed, expected",
    [
        (0, False, [("chat-engine-rev-e1", 100, "stable", False)]),
        (
            10,
            False,
            [("chat-engine-rev-e2", 10, "canary", True), ("chat-engine-rev-e1", 90, "stable", False)],
        ),
        (100, False, [("chat-engine-rev-e2", 100, "canary", True)]),
        (100, True, [("chat-engine-rev-e2", 100, "stable", True)]),
    ],
    ids=["0% canary left out", "10%", "100% stable left out", "completed"],
)
def test_traffic_entries_name_revisions_and_leave_out_zero_weights(
    weight: int, completed: bool, expected: list[tuple[str, int, str, bool]]
) -> None:
    entries = traffic_targets("chat", "engine", "e2", "e1", weight, "kv-v1", completed)
    assert [(e.revision_name, e.percent, e.tag, e.latest_revision) for e in entries] == expected
    assert all(e.pairing_protocol == "kv-v1" for e in entries)


def test_status_of_a_fresh_canary() -> None:
    status = fresh().to_status("chat")
    assert status["rolloutPhase"] == "Pending"
    assert status["canary"] == {
        "targetID": "run-7",
        "canaryRevisionHash": "e2",
        "stableRevisionHash": "e1",
        "currentStep": 0,
        "observedTrafficWeight": 0,
        "preStepHold": False,
        "analysisFailedChecks": 0,
        "metricResults": [],
        "capacityWaitSince": "2026-12-01T12:00:00Z",
    }
    assert status["traffic"] == [
        {"revisionName": "chat-engine-rev-e1", "percent": 100, "tag": "stable", "latestRevision": False}
    ]
    ComponentStatus.model_validate(status)


def test_status_carries_failure_results_and_clears_stable_on_completion() -> None:
    result: dict[str, Any] = {
        "name": "errors",
        "value": "",
        "threshold": "0.01",
        "operator": "LT",
        "message": "no data",
    }
    failed = replace(
        fresh(), phase="Failed", failed=Failure("CapacityTimeout", at(900)), metric_results=(result,)
    )
    status = failed.to_status("chat")
    assert status["canary"]["failed"] == {"reason": "CapacityTimeout", "time": "2026-12-01T12:15:00Z"}
    assert status["canary"]["metricResults"][0]["message"] == "no data"
    done = replace(fresh(), phase="Stable", current_step=2, observed_traffic_weight=100).to_status("chat")
    assert "stableRevisionHash" not in done["canary"]
    assert done["traffic"] == [
        {"revisionName": "chat-engine-rev-e2", "percent": 100, "tag": "stable", "latestRevision": True}
    ]


def test_state_survives_continue_as_new_through_pydantic() -> None:
    adapter = TypeAdapter(CanaryState)
    state = replace(
        fresh(),
        failed=Failure("AnalysisStalled", at(5)),
        metric_results=({"name": "errors", "passed": True},),
        mailbox=Mailbox(promote=PromoteRequest("e2", True, "p1"), rollback=RollbackRequest("r1")),
        last_verdict="Fail",
    )
    assert adapter.validate_json(adapter.dump_json(state)) == state
