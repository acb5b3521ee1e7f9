"""How migrations show: in the rows the InferenceReplica's rules read, in its status, and in
the pod spec of a replacement (spec reference §8, §9, §13).

The decisions are `planning.replica.migrations`; this module only projects its tickets:
`with_migrations` (a pair counts once, the source is busy), `migration_rows` and
`migration_records` (`status.instanceStatuses`, `status.migrations`), `policy_condition`
(`MigrationPolicyUnconfigured`), and `placed_away` (a replacement kept off a node).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from models.duration import format_duration
from models.inferencereplica import InstanceRow, MigrationRecord, OperationRow
from models.instance import InstancePhase
from models.migration import MigrationPhase
from planning.replica.conditions import PlannedCondition
from planning.replica.facts import InstanceFacts
from planning.replica.migrations import MigrationTicket


def with_migrations(facts: Sequence[InstanceFacts], tickets: Sequence[MigrationTicket]) -> list[InstanceFacts]:
    """The rows as the rules read them while migrations move Instances: the replacement
    carries `replaces` (the pair counts once), the source shows `Migrating` with the
    operation `Migrate` (nothing else starts on it)."""
    sources: dict[int, int] = {}
    for ticket in tickets:
        if ticket.moving and ticket.surge_instance is not None:
            sources[ticket.instance] = ticket.surge_instance
    surges = {surge: source for source, surge in sources.items()}
    rows: list[InstanceFacts] = []
    for fact in facts:
        if fact.index in surges and fact.replaces is None:
            fact = replace(fact, replaces=surges[fact.index])
        if fact.index in sources and not fact.deleting and fact.operation is None:
            fact = replace(fact, phase=InstancePhase.MIGRATING, operation="Migrate")
        rows.append(fact)
    return rows


def placed_away(pod_spec: dict[str, Any], avoid_node: str, on_nodes: Sequence[str] = ()) -> dict[str, Any]:
    """`pod_spec` kept off `avoid_node` (and on `on_nodes` when given): a required node
    affinity on `metadata.name`, ANDed into every term the component already requires."""
    fields: list[dict[str, Any]] = [{"key": "metadata.name", "operator": "NotIn", "values": [avoid_node]}]
    if on_nodes:
        fields.append({"key": "metadata.name", "operator": "In", "values": sorted(on_nodes)})
    spec = copy.deepcopy(pod_spec)
    node_affinity = spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
    required = node_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.get("nodeSelectorTerms") or [{}]
    required["nodeSelectorTerms"] = [
        {**term, "matchFields": [*term.get("matchFields", []), *fields]} for term in terms
    ]
    return spec


def migration_rows(rows: Sequence[InstanceRow], tickets: Sequence[MigrationTicket]) -> list[InstanceRow]:
    """Status rows with each moving source shown `Migrating`, operation `Migrate` /
    `CreateSurge` (§9), its deadline the migration's; the source's own workflow knows
    nothing of the migration."""
    moving = {ticket.instance: ticket for ticket in tickets if ticket.moving}
    shown: list[InstanceRow] = []
    for row in rows:
        ticket = moving.get(row.index)
        if ticket is None or row.operation is not None or row.phase != InstancePhase.READY.value:
            shown.append(row)
            continue
        operation = OperationRow(
            id=f"migration-{ticket.uuid}",
            type="Migrate",
            step="CreateSurge",
            started_at=ticket.began_at,
            deadline=ticket.deadline,
        )
        shown.append(row.model_copy(update={"phase": InstancePhase.MIGRATING.value, "operation": operation}))
    return shown


def migration_records(tickets: Sequence[MigrationTicket]) -> list[MigrationRecord]:
    """`status.migrations`: every listed migration, oldest first."""
    return [
        MigrationRecord(
            uuid=ticket.uuid,
            instance=ticket.instance,
            from_node=ticket.from_node,
            phase=ticket.phase.value,
            surge_instance=ticket.surge_instance,
            message=ticket.message,
            accepted_at=ticket.accepted_at,
        )
        for ticket in sorted(tickets, key=lambda t: (t.accepted_at, t.uuid))
    ]


def policy_condition(tickets: Sequence[MigrationTicket]) -> PlannedCondition | None:
    """`MigrationPolicyUnconfigured` (§8) from the caps the newest request brought; None
    before any migration was requested (the caps are the worker's, learnt with a request)."""
    # Relocations are the InferenceReplica's own moves: they carry no caps.
    requested = [t for t in tickets if t.phase != MigrationPhase.RELOCATED]
    if not requested:
        return None
    newest = max(requested, key=lambda t: (t.accepted_at, t.uuid))
    if newest.audit is None:
        return PlannedCondition(
            "MigrationPolicyUnconfigured",
            "True",
            "MigrationCapacityUnconfigured",
            "no lifecycle.audit caps are configured, so migrations wait in Accepted; set "
            "OME_MIGRATION__MAX_MIGRATIONS_PER_WINDOW and OME_MIGRATION__WINDOW on the worker",
        )
    audit = newest.audit
    return PlannedCondition(
        "MigrationPolicyUnconfigured",
        "False",
        "MigrationCapacityConfigured",
        f"at most {audit.max_migrations_per_window} migrations per {format_duration(audit.window_seconds)}",
    )
