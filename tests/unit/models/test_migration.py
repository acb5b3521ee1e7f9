"""Migration requests as OME's annotation carries them (reference §13): every problem the
webhook / `migrate` names, and the audit ConfigMap's `history.json` rows."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from models.migration import (
    AUDIT_HISTORY_LIMIT,
    MigrationAudit,
    MigrationRequest,
    merge_audit_rows,
    parse_request,
    request_problems,
)

pytestmark = pytest.mark.unit

FIELDS = "component, from_node, hint_target_nodes, instance, reason, requested_at, requested_by, schemaVersion, uuid"
GOOD: dict[str, Any] = {
    "schemaVersion": "v1",
    "component": "engine",
    "instance": 1,
    "from_node": "gpu-node-1",
    "hint_target_nodes": ["gpu-node-2", "gpu-node-3"],
    "reason": "node maintenance",
    "requested_at": "2026-01-01T12:00:00Z",
    "requested_by": "alice",
}


def request(**changes: Any) -> dict[str, Any]:
    """GOOD with `changes`; a value of `...` removes the key."""
    raw = {**GOOD, **changes}
    return {k: v for k, v in raw.items() if v is not ...}


PROBLEMS: list[Any] = [
    pytest.param([GOOD], "must be a JSON object, got list", id="a list"),
    pytest.param("engine", "must be a JSON object, got str", id="a string"),
    pytest.param(None, "must be a JSON object, got NoneType", id="null"),
    pytest.param(request(bogus=1), f"unknown field(s) bogus; the fields are {FIELDS}", id="unknown field"),
    pytest.param(request(zz=1, aa=2), f"unknown field(s) aa, zz; the fields are {FIELDS}", id="unknown fields sorted"),
    pytest.param(request(schemaVersion="v2"), "schemaVersion must be \"v1\", got 'v2'", id="schemaVersion v2"),
    pytest.param(request(schemaVersion=1), 'schemaVersion must be "v1", got 1', id="schemaVersion a number"),
    pytest.param(
        request(schemaVersion=..., schema_version="v2"), "schemaVersion must be \"v1\", got 'v2'",
        id="schema_version v2",
    ),
    pytest.param(request(component="gpu"), "component must be router, engine or decoder, got 'gpu'", id="component"),
    pytest.param(request(component=...), "component must be router, engine or decoder, got None", id="no component"),
    pytest.param(request(instance=-1), "instance must be a non-negative index, got -1", id="instance -1"),
    pytest.param(request(instance="1"), "instance must be a non-negative index, got '1'", id="instance a string"),
    pytest.param(request(instance=True), "instance must be a non-negative index, got True", id="instance a bool"),
    pytest.param(request(instance=1.0), "instance must be a non-negative index, got 1.0", id="instance a float"),
    pytest.param(request(instance=...), "instance must be a non-negative index, got None", id="no instance"),
    pytest.param(request(from_node=""), "from_node must name the node the Instance runs on, got ''", id="from_node empty"),
    pytest.param(request(from_node=3), "from_node must name the node the Instance runs on, got 3", id="from_node a number"),
    pytest.param(request(from_node=...), "from_node must name the node the Instance runs on, got None", id="no from_node"),
    pytest.param(
        request(hint_target_nodes="gpu-node-2"),
        "hint_target_nodes must be a list of at most 8 node names, got 'gpu-node-2'",
        id="hints not a list",
    ),
    pytest.param(
        request(hint_target_nodes=[f"n{i}" for i in range(9)]),
        f"hint_target_nodes must be a list of at most 8 node names, got {[f'n{i}' for i in range(9)]!r}",
        id="nine hints",
    ),
    pytest.param(
        request(hint_target_nodes=["n1", ""]),
        "hint_target_nodes must be a list of at most 8 node names, got ['n1', '']",
        id="an empty hint",
    ),
    pytest.param(
        request(hint_target_nodes=[1]), "hint_target_nodes must be a list of at most 8 node names, got [1]",
        id="a hint not a string",
    ),
    pytest.param(request(reason=5), "reason must be a string, got 5", id="reason"),
    pytest.param(request(requested_by=["bob"]), "requested_by must be a string, got ['bob']", id="requested_by"),
    pytest.param(request(uuid=7), "uuid must be a string, got 7", id="uuid"),
    pytest.param(
        request(requested_at="yesterday"), "requested_at must be an RFC 3339 time, got 'yesterday'", id="requested_at",
    ),
    pytest.param(
        request(requested_at="2026-01-01"), "requested_at must be an RFC 3339 time, got '2026-01-01'",
        id="requested_at a date",
    ),
    pytest.param(
        request(requested_at="2026-01-01T12:00:00"),
        "requested_at must be an RFC 3339 time, got '2026-01-01T12:00:00'",
        id="requested_at without an offset",
    ),
    pytest.param(
        request(requested_at=1767268800), "requested_at must be an RFC 3339 time, got 1767268800",
        id="requested_at a number",
    ),
]


@pytest.mark.parametrize(("raw", "problem"), PROBLEMS)
def test_each_problem(raw: Any, problem: str) -> None:
    assert request_problems(raw) == [problem]
    with pytest.raises(ValueError) as refused:
        parse_request(raw)
    assert str(refused.value) == f"migration request: {problem}"


def test_every_problem_is_named_at_once() -> None:
    raw = {"schemaVersion": "v0", "instance": -2, "extra": True}
    assert request_problems(raw) == [
        f"unknown field(s) extra; the fields are {FIELDS}",
        "schemaVersion must be \"v1\", got 'v0'",
        "component must be router, engine or decoder, got None",
        "instance must be a non-negative index, got -2",
        "from_node must name the node the Instance runs on, got None",
    ]
    with pytest.raises(ValueError, match=r"^migration request: unknown field\(s\) extra; .*; from_node must name"):
        parse_request(raw)


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(GOOD, id="OME's full request"),
        pytest.param({"component": "engine", "instance": 0, "from_node": "n"}, id="the required fields only"),
        pytest.param(request(component="router", schemaVersion=...), id="router"),
        pytest.param(request(component="decoder", hint_target_nodes=[f"n{i}" for i in range(8)]), id="eight hints"),
        pytest.param(request(hint_target_nodes=None, reason=None, uuid="u-1"), id="nulls and a uuid"),
        pytest.param(request(schemaVersion=..., schema_version="v1"), id="schema_version"),
        pytest.param(request(requested_at="2026-01-01T12:00:00.5+02:00"), id="an offset"),
    ],
)
def test_well_formed(raw: dict[str, Any]) -> None:
    assert request_problems(raw) == []
    assert isinstance(parse_request(raw), MigrationRequest)


def test_parse_reads_ome_keys_and_wire_writes_them_back() -> None:
    parsed = parse_request(GOOD)
    assert parsed == MigrationRequest(
        schema_version="v1",
        component="engine",
        instance=1,
        from_node="gpu-node-1",
        hint_target_nodes=["gpu-node-2", "gpu-node-3"],
        reason="node maintenance",
        requested_at=datetime(2026, 1, 1, 12, tzinfo=UTC),
        requested_by="alice",
    )
    assert parsed.wire() == {**GOOD, "requested_at": "2026-01-01T12:00:00Z"}


def test_audit_defaults_are_the_chart() -> None:
    assert MigrationAudit() == MigrationAudit(
        max_in_flight_migrations=3, max_migrations_per_window=10, window_seconds=3600
    )


# --- history.json ----------------------------------------------------------------------------


def row(uuid: str, phase: str) -> dict[str, Any]:
    return {"uuid": uuid, "phase": phase}


def test_a_row_replaces_the_row_of_its_uuid() -> None:
    rows = [row("a", "Accepted"), row("b", "SurgePending")]
    merged = merge_audit_rows(rows, row("a", "Completed"))
    assert merged == [row("b", "SurgePending"), row("a", "Completed")]
    assert rows == [row("a", "Accepted"), row("b", "SurgePending")]  # input untouched


def test_a_new_row_is_added() -> None:
    assert merge_audit_rows([row("a", "Completed")], row("b", "Accepted")) == [
        row("a", "Completed"),
        row("b", "Accepted"),
    ]


def test_the_newest_200_ended_rows_are_kept_and_every_active_one() -> None:
    assert AUDIT_HISTORY_LIMIT == 200
    rows = [row("active-0", "Accepted")]
    rows += [row(f"done-{n}", ("Completed", "Failed", "Relocated")[n % 3]) for n in range(200)]
    rows += [row("active-1", "Draining")]
    merged = merge_audit_rows(rows, row("done-new", "Failed"))
    ended = [r["uuid"] for r in merged if r["phase"] in ("Completed", "Failed", "Relocated")]
    assert len(ended) == 200
    assert ended[0] == "done-1" and ended[-1] == "done-new"
    assert [r["uuid"] for r in merged if r["uuid"].startswith("active")] == ["active-0", "active-1"]
    assert merged[0] == row("active-0", "Accepted")


@pytest.mark.parametrize(
    ("rows", "new", "kept"),
    [
        pytest.param(
            [row("a", "Completed"), row("b", "Failed")], row("c", "Completed"), ["b", "c"], id="the oldest ended goes"
        ),
        pytest.param(
            [row("a", "Accepted"), row("b", "Accepted"), row("c", "SurgeReady")], row("d", "Accepted"),
            ["a", "b", "c", "d"], id="active rows are never dropped",
        ),
        pytest.param(
            [row("a", "Completed"), row("b", "Accepted"), row("c", "Failed")], row("b", "Failed"),
            ["c", "b"], id="a row ending drops the oldest ended",
        ),
        pytest.param([row("a", "Completed")], row("a", "Completed"), ["a"], id="written twice"),
    ],
)
def test_limit(rows: list[dict[str, Any]], new: dict[str, Any], kept: list[str]) -> None:
    assert [r["uuid"] for r in merge_audit_rows(rows, new, limit=2)] == kept
