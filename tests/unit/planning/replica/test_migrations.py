"""Migrations as the InferenceReplica carries them out, up to the replacement's start: every
wait, failure and event of an Accepted request and the rate cap in `plan_migrations`, verbatim
from reference §13 (and §9, §10); from the start on: tests/unit/planning/replica/test_migration_surges.py."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from models.instance import InstancePhase
from models.migration import MigrationAudit, MigrationPhase
from planning.replica.events import PlannedEvent
from planning.replica.facts import InstanceFacts
from planning.replica.migrations import (
    MODE_NEVER_MESSAGE,
    NO_DEADLINE_MESSAGE,
    POLICY_UNCONFIGURED_WAIT,
    MigrationTicket,
)
from tests.unit.planning.replica.migration_tickets import (
    AUDIT,
    BEGAN_AT,
    DEADLINE,
    OLDER,
    PAIR,
    P,
    ended,
    of,
    plan,
    ticket,
    warning,
)
from tests.unit.planning.replica.rows import NOW, creating, deleting, failed, ready, updating

pytestmark = pytest.mark.unit

# --- Accepted: the waits -------------------------------------------------------------------


WAITS: list[Any] = [
    pytest.param(
        [ticket("m0", 0, "node-b", accepted_at=OLDER, phase=P.SURGE_PENDING, surge_instance=2, began_at=BEGAN_AT),
         ticket()],
        (*PAIR, creating(2)),
        {},
        "waiting for migration m0 (instance=0) to finish",
        id="another migration surging",
    ),
    pytest.param(
        [ticket("m0", 0, "node-b", accepted_at=OLDER, phase=P.DRAINING, surge_instance=2, began_at=BEGAN_AT),
         ticket()],
        (*PAIR, ready(2)),
        {},
        "waiting for migration m0 (instance=0) to finish",
        id="another migration draining",
    ),
    pytest.param(
        [ticket("m0", 0, "node-b", accepted_at=OLDER), ticket()],
        (failed(0), ready(1)),
        {},
        "waiting behind migration m0 (one migration per component, oldest first)",
        id="an older migration still waits",
    ),
    pytest.param(
        [ticket(), ticket("m0", 0, "node-b")],
        PAIR,
        {},
        "waiting for migration m0 (instance=0) to finish",
        id="same acceptance time: the lower uuid starts first",
    ),
    pytest.param(
        [ticket("m0", 0, "node-b", accepted_at=OLDER, audit=None), ticket()],
        PAIR,
        {},
        "waiting behind migration m0 (one migration per component, oldest first)",
        id="an older migration waiting for caps",
    ),
    pytest.param(
        [ticket()], PAIR, {"paused": True},
        "waiting while the component is paused (the deadline keeps running)",
        id="paused",
    ),
    pytest.param(
        [ticket()], PAIR, {"update_surge_in_flight": True},
        "waiting for the update surge in flight to finish",
        id="update surge in flight",
    ),
    pytest.param(
        [ticket()], (ready(0), updating(1)), {},
        "waiting for instance=1 to finish its Update operation",
        id="source updating",
    ),
    pytest.param(
        [ticket()], (ready(0), ready(1, operation="Restart")), {},
        "waiting for instance=1 to finish its Restart operation",
        id="source has an operation",
    ),
    pytest.param(
        [ticket()], (ready(0), InstanceFacts(index=1, phase=InstancePhase.RESTARTING)), {},
        "waiting for instance=1 to finish its Restarting operation",
        id="source in flight without an operation",
    ),
    pytest.param(
        [ticket()], (ready(0), failed(1)), {},
        "waiting for instance=1 to be Ready (phase=Failed)",
        id="source Failed",
    ),
    pytest.param(
        [ticket()], (ready(0), InstanceFacts(index=1, phase=InstancePhase.PENDING, has_pods=False)), {},
        "waiting for instance=1 to be Ready (phase=Pending)",
        id="source Pending",
    ),
    pytest.param(
        [ticket()], (ready(0), ready(1, ready=False, serving=False)), {},
        "waiting for instance=1 to be Ready (phase=Ready)",
        id="source Ready but its pods are not",
    ),
    pytest.param(
        [ticket()], PAIR, {"nodes": {0: ("node-b",)}},
        "waiting for instance=1 to have its pods scheduled",
        id="source not reported on a node",
    ),
    pytest.param(
        [ticket()], PAIR, {"nodes": {0: ("node-b",), 1: ()}},
        "waiting for instance=1 to have its pods scheduled",
        id="source unscheduled",
    ),
    pytest.param(
        [ticket(audit=None)], PAIR, {"paused": True},
        POLICY_UNCONFIGURED_WAIT,
        id="caps unconfigured",
    ),
]


@pytest.mark.parametrize(("tickets", "instances", "context", "message"), WAITS)
def test_accepted_waits(
    tickets: list[MigrationTicket], instances: Sequence[InstanceFacts], context: dict[str, Any], message: str
) -> None:
    result = plan(tickets, instances, **context)
    waiting = of(result)
    assert waiting.phase == P.ACCEPTED
    assert waiting.message == message
    assert waiting.failure_reason is None and waiting.ended_at is None and waiting.began_at is None
    assert result.start is None or result.start.uuid != "m1"
    assert not [e for e in result.events if "uuid=m1 " in e.message and e.reason != "MigrationPolicyUnconfigured"]
    assert result.wake_at == DEADLINE  # the deadline runs while it waits


def test_waits_text_is_exact() -> None:
    assert POLICY_UNCONFIGURED_WAIT == "waiting for migration capacity policy (no lifecycle.audit configured)"


def test_unconfigured_caps_warn_once_then_wait_until_configured() -> None:
    first = plan([ticket(audit=None)])
    assert of(first).message == "waiting for migration capacity policy (no lifecycle.audit configured)"
    assert first.events == (
        warning("MigrationPolicyUnconfigured", "waiting for migration capacity policy (no lifecycle.audit configured)"),
    )
    assert of(first).warned == ("MigrationPolicyUnconfigured",)
    assert first.start is None

    second = plan(first.tickets)
    assert second.events == ()
    assert of(second) == of(first)

    # An operator configures the caps: the next pass starts the replacement.
    third = plan([replace(of(second), audit=AUDIT)])
    assert of(third).phase == P.SURGE_PENDING
    assert third.start is not None and third.start.index == 2


# --- Accepted: the failures ----------------------------------------------------------------

FAILURES: list[Any] = [
    pytest.param(
        ticket(), PAIR, {"mode": "Never"},
        "MigrationRequestRejected", "migrations disabled by MigrationPolicy Mode=Never",
        id="mode Never",
    ),
    pytest.param(
        ticket(audit=None, deadline=None), PAIR, {"mode": "Never", "paused": True},
        "MigrationRequestRejected", MODE_NEVER_MESSAGE,
        id="mode Never before anything else",
    ),
    pytest.param(
        ticket(instance=7), PAIR, {},
        "MigrationRequestRejected", "instance=7 of component=engine does not exist or is being deleted",
        id="no such instance",
    ),
    pytest.param(
        ticket(), (ready(0), deleting(1)), {},
        "MigrationRequestRejected", "instance=1 of component=engine does not exist or is being deleted",
        id="source being deleted",
    ),
    pytest.param(
        ticket(deadline=None), PAIR, {},
        "MigrationExpired", "deadline exceeded in phase Accepted: surge never allocated",
        id="no instanceReadyTimeout",
    ),
    pytest.param(
        ticket(deadline=None, audit=None), PAIR, {"paused": True},
        "MigrationExpired", NO_DEADLINE_MESSAGE,
        id="no instanceReadyTimeout, even while waiting",
    ),
    pytest.param(
        ticket(), PAIR, {"now": DEADLINE},
        "MigrationExpired", "deadline exceeded in phase Accepted: surge never allocated",
        id="deadline reached in Accepted",
    ),
    pytest.param(
        ticket(), PAIR, {"now": DEADLINE + timedelta(seconds=1), "paused": True},
        "MigrationExpired", "deadline exceeded in phase Accepted: surge never allocated",
        id="deadline passes while paused",
    ),
    pytest.param(
        ticket(audit=None), PAIR, {"now": DEADLINE},
        "MigrationExpired", "deadline exceeded in phase Accepted: surge never allocated",
        id="deadline passes while waiting for caps",
    ),
    pytest.param(
        ticket(from_node="node-x"), PAIR, {},
        "MigrationFromNodeMismatch", "request.FromNode=node-x does not match observed source node=node-a",
        id="from_node mismatch",
    ),
    pytest.param(
        ticket(from_node="node-x"), PAIR, {"nodes": {1: ("node-c", "node-b", "node-c")}},
        "MigrationFromNodeMismatch", "request.FromNode=node-x does not match observed source node=node-b,node-c",
        id="from_node mismatch, a gang on two nodes",
    ),
    pytest.param(
        ticket(hint_target_nodes=("node-a",)), PAIR, {},
        "MigrationNodeAffinityConflict",
        "hint_target_nodes ['node-a'] name only the source node node-a; the replacement must run on another node",
        id="hints name only the source node",
    ),
]


@pytest.mark.parametrize(("request_ticket", "instances", "context", "reason", "message"), FAILURES)
def test_accepted_failures(
    request_ticket: MigrationTicket,
    instances: Sequence[InstanceFacts],
    context: dict[str, Any],
    reason: str,
    message: str,
) -> None:
    result = plan([request_ticket], instances, **context)
    failed_ticket = of(result)
    assert failed_ticket.phase == P.FAILED
    assert (failed_ticket.failure_reason, failed_ticket.message) == (reason, message)
    assert failed_ticket.ended_at == context.get("now", NOW)
    assert result.events == (
        PlannedEvent("Warning", reason, f"OMENative migration uuid=m1 component=engine instance="
                                        f"{request_ticket.instance}: {message}", on_isvc=True),
    )
    assert result.start is None and result.delete == () and result.drain == ()
    assert result.wake_at is None


def test_a_failed_older_request_lets_the_next_one_start_in_the_same_pass() -> None:
    result = plan([ticket("m0", 0, "node-x", accepted_at=OLDER), ticket()])
    assert of(result, "m0").failure_reason == "MigrationFromNodeMismatch"
    assert of(result).phase == P.SURGE_PENDING
    assert result.start is not None and result.start.uuid == "m1"


# --- The rate cap --------------------------------------------------------------------------


def begun(count: int, ago: timedelta = timedelta(minutes=30), phase: MigrationPhase = P.COMPLETED) -> list[MigrationTicket]:
    return [ended(f"done-{n}", NOW - ago, phase) for n in range(count)]


RATE: list[Any] = [
    pytest.param(begun(10), AUDIT, "migration rate cap reached (10/10 in the last 1h0m0s)", id="chart caps: 10 in 1h"),
    pytest.param(
        begun(6) + begun(4, phase=P.FAILED)[:4], AUDIT,
        "migration rate cap reached (10/10 in the last 1h0m0s)", id="failed surges count too",
    ),
    pytest.param(
        begun(1), MigrationAudit(max_migrations_per_window=1, window_seconds=3600),
        "migration rate cap reached (1/1 in the last 1h0m0s)", id="cap 1",
    ),
    pytest.param(
        begun(2, timedelta(minutes=10)), MigrationAudit(max_migrations_per_window=2, window_seconds=1800),
        "migration rate cap reached (2/2 in the last 30m0s)", id="30m window",
    ),
    pytest.param(begun(9), AUDIT, None, id="9 of 10: starts"),
    pytest.param(begun(9) + begun(1, timedelta(hours=1)), AUDIT, None, id="one begun a window ago: outside"),
    pytest.param(begun(9) + begun(3, timedelta(hours=2)), AUDIT, None, id="older ones do not count"),
    pytest.param(
        begun(9) + [ended(f"never-{n}", None, P.FAILED) for n in range(5)], AUDIT, None,
        id="failed before beginning: not counted",
    ),
    pytest.param(
        begun(2, timedelta(minutes=40)), MigrationAudit(max_migrations_per_window=2, window_seconds=1800), None,
        id="30m window: 40 minutes ago is outside",
    ),
]


@pytest.mark.parametrize(("history", "audit", "message"), RATE)
def test_rate_cap(history: list[MigrationTicket], audit: MigrationAudit, message: str | None) -> None:
    result = plan([*history, ticket(audit=audit)])
    current = of(result)
    if message is None:
        assert current.phase == P.SURGE_PENDING
        assert result.start is not None
        return
    assert current.phase == P.FAILED
    assert (current.failure_reason, current.message) == ("RateLimited", message)
    assert result.events == (warning("RateLimited", message),)
    assert result.start is None
