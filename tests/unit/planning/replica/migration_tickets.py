"""Migration tickets as the planner and view tests build them: `m1` moves instance 1 off
node-a, accepted five minutes before `NOW` with a 30m deadline."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from models.migration import MigrationAudit, MigrationPhase
from planning.replica.migrations import MigrationTicket
from tests.unit.planning.replica.rows import NOW, OLD

P = MigrationPhase
ACCEPTED_AT = NOW - timedelta(minutes=5)
DEADLINE = ACCEPTED_AT + timedelta(minutes=30)
BEGAN_AT = NOW - timedelta(minutes=2)
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
