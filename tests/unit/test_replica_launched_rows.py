"""The InferenceReplica's status lists an Instance it started and has not heard from as a
`Creating` row (`workflows.replica.projection.launched_rows`), in runs that took the change:
a single-pod Instance sends no report while it is only `Creating` (`launched_by_parent`)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tests.unit.replica_rows import ready_report, replica_config
from workflows.replica.messages import ReplicaState
from workflows.replica.projection import build_status

pytestmark = pytest.mark.unit

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
REVISION = "bbbbbbbb"


def state(shows_launched: bool) -> ReplicaState:
    config = replica_config(REVISION)
    ready = ready_report(0, REVISION, NOW)
    # Instance 0 reported Ready; 1 and 2 were started and have not reported; 0 also has an
    # older launch record left (a report always wins over it).
    return ReplicaState(
        config=config,
        instances={0: ready},
        launched={0: REVISION, 2: REVISION, 1: REVISION},
        shows_launched=shows_launched,
        last_desired=3,
    )


def rows(replica: ReplicaState) -> list[tuple[int, str, int, str]]:
    status, _ = build_status(replica, NOW)
    return [(row.index, row.phase, row.pods.total, row.target_revision or "") for row in status.instance_statuses]


def test_instances_started_and_not_heard_from_are_creating_rows() -> None:
    assert rows(state(shows_launched=True)) == [
        (0, "Ready", 1, REVISION),
        (1, "Creating", 0, REVISION),
        (2, "Creating", 0, REVISION),
    ]


def test_a_run_from_before_the_change_lists_reported_instances_only() -> None:
    assert rows(state(shows_launched=False)) == [(0, "Ready", 1, REVISION)]


def test_the_rows_do_not_change_the_counts() -> None:
    """The counts always came from the launch records (`planning.replica.overlay.replica_facts`)."""
    with_rows, _ = build_status(state(shows_launched=True), NOW)
    without, _ = build_status(state(shows_launched=False), NOW)
    assert (with_rows.replicas, with_rows.ready_replicas) == (without.replicas, without.ready_replicas) == (3, 1)
