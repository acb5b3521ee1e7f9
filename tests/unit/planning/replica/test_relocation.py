"""Automatic relocation (reference §13): which failed Instances move off their node, the
attempts and nodes kept, the Events and the `Relocated` rows of `plan_relocations`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from models.instance import InstanceFailure, InstanceOperation, InstancePhase, InstanceStatus
from models.migration import MigrationPhase
from planning.replica.migration_views import migration_records
from planning.replica.migrations import retained
from planning.replica.relocation import (
    WORKLOAD_REASONS,
    Relocation,
    RelocationContext,
    avoided,
    plan_relocations,
    relocatable,
)

pytestmark = pytest.mark.unit

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
FAILED_AT = NOW - timedelta(seconds=3)
OLD, NEW = "aaaaaaaa", "bbbbbbbb"
SUBJECT = "OMENative auto-migration component=engine instance=0"


def failure(reason: str = "DeadlineExceeded", operation: Any = "Create", nodes: tuple[str, ...] = ("node-a",),
            at: datetime = FAILED_AT) -> InstanceFailure:
    return InstanceFailure(reason=reason, operation=operation, node_names=list(nodes), time=at)


def status(phase: InstancePhase = InstancePhase.FAILED, last: InstanceFailure | None = None,
           running: str | None = None, target: str = NEW, pods: int = 1, index: int = 0,
           **extra: Any) -> InstanceStatus:
    return InstanceStatus(
        namespace="ns", isvc="chat", component="engine", index=index, phase=phase, incarnation=1,
        running_revision=running, target_revision=target, desired_pods=pods, last_failure=last, **extra,
    )


def ctx(**extra: Any) -> RelocationContext:
    return RelocationContext(component="engine", now=NOW, **extra)


def plan_one(report: InstanceStatus, kept: dict[int, Relocation] | None = None, **context: Any) -> Any:
    return plan_relocations({report.index: report}, kept or {}, ctx(**context))


@pytest.mark.parametrize(
    ("report", "moves"),
    [
        pytest.param(status(last=failure()), True, id="new Instance timed out"),
        pytest.param(status(last=failure("ContainersNotReady")), True, id="containers never ready"),
        pytest.param(status(last=failure("ReadinessGateNotSatisfied")), True, id="gate never true"),
        pytest.param(status(last=failure("NodeLost")), True, id="node lost"),
        pytest.param(status(last=failure(nodes=("node-a", "node-a"))), True, id="two pods, one node"),
        pytest.param(status(last=failure(), running=NEW), True, id="rebuild of a failed Instance"),
        pytest.param(status(last=failure(operation="Update"), running=OLD), True, id="RecreatePod update failed"),
        pytest.param(status(InstancePhase.READY, failure(operation="Update"), running=OLD), True,
                     id="SurgeThenDrain rests Ready on the old pod"),
        pytest.param(status(last=failure(operation="Update"), running=OLD, pods=2), False,
                     id="multi-pod update"),
        pytest.param(status(last=failure(nodes=("node-a", "node-b")), pods=2), False, id="pods on two nodes"),
        pytest.param(status(last=failure(nodes=())), False, id="no pod scheduled"),
        pytest.param(status(last=failure("Unschedulable", nodes=())), False, id="unschedulable"),
        pytest.param(status(last=failure(operation="Restart"), running=NEW), False, id="restart failed"),
        pytest.param(status(last=failure(operation=None), running=NEW), False, id="old report, no operation"),
        pytest.param(status(InstancePhase.READY, failure(), running=NEW, target=NEW), False,
                     id="recovered since"),
        pytest.param(status(InstancePhase.CREATING, failure(),
                            operation=InstanceOperation(id="create-2", type="Create", step="CreatePods",
                                                        started_at=NOW)),
                     False, id="already rebuilding"),
        pytest.param(status(last=failure(), deleted=True), False, id="deleted"),
        pytest.param(status(last=None), False, id="no failure"),
    ],
)
def test_what_may_be_relocated(report: InstanceStatus, moves: bool) -> None:
    assert (relocatable(report) is not None) is moves
    assert bool(plan_one(report).moves) is moves


@pytest.mark.parametrize("reason", sorted(WORKLOAD_REASONS))
def test_a_workload_caused_failure_is_never_relocated(reason: str) -> None:
    plan = plan_one(status(last=failure(reason)))
    assert not plan.acts and plan.relocations == {}


def test_a_relocation_restarts_a_failed_instance_off_its_node_and_records_it() -> None:
    plan = plan_one(status(last=failure()))
    (move,) = plan.moves
    assert (move.index, move.node, move.avoid, move.revision, move.restart, move.attempt) == (
        0, "node-a", ("node-a",), NEW, True, 1,
    )
    assert plan.relocations == {0: Relocation(attempts=1, left_nodes=("node-a",), seen_failure_at=FAILED_AT)}
    assert [(e.type, e.reason, e.message, e.on_isvc) for e in plan.events] == [
        ("Normal", "AutoMigrationTriggered",
         f"{SUBJECT}: relocated off node node-a after DeadlineExceeded (attempt 1/3; avoiding node-a)", True),
    ]
    (ticket,) = plan.tickets
    assert (ticket.phase, ticket.instance, ticket.from_node, ticket.ended_at, ticket.active) == (
        MigrationPhase.RELOCATED, 0, "node-a", NOW, False,
    )
    (row,) = migration_records(plan.tickets)
    assert (row.phase, row.instance, row.from_node, row.surge_instance) == ("Relocated", 0, "node-a", None)
    assert row.message == "relocated off node node-a after DeadlineExceeded (attempt 1/3; avoiding node-a)"
    # Listed for the retention window like an ended migration (one hour without audit caps).
    assert retained(plan.tickets, NOW + timedelta(minutes=59)) == list(plan.tickets)
    assert retained(plan.tickets, NOW + timedelta(hours=1)) == []


def test_a_failed_surge_update_takes_the_placed_spec_on_its_next_attempt_without_a_restart() -> None:
    (move,) = plan_one(status(InstancePhase.READY, failure(operation="Update"), running=OLD)).moves
    assert not move.restart


def test_each_failure_is_decided_once() -> None:
    first = plan_one(status(last=failure()))
    again = plan_one(status(last=failure()), first.relocations)
    assert not again.acts and again.relocations == first.relocations


def test_later_relocations_avoid_every_node_left_until_the_cap() -> None:
    kept = {0: Relocation(attempts=1, left_nodes=("node-a",), seen_failure_at=FAILED_AT)}
    later = FAILED_AT + timedelta(minutes=1)
    plan = plan_one(status(last=failure(nodes=("node-b",), at=later)), kept)
    (move,) = plan.moves
    assert (move.node, move.avoid, move.attempt) == ("node-b", ("node-a", "node-b"), 2)
    assert avoided(plan.relocations, 0) == ("node-a", "node-b")
    assert plan.events[0].message.endswith("(attempt 2/3; avoiding node-a, node-b)")
    # Back on a node left before (it came back): it moves to the end of the list, not twice.
    kept = {0: Relocation(attempts=2, left_nodes=("node-a", "node-b"), seen_failure_at=FAILED_AT)}
    (move,) = plan_one(status(last=failure(nodes=("node-a",), at=later)), kept).moves
    assert move.avoid == ("node-b", "node-a")


def test_out_of_attempts_warns_once_and_moves_nothing() -> None:
    kept = {0: Relocation(attempts=1, left_nodes=("node-a",), seen_failure_at=FAILED_AT)}
    later = FAILED_AT + timedelta(minutes=1)
    plan = plan_one(status(last=failure(nodes=("node-b",), at=later)), kept, max_attempts=1)
    assert not plan.moves and not plan.tickets
    assert [(e.type, e.reason, e.message) for e in plan.events] == [
        ("Warning", "AutoMigrationCapReached",
         f"{SUBJECT}: not relocated off node node-b after DeadlineExceeded: 1/1 attempts used "
         "(autoMigrate.maxAttempts)"),
    ]
    assert plan.relocations[0] == Relocation(attempts=1, left_nodes=("node-a",), seen_failure_at=later,
                                             cap_warned=True)
    again = plan_one(status(last=failure(nodes=("node-b",), at=later + timedelta(minutes=2))), plan.relocations,
                     max_attempts=1)
    assert not again.acts
    # The nodes left before are still avoided.
    assert avoided(again.relocations, 0) == ("node-a",)


@pytest.mark.parametrize(
    "context",
    [
        pytest.param({"max_attempts": None}, id="autoMigrate unset"),
        pytest.param({"mode": "Never"}, id="migrationPolicy Never"),
        pytest.param({"frozen": True}, id="paused at Freeze"),
        pytest.param({"excluded": {0}}, id="removed, or a replacement"),
    ],
)
def test_nothing_relocates_when_off(context: dict[str, Any]) -> None:
    assert not plan_one(status(last=failure()), **context).acts


@pytest.mark.parametrize("mode", ["Auto", "Surge"])
def test_auto_and_surge_relocate(mode: str) -> None:
    assert plan_one(status(last=failure()), mode=mode).moves


def test_attempts_are_forgotten_once_ready_on_target_or_gone() -> None:
    kept = {
        0: Relocation(attempts=2, left_nodes=("node-a", "node-b")),
        1: Relocation(attempts=1, left_nodes=("node-a",)),
        2: Relocation(attempts=1, left_nodes=("node-c",)),
        3: Relocation(attempts=1, left_nodes=("node-d",)),
    }
    reports = {
        0: status(index=0, phase=InstancePhase.READY, running=NEW),
        1: status(index=1, phase=InstancePhase.CREATING, running=None),
        # Ready on the old pod while its update is retried: not settled.
        3: status(index=3, phase=InstancePhase.READY, running=OLD),
    }
    plan = plan_relocations(reports, kept, ctx())
    assert set(plan.relocations) == {1, 3}


def test_several_instances_in_one_pass_in_index_order() -> None:
    reports = {
        2: status(index=2, last=failure(nodes=("node-b",))),
        0: status(index=0, last=failure(nodes=("node-a",))),
        1: status(index=1, last=failure("ImagePullBackOff")),
    }
    plan = plan_relocations(reports, {}, ctx())
    assert [(m.index, m.node) for m in plan.moves] == [(0, "node-a"), (2, "node-b")]
    assert len({t.uuid for t in plan.tickets}) == 2
