"""How migrations show (`planning.replica.migration_views`): the rows the other rules read,
the status rows and records, a replacement's placement, the MigrationPolicyUnconfigured condition."""

from __future__ import annotations

import copy
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from models.inferencereplica import InstanceRow, MigrationRecord, OperationRow
from models.instance import InstancePhase
from models.migration import MigrationAudit
from planning.replica.facts import InstanceFacts
from planning.replica.migration_views import (
    migration_records,
    migration_rows,
    placed_away,
    policy_condition,
    with_migrations,
)
from planning.replica.migrations import (
    MigrationTicket,
)
from planning.replica.update import counted
from tests.unit.planning.replica.migration_tickets import (
    ACCEPTED_AT,
    BEGAN_AT,
    DEADLINE,
    P,
    moving,
    ticket,
)
from tests.unit.planning.replica.rows import NOW, creating, deleting, ready, updating

pytestmark = pytest.mark.unit


# --- How the other rules see a migration in flight -----------------------------------------


def test_with_migrations_counts_the_pair_once_and_marks_the_source() -> None:
    facts = [ready(0), ready(1), creating(2)]
    assert [f.index for f in counted(facts)] == [0, 1, 2]
    shown = with_migrations(facts, [moving()])
    assert [f.index for f in counted(shown)] == [0, 1]
    source = shown[1]
    assert (source.phase, source.operation) == (InstancePhase.MIGRATING, "Migrate")
    assert not source.at_rest
    assert shown[2].replaces == 1
    assert shown[0] == facts[0]


@pytest.mark.parametrize(
    ("tickets", "facts"),
    [
        pytest.param([ticket()], [ready(0), ready(1), creating(2)], id="accepted: nothing moves yet"),
        pytest.param([moving(P.COMPLETED)], [ready(0), ready(2)], id="ended"),
        pytest.param([moving(P.FAILED)], [ready(0), ready(1), deleting(2)], id="failed"),
        pytest.param([moving()], [ready(0), deleting(1), creating(2, replaces=1)], id="source deleting, surge marked"),
        pytest.param([moving()], [ready(0), updating(1), creating(2, replaces=1)], id="source has its own operation"),
    ],
)
def test_with_migrations_leaves_rows_alone(tickets: list[MigrationTicket], facts: list[InstanceFacts]) -> None:
    assert with_migrations(facts, tickets) == facts


def row(index: int, phase: InstancePhase = InstancePhase.READY, **extra: Any) -> InstanceRow:
    return InstanceRow(index=index, phase=phase, **extra)


def test_migration_rows_show_the_moving_source() -> None:
    rows = [row(0), row(1), row(2, InstancePhase.CREATING)]
    shown = migration_rows(rows, [moving()])
    assert shown[0] == rows[0] and shown[2] == rows[2]
    assert shown[1].phase == InstancePhase.MIGRATING
    assert shown[1].operation == OperationRow(
        id="migration-m1", type="Migrate", step="CreateSurge", started_at=BEGAN_AT, deadline=DEADLINE
    )
    assert rows[1].phase == InstancePhase.READY and rows[1].operation is None  # input untouched


@pytest.mark.parametrize(
    ("tickets", "source"),
    [
        pytest.param([ticket()], row(1), id="accepted"),
        pytest.param([moving(P.COMPLETED)], row(1), id="ended"),
        pytest.param([moving()], row(1, InstancePhase.DELETING), id="source not Ready"),
        pytest.param([moving()], row(1, operation=OperationRow(id="op", type="Delete", step="Drain")),
                     id="source has its own operation"),
    ],
)
def test_migration_rows_leave_other_rows(tickets: list[MigrationTicket], source: InstanceRow) -> None:
    assert migration_rows([row(0), source], tickets) == [row(0), source]


def test_migration_records_oldest_first() -> None:
    newer = replace(moving(), accepted_at=ACCEPTED_AT + timedelta(minutes=1))
    older = ticket("m0", 0, "node-b", message="waiting")
    assert migration_records([newer, older]) == [
        MigrationRecord(uuid="m0", instance=0, from_node="node-b", phase="Accepted", message="waiting",
                        accepted_at=ACCEPTED_AT),
        MigrationRecord(uuid="m1", instance=1, from_node="node-a", phase="SurgePending", surge_instance=2,
                        accepted_at=ACCEPTED_AT + timedelta(minutes=1)),
    ]


# --- Placement of the replacement ----------------------------------------------------------

NOT_IN = {"key": "metadata.name", "operator": "NotIn", "values": ["node-a"]}


def terms(spec: dict[str, Any]) -> list[dict[str, Any]]:
    affinity = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    return list(affinity["nodeSelectorTerms"])


def test_placed_away_on_a_bare_spec() -> None:
    spec = {"containers": [{"name": "engine"}]}
    placed = placed_away(spec, "node-a")
    assert terms(placed) == [{"matchFields": [NOT_IN]}]
    assert placed["containers"] == spec["containers"]
    assert spec == {"containers": [{"name": "engine"}]}


def test_placed_away_on_hinted_nodes() -> None:
    placed = placed_away({}, "node-a", ["node-d", "node-c"])
    assert terms(placed) == [
        {"matchFields": [NOT_IN, {"key": "metadata.name", "operator": "In", "values": ["node-c", "node-d"]}]}
    ]


def test_placed_away_is_anded_into_every_existing_term_and_mutates_nothing() -> None:
    gpu = {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["H100"]}
    zone = {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["z1"]}
    pinned = {"key": "metadata.name", "operator": "NotIn", "values": ["node-z"]}
    preferred = [{"weight": 1, "preference": {"matchExpressions": [zone]}}]
    spec = {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [gpu]}, {"matchExpressions": [zone], "matchFields": [pinned]}]
                },
                "preferredDuringSchedulingIgnoredDuringExecution": preferred,
            },
            "podAntiAffinity": {"x": 1},
        }
    }
    before = copy.deepcopy(spec)
    placed = placed_away(spec, "node-a", ["node-b"])
    hint = {"key": "metadata.name", "operator": "In", "values": ["node-b"]}
    assert terms(placed) == [
        {"matchExpressions": [gpu], "matchFields": [NOT_IN, hint]},
        {"matchExpressions": [zone], "matchFields": [pinned, NOT_IN, hint]},
    ]
    assert placed["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] == preferred
    assert placed["affinity"]["podAntiAffinity"] == {"x": 1}
    assert spec == before


def test_the_policy_condition_follows_the_newest_requests_caps() -> None:
    assert policy_condition([]) is None
    older = ticket("m1", audit=None)
    newer = ticket("m2", accepted_at=older.accepted_at + timedelta(seconds=1), audit=MigrationAudit())
    configured = policy_condition([older, newer])
    assert configured is not None
    assert (configured.type, configured.status, configured.reason, configured.message) == (
        "MigrationPolicyUnconfigured", "False", "MigrationCapacityConfigured", "at most 10 migrations per 1h0m0s"
    )
    unconfigured = policy_condition([older])
    assert unconfigured is not None
    assert (unconfigured.status, unconfigured.reason) == ("True", "MigrationCapacityUnconfigured")
    assert unconfigured.message.startswith("no lifecycle.audit caps are configured, so migrations wait in Accepted")


def test_relocations_carry_no_caps_and_do_not_flip_the_policy_condition() -> None:
    relocated = ticket("r1", audit=None, phase=P.RELOCATED, accepted_at=NOW)
    assert policy_condition([relocated]) is None
    shown = policy_condition([ticket("m1"), relocated])
    assert shown is not None and shown.status == "False"
