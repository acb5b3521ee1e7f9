"""Migration tickets as the planner and view tests build them: `m1` moves instance 1 off
node-a, accepted five minutes before `NOW` with a 30m deadline; `plan` runs `plan_migrations`
over them and the pair of Instances `PAIR`."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from models.migration import MigrationAudit, MigrationPhase
from planning.replica.events import PlannedEvent
from planning.replica.facts import InstanceFacts
from planning.replica.migrations import MigrationContext, MigrationPlan, MigrationTicket, plan_migrations
from tests.unit.planning.replica.rows import NOW, OLD, ready

P = MigrationPhase
ACCEPTED_AT = NOW - timedelta(minutes=5)
DEADLINE = ACCEPTED_AT + timedelta(minutes=30)
BEGAN_AT = NOW - timedelta(minutes=2)
OLDER = ACCEPTED_AT - timedelta(minutes=1)
"""An earlier request's acceptance."""
AUDIT = MigrationAudit()


def ticket(uuid: str = "m1", instance: int = 1, from_node: str = "node-a", **extra: Any) -> MigrationTicket:
    """A request to move `instance` off `from_node`, accepted five minutes ago, 30m deadline."""
    fields: dict[str, Any] = {
        "uuid": uuid,
        "instance": instance,
        "from_node": from_node,
        "accepted_at": ACCEPTED_AT,
        "deadline": DEADLINE,
        "audit": AUDIT,
        "workflow_id": f"migration/ns/qwen3-0-6b-engine-{instance}/{uuid}",
    }
    fields.update(extra)
    return MigrationTicket(**fields)


def moving(phase: MigrationPhase = P.SURGE_PENDING, **extra: Any) -> MigrationTicket:
    """`m1`: instance 1 moving off node-a to surge instance 2."""
    fields: dict[str, Any] = {"phase": phase, "surge_instance": 2, "revision": OLD, "began_at": BEGAN_AT}
    fields.update(extra)
    return ticket(**fields)


SUBJECT = "OMENative migration uuid=m1 component=engine instance=1: "
SURGE_POD = "qwen3-0-6b-engine-2-default-0"

def ended(uuid: str, began_at: datetime | None, phase: MigrationPhase = P.COMPLETED, **extra: Any) -> MigrationTicket:
    """An ended migration of instance 0 (which still runs here), begun at `began_at`."""
    fields: dict[str, Any] = {
        "instance": 0,
        "from_node": "node-b",
        "accepted_at": ACCEPTED_AT - timedelta(hours=2),
        "phase": phase,
        "began_at": began_at,
        "surge_instance": 9 if began_at is not None else None,
        "ended_at": began_at or ACCEPTED_AT - timedelta(hours=2),
    }
    fields.update(extra)
    return ticket(uuid, **fields)


NODES: dict[int, tuple[str, ...]] = {0: ("node-b",), 1: ("node-a",), 2: ("node-c",)}
PAIR = (ready(0), ready(1))


def plan(
    tickets: Sequence[MigrationTicket],
    instances: Sequence[InstanceFacts] = PAIR,
    **context: Any,
) -> MigrationPlan:
    fields: dict[str, Any] = {"component": "engine", "now": NOW, "nodes": NODES}
    fields.update(context)
    return plan_migrations(tickets, instances, MigrationContext(**fields))


def of(result: MigrationPlan, uuid: str = "m1") -> MigrationTicket:
    return next(t for t in result.tickets if t.uuid == uuid)


def warning(reason: str, message: str) -> PlannedEvent:
    return PlannedEvent("Warning", reason, SUBJECT + message, on_isvc=True)
