"""Table tests of omectl's pure views: the columns and formatting rules of spec reference
§8 (`get ir`), §9 (`instance list`), §11 (`retry-blocks`), §13 (`migration status`) and §17
(`get tm`), and the AGE column."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from models.inferencereplica import (
    Condition,
    InferenceReplicaStatus,
    InstanceRow,
    LastFailure,
    MigrationRecord,
    OperationRow,
    PodCounts,
    RetryBlockRow,
)
from models.trafficmap import EntryProbe, TrafficMapEntry
from planning.trafficmap.state import Publication
from planning.trafficmap.view import TrafficMapView
from workers.omectl.views import instances, irep, migrations, retry_blocks, trafficmap
from workers.omectl.views.table import age, table

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(None, "-"), (0, "0s"), (45, "45s"), (119, "119s"), (120, "2m"), (7199, "119m"), (7200, "2h"),
     (47 * 3600, "47h"), (48 * 3600, "2d"), (-5, "0s")],
)
def test_age_is_kubectls(seconds: int | None, shown: str) -> None:
    since = None if seconds is None else NOW - timedelta(seconds=seconds)
    assert age(since, NOW) == shown


def test_table_pads_columns_and_leaves_the_last_unpadded() -> None:
    rendered = table(("NAME", "X"), [("a", "1"), ("longer", "22")]).render()
    assert rendered.splitlines() == ["NAME     X", "a        1", "longer   22"]


# --- §8 get ir ---------------------------------------------------------------------------


def ready(status: str, reason: str = "AllInstancesReady") -> Condition:
    return Condition(type="Ready", status=status, reason=reason)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("conditions", "shown"),
    [
        ([], "-"),
        ([ready("True")], "Ready=True"),
        ([ready("Unknown", "RolloutInProgress")], "Ready=Unknown"),
        ([Condition(type="RolloutStalled", status="True", reason="InstancesFailing"), ready("False")], "RolloutStalled=True"),
        ([Condition(type="RolloutStalled", status="False", reason="Progressing"), ready("False")], "Ready=False"),
    ],
    ids=["none", "ready", "rolling", "stalled-wins", "not-stalled"],
)
def test_lifecycle_column(conditions: list[Condition], shown: str) -> None:
    assert irep.lifecycle(InferenceReplicaStatus(conditions=conditions)) == shown


def replica(**status: object) -> irep.Replica:
    return irep.Replica(
        name="qwen3-0-6b-engine",
        parent="qwen3-0-6b",
        component="engine",
        status=InferenceReplicaStatus(**status),  # type: ignore[arg-type]
        desired=2,
        paused=False,
        started=NOW - timedelta(minutes=5),
    )


def test_get_ir_row_during_a_migration_shows_current_one_above_desired() -> None:
    shown = irep.irep_table(
        [replica(replicas=3, ready_replicas=3, available_replicas=2, observed_generation=1, conditions=[ready("True")])],
        NOW,
    ).render()
    assert shown.splitlines()[0].split() == list(irep.HEADERS)
    assert shown.splitlines()[1].split() == ["qwen3-0-6b-engine", "engine", "2", "3", "3", "2", "qwen3-0-6b", "Ready=True", "5m"]


def test_get_ir_wide_columns() -> None:
    row = irep.row(
        replica(
            replicas=2, serving_replicas=1, updated_replicas=1, current_revision="rev-a", update_revision="rev-b",
            observed_generation=1, conditions=[ready("Unknown", "RolloutInProgress")],
            migrations=[MigrationRecord(uuid="u1", instance=0, phase="SurgePending"),
                        MigrationRecord(uuid="u0", instance=1, phase="Completed")],
        ),
        NOW,
        wide=True,
    )
    assert row[len(irep.HEADERS):] == (
        "RolloutInProgress", "1", "1", "DenseV1", "rev-a", "rev-b", "1", "false", "-", "Current",
    )


@pytest.mark.parametrize(
    ("observed", "generation", "shown"),
    [(None, None, "Unobserved"), (1, None, "Current"), (2, 2, "Current"), (1, 2, "Stale:1/2")],
)
def test_lifecycle_freshness(observed: int | None, generation: int | None, shown: str) -> None:
    one = irep.Replica("n", "p", "engine", InferenceReplicaStatus(observed_generation=observed), generation=generation)
    assert irep.freshness(one) == shown


def test_desired_unknown_shows_a_dash() -> None:
    one = irep.Replica("n", "p", "engine", InferenceReplicaStatus())
    assert irep.row(one, NOW)[2] == "-"


# --- §9 instance list --------------------------------------------------------------------

REV_A = "qwen3-0-6b-engine-rev-5d9c7b8f"
REV_B = "qwen3-0-6b-engine-rev-0a1b2c3d"


@pytest.mark.parametrize(
    ("running", "target", "shown"),
    [
        (None, None, "-"),
        (REV_A, None, "qwen..7b8f"),
        (REV_A, REV_A, "qwen..7b8f"),
        (REV_A, REV_B, "qwen..7b8f>qwen..2c3d"),
        (None, REV_B, ">qwen..2c3d"),
        ("rev-1", "rev-2", "rev-1>rev-2"),
        ("abcdefghij", None, "abcdefghij"),
        ("abcdefghijk", None, "abcd..hijk"),
    ],
    ids=["none", "running", "at-rest", "moving", "first-create", "short", "ten-chars", "eleven-chars"],
)
def test_revs_column(running: str | None, target: str | None, shown: str) -> None:
    row = InstanceRow(index=0, phase="Ready", running_revision=running, target_revision=target)
    assert instances.revisions(row) == shown


@pytest.mark.parametrize(
    ("row", "shown"),
    [
        (InstanceRow(index=0, phase="Creating"), "---"),
        (InstanceRow(index=0, phase="Ready", running_revision="r"), "A--"),
        (InstanceRow(index=0, phase="Updating", running_revision="r", operation=OperationRow(id="o", type="Update")), "AO-"),
        (InstanceRow(index=0, phase="Failed", last_failure=LastFailure(reason="ImagePullBackOff")), "--F"),
        (
            InstanceRow(index=0, phase="Failed", running_revision="r", operation=OperationRow(id="o", type="Update"),
                        last_failure=LastFailure(reason="CrashLoopBackOff")),
            "AOF",
        ),
    ],
    ids=["creating", "admitted", "updating", "failed-create", "all"],
)
def test_aof_flags(row: InstanceRow, shown: str) -> None:
    assert instances.flags(row) == shown


def test_instance_list_rows_pods_are_serving_available_total() -> None:
    status = InferenceReplicaStatus(
        observed_generation=2,
        instance_statuses=[
            InstanceRow(index=1, incarnation=2, phase="Ready", running_revision="rev-1", pods=PodCounts(total=2, ready=2, serving=2, available=1)),
            InstanceRow(index=0, phase="Updating", running_revision="rev-1", target_revision="rev-2",
                        pods=PodCounts(total=2, ready=1, serving=1, available=1), operation=OperationRow(id="o", type="Update")),
        ],
    )
    shown = instances.instances_table([("engine", status, None)]).render().splitlines()
    assert shown[0].split() == ["COMP", "IDX/INC", "PHASE", "PODS", "REVS", "AOF", "EVIDENCE"]
    assert shown[1].split() == ["engine", "0/1", "Updating", "1/1/2", "rev-1>rev-2", "AO-", "OK"]
    assert shown[2].split() == ["engine", "1/2", "Ready", "2/1/2", "rev-1", "A--", "OK"]


@pytest.mark.parametrize(
    ("observed", "generation", "duplicate", "shown"),
    [(1, None, False, "OK"), (None, None, False, "NOT-OBSERVED"), (1, 2, False, "STALE:1/2"), (2, 2, False, "OK"), (1, None, True, "BAD:DUP-IDX")],
)
def test_evidence(observed: int | None, generation: int | None, duplicate: bool, shown: str) -> None:
    rows = [InstanceRow(index=0, phase="Ready")] * (2 if duplicate else 1)
    status = InferenceReplicaStatus(observed_generation=observed, instance_statuses=rows)
    assert instances.evidence(status, rows[0], generation) == shown


def test_instance_list_without_instances_is_one_empty_row() -> None:
    shown = instances.instances_table([("engine", InferenceReplicaStatus(), None)]).render().splitlines()
    assert shown[1].split() == ["-", "-", "-", "-", "-", "-", "EMPTY"]


# --- §11 retry-blocks --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("rev-12345678", "rev-12345678"),
        ("abcdefghijklmn", "abcdefghijklmn"),  # 14: kept
        ("qwen3-0-6b-engine-rev-5d9c7b8f", "qwen3#"),  # prefix; digest checked below
    ],
)
def test_target_column(name: str, shown: str) -> None:
    assert retry_blocks.target(name).startswith(shown)
    if len(name) > 14:
        cut = retry_blocks.target(name)
        assert len(cut) == 14 and cut[5] == "#"
        assert "5d9c7b8f" not in cut  # a digest of the name, not the revision hash
        assert retry_blocks.target(name) == cut  # stable


@pytest.mark.parametrize(("started", "shown"), [(0, "0"), (3, "3"), (99, "99"), (100, "99+"), (250, "99+")])
def test_attempts_cap(started: int, shown: str) -> None:
    assert retry_blocks.attempts(started) == shown


@pytest.mark.parametrize(
    ("at", "shown"),
    [
        (None, "-"),
        (datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC), "26-03-04T05:06Z"),
        (datetime(2026, 3, 4, 7, 6, tzinfo=UTC).astimezone(__import__("datetime").timezone(timedelta(hours=2))), "26-03-04T07:06Z"),
        (datetime(2026, 3, 4, 5, 6), "26-03-04T05:06Z"),  # naive: read as UTC
    ],
    ids=["none", "utc", "offset", "naive"],
)
def test_next_column(at: datetime | None, shown: str) -> None:
    assert retry_blocks.next_retry(at) == shown


def block(state: str, **fields: object) -> RetryBlockRow:
    return RetryBlockRow(target_revision="rev-1", state=state, **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("state", "current", "deleting", "shown_state", "rel"),
    [
        ("Held", True, False, "HELD", "YES"),
        ("Held", False, False, "HELD", "NO"),
        ("Held", True, True, "HELD", "NO"),
        ("Backoff", True, False, "BACKOFF", "NO"),
        ("RetryInProgress", True, False, "RUNNING", "NO"),
    ],
    ids=["held", "held-stale", "held-deleting", "backoff", "running"],
)
def test_state_and_rel(state: str, current: bool, deleting: bool, shown_state: str, rel: str) -> None:
    rows = retry_blocks.rows(retry_blocks.Blocks("engine", [block(state, attempts_started=2, reason="ErrImagePull")], current, deleting))
    assert rows == [("engine", shown_state, "rev-1", "2", "-", rel, "ErrImagePull")]


def test_retry_blocks_empty_row_is_the_references() -> None:
    shown = retry_blocks.retry_blocks_table([retry_blocks.Blocks("engine", [])]).render().splitlines()
    assert shown[0].split() == ["COMP", "STATE", "TARGET", "ATT", "NEXT", "REL", "REASON"]
    assert shown[1].split() == ["-", "EMPTY", "-", "-", "-", "NO", "-"]


def test_block_without_reason_shows_a_dash() -> None:
    assert retry_blocks.rows(retry_blocks.Blocks("engine", [block("Backoff")]))[0][-1] == "-"


# --- §13 migration status ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("phase", "shown"),
    [("Accepted", "Active"), ("SurgePending", "Active"), ("SurgeReady", "Active"), ("Draining", "Active"),
     ("Completed", "Terminal"), ("Failed", "Terminal"), ("Relocated", "Terminal"), ("Bogus", "Invalid")],
)
def test_migration_lifecycle(phase: str, shown: str) -> None:
    assert migrations.lifecycle(phase) == shown


def test_migration_rows() -> None:
    record = MigrationRecord(uuid="8d0c", instance=0, from_node="gpu-node-1", phase="Completed", surge_instance=4,
                             message="migrated to instance=4")
    assert migrations.rows("engine", [record], "Current") == [
        ("8d0c/engine", "Completed/Terminal/Current", "instance=0->4 from=gpu-node-1 migrated to instance=4")
    ]
    assert migrations.detail(MigrationRecord(uuid="u", instance=2, phase="Accepted")) == "instance=2"


def test_migrations_empty() -> None:
    assert migrations.migrations_table([("engine", [], "Current")]).rows == (("-", "EMPTY", "-"),)


# --- §17 get tm --------------------------------------------------------------------------


def tm_condition(kind: str, status: str, reason: str, observed: int | None = 3) -> Condition:
    return Condition(type=kind, status=status, reason=reason, observed_generation=observed)  # type: ignore[arg-type]


def tm_view(**fields: object) -> TrafficMapView:
    base: dict[str, object] = {
        "namespace": "prod",
        "isvc": "chat",
        "mode": "All",
        "map_generation": 3,
        "entries": [
            TrafficMapEntry(cluster="worker-a", weight=2, healthy=True),
            TrafficMapEntry(cluster="worker-b", weight=0, healthy=False, drain_refs=["upgrade-42"],
                            probe=EntryProbe(message="HTTP 503", gated=True)),
        ],
        "conditions": [
            tm_condition("Routable", "True", "Routable"),
            tm_condition("Published", "True", "Published"),
            tm_condition("OverrideActive", "True", "OverridesApplied"),
        ],
        "publication": Publication(gateway_namespace="ome", gateway_name="global-gateway", published=True),
    }
    return TrafficMapView(**{**base, **fields})  # type: ignore[arg-type]


def test_get_tm_columns_and_wide() -> None:
    shown = trafficmap.trafficmap_table([tm_view()], wide=True).render().splitlines()
    assert shown[0].split() == list(trafficmap.HEADERS + trafficmap.WIDE_HEADERS)
    assert shown[1].split() == [
        "chat", "All", "2", "True", "True", "prod/chat", "1", "1", "True", "OverridesApplied", "Routable", "ome/global-gateway",
    ]


def test_a_condition_older_than_the_map_shows_unknown() -> None:
    view = tm_view(conditions=[tm_condition("Routable", "False", "AllHomesUnready", observed=2)])
    assert trafficmap.row(view) == ("chat", "All", "2", "Unknown", "Unknown")
    assert trafficmap.row(view, wide=True)[-2:] == ("-", "ome/global-gateway")


def test_unknown_mode_and_gateway_show_dashes() -> None:
    view = tm_view(mode=None, publication=Publication())
    assert trafficmap.row(view)[1] == "-"
    assert trafficmap.gateway(view) == "-"


def test_entries_table() -> None:
    assert trafficmap.entries_table(tm_view()).rows == (
        ("worker-a", "2", "true", "-", "-"),
        ("worker-b", "0", "false", "upgrade-42", "HTTP 503"),
    )
