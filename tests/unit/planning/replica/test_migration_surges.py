"""Migrations as the InferenceReplica carries them out, from the replacement's start: where it
starts and what it runs, how it comes up or fails, completion, cancel, retention and the review
fixes of `plan_migrations`, verbatim from reference §13 (the waits, failures and the rate cap
before it: tests/unit/planning/replica/test_migrations.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest

from models.migration import MigrationAudit, MigrationPhase
from planning.replica.events import PlannedEvent
from planning.replica.facts import InstanceFacts
from planning.replica.migrations import (
    DEFAULT_RETENTION,
    MigrationTicket,
    SurgeStart,
    fail_all,
    not_started,
    retained,
)
from tests.unit.planning.replica.migration_tickets import (
    BEGAN_AT,
    DEADLINE,
    OLDER,
    PAIR,
    SURGE_POD,
    P,
    ended,
    moving,
    of,
    plan,
    ticket,
    warning,
)
from tests.unit.planning.replica.rows import NEW, NOW, OLD, creating, deleting, failed, ready

pytestmark = pytest.mark.unit


# --- The replacement starts ----------------------------------------------------------------


def test_the_surge_starts_at_the_lowest_unused_index_off_the_source_node() -> None:
    result = plan([ticket(requested_by="alice")])
    assert result.start == SurgeStart(uuid="m1", index=2, source=1, revision=OLD, avoid_node="node-a")
    started = of(result)
    assert started.phase == P.SURGE_PENDING
    assert (started.surge_instance, started.revision, started.began_at) == (2, OLD, NOW)
    assert started.message == "surge instance=2 starting off node node-a"
    assert result.events == (
        PlannedEvent(
            "Normal",
            "MigrationRequestAccepted",
            "OMENative migration uuid=m1 accepted: component=engine instance=1 on node node-a -> surge instance=2 "
            "(requested by alice)",
            on_isvc=True,
        ),
    )
    assert result.wake_at == DEADLINE
    assert result.drain == () and result.delete == ()


def test_the_accepted_event_without_a_requester() -> None:
    result = plan([ticket()])
    assert [e.message for e in result.events] == [
        "OMENative migration uuid=m1 accepted: component=engine instance=1 on node node-a -> surge instance=2"
    ]


@pytest.mark.parametrize(
    ("instances", "reserved", "index"),
    [
        pytest.param((ready(0), ready(1), ready(3)), (), 2, id="fills a gap"),
        pytest.param((ready(1), ready(2)), (), 0, id="index 0 free"),
        pytest.param(PAIR, (2, 3), 4, id="reserved indexes are not free"),
        pytest.param((ready(0), ready(1), creating(2)), (4,), 3, id="a launched Instance holds its index"),
        pytest.param((ready(0), ready(1), deleting(2)), (), 3, id="a deleting Instance holds its index"),
    ],
)
def test_surge_index(instances: Sequence[InstanceFacts], reserved: Sequence[int], index: int) -> None:
    result = plan([ticket()], instances, reserved_indexes=reserved)
    assert result.start is not None and result.start.index == index
    assert of(result).surge_instance == index


def test_hints_keep_their_order_without_the_source_node() -> None:
    result = plan([ticket(hint_target_nodes=("node-c", "node-a", "node-b"))])
    assert result.start is not None
    assert (result.start.avoid_node, result.start.prefer_nodes) == ("node-a", ("node-c", "node-b"))


@pytest.mark.parametrize(
    ("source", "revision"),
    [
        pytest.param(ready(1, revision=NEW), NEW, id="the source's running revision"),
        pytest.param(ready(1, running_revision=None, target_revision=NEW), NEW, id="else its target"),
    ],
)
def test_the_surge_runs_the_source_revision(source: InstanceFacts, revision: str) -> None:
    result = plan([ticket()], (ready(0), source))
    assert result.start is not None and result.start.revision == revision
    assert of(result).revision == revision


def test_only_one_surge_starts_per_pass() -> None:
    result = plan([ticket("m0", 0, "node-b"), ticket()], PAIR)
    assert result.start is not None and result.start.uuid == "m0"
    assert of(result).message == "waiting for migration m0 (instance=0) to finish"


# --- The replacement comes up --------------------------------------------------------------

SURGING: list[Any] = [
    pytest.param(
        moving(), (*PAIR, creating(2)), {},
        P.SURGE_PENDING, "surge instance=2 coming up (phase=Creating)", (), DEADLINE,
        id="surge creating",
    ),
    pytest.param(
        moving(), (*PAIR, ready(2, ready=False, serving=False)), {},
        P.SURGE_PENDING, "surge instance=2 coming up (phase=Ready)", (), DEADLINE,
        id="surge Ready but not serving",
    ),
    pytest.param(
        moving(), (*PAIR, ready(2, serving_for=10)), {"min_ready_seconds": 30},
        P.SURGE_PENDING, "surge instance=2 serving; settling for minReadySeconds", (), NOW + timedelta(seconds=20),
        id="surge settling for minReadySeconds",
    ),
    pytest.param(
        moving(), (*PAIR, ready(2, serving_for=30)), {"min_ready_seconds": 30},
        P.DRAINING, "instance=1 leaving rotation; its pods go next", (1,), None,
        id="surge settled: the source drains",
    ),
    pytest.param(
        moving(), (*PAIR, ready(2, serving_for=0)), {},
        P.DRAINING, "instance=1 leaving rotation; its pods go next", (1,), None,
        id="no minReadySeconds: drains at once",
    ),
    pytest.param(
        moving(), (*PAIR, ready(2)), {"paused": True},
        P.SURGE_READY, "surge instance=2 ready and serving; the source drains when the component is resumed", (),
        DEADLINE,
        id="paused: stays SurgeReady",
    ),
    pytest.param(
        moving(P.SURGE_READY), (*PAIR, ready(2)), {},
        P.DRAINING, "instance=1 leaving rotation; its pods go next", (1,), None,
        id="resumed: SurgeReady drains",
    ),
    pytest.param(
        moving(P.DRAINING), (*PAIR, ready(2)), {"now": DEADLINE + timedelta(hours=1)},
        P.DRAINING, "", (), None,
        id="draining: no deadline",
    ),
]


@pytest.mark.parametrize(("current", "instances", "context", "phase", "message", "drain", "wake"), SURGING)
def test_surge_progress(
    current: MigrationTicket,
    instances: Sequence[InstanceFacts],
    context: dict[str, Any],
    phase: MigrationPhase,
    message: str,
    drain: tuple[int, ...],
    wake: datetime | None,
) -> None:
    result = plan([current], instances, **context)
    after = of(result)
    assert (after.phase, after.message, result.drain, result.wake_at) == (phase, message, drain, wake)
    assert result.events == () and result.delete == () and result.start is None
    assert after.surge_instance == 2 and after.failure_reason is None


SURGE_FAILURES: list[Any] = [
    pytest.param(
        moving(), (*PAIR, failed(2)), {"failed_pods": {2: (SURGE_POD, "CrashLoopBackOff")}},
        "MigrationSurgeWedged", f"surge pod {SURGE_POD} wedged in CrashLoopBackOff past the stuck-pod grace",
        id="surge wedged",
    ),
    pytest.param(
        moving(), (*PAIR, failed(2, failure_reason="ImagePullBackOff")), {},
        "MigrationSurgeWedged", "surge pod 2 wedged in ImagePullBackOff past the stuck-pod grace",
        id="surge wedged, its pod unknown",
    ),
    pytest.param(
        moving(), (*PAIR, failed(2)), {"failed_pods": {2: (SURGE_POD, "Unschedulable")}},
        "MigrationSurgeCreateBlocked", "surge instance=2 cannot be placed off node node-a: Unschedulable",
        id="surge unschedulable",
    ),
    pytest.param(
        moving(), PAIR, {},
        "MigrationSurgeCreateBlocked", "surge instance=2 ended before it served",
        id="surge gone",
    ),
    pytest.param(
        moving(), (*PAIR, deleting(2)), {},
        "MigrationSurgeCreateBlocked", "surge instance=2 ended before it served",
        id="surge being deleted",
    ),
    pytest.param(
        moving(), (*PAIR, creating(2)), {"now": DEADLINE},
        "MigrationExpired", "deadline exceeded in phase SurgePending: surge instance=2 not serving",
        id="deadline in SurgePending",
    ),
    pytest.param(
        moving(P.SURGE_READY), (*PAIR, ready(2)), {"now": DEADLINE, "paused": True},
        "MigrationExpired", "deadline exceeded in phase SurgeReady: source not drained",
        id="deadline in SurgeReady while paused",
    ),
    pytest.param(
        moving(cancel_requested="alice"), (*PAIR, creating(2)), {},
        "MigrationCancelled", "cancelled by alice",
        id="cancelled while surging",
    ),
]


@pytest.mark.parametrize(("current", "instances", "context", "reason", "message"), SURGE_FAILURES)
def test_surge_failures_remove_the_replacement_and_keep_the_source(
    current: MigrationTicket,
    instances: Sequence[InstanceFacts],
    context: dict[str, Any],
    reason: str,
    message: str,
) -> None:
    result = plan([current], instances, **context)
    after = of(result)
    assert after.phase == P.FAILED
    assert (after.failure_reason, after.message) == (reason, message)
    assert result.delete == (2,)
    assert result.drain == ()
    assert result.events == (warning(reason, message),)
    assert result.wake_at is None


# --- Completion ----------------------------------------------------------------------------

COMPLETED_EVENT = (
    "OMENative migration uuid=m1 complete: component=engine instance=1 -> instance=2 (revision=qwen3-0-6b-engine-5d8f)"
)


@pytest.mark.parametrize(
    ("current", "instances"),
    [
        pytest.param(moving(P.DRAINING), (ready(0), ready(2)), id="the drained source is gone"),
        pytest.param(moving(), (ready(0), creating(2)), id="the source went another way while surging"),
    ],
)
def test_completed_when_the_source_is_gone(current: MigrationTicket, instances: Sequence[InstanceFacts]) -> None:
    result = plan([current], instances, now=DEADLINE + timedelta(minutes=1),
                  revision_names={OLD: "qwen3-0-6b-engine-5d8f"})
    done = of(result)
    assert (done.phase, done.message, done.ended_at) == (P.COMPLETED, "migrated to instance=2", DEADLINE + timedelta(minutes=1))
    assert result.events == (PlannedEvent("Normal", "MigrationCompleted", COMPLETED_EVENT, on_isvc=True),)
    assert result.delete == () and result.drain == ()


def test_completed_event_shows_the_hash_without_a_revision_name() -> None:
    result = plan([moving(P.DRAINING)], (ready(0), ready(2)))
    assert [e.message for e in result.events] == [
        f"OMENative migration uuid=m1 complete: component=engine instance=1 -> instance=2 (revision={OLD})"
    ]


def test_the_whole_flow_pass_by_pass() -> None:
    """Accepted -> SurgePending -> SurgeReady (paused) -> Draining -> Completed."""
    first = plan([ticket()])
    assert of(first).phase == P.SURGE_PENDING
    second = plan(first.tickets, (*PAIR, creating(2)))
    assert of(second).phase == P.SURGE_PENDING
    third = plan(second.tickets, (*PAIR, ready(2)), paused=True)
    assert of(third).phase == P.SURGE_READY
    fourth = plan(third.tickets, (*PAIR, ready(2)))
    assert (of(fourth).phase, fourth.drain) == (P.DRAINING, (1,))
    fifth = plan(fourth.tickets, (ready(0), deleting(1), ready(2)))
    assert of(fifth).phase == P.DRAINING
    sixth = plan(fifth.tickets, (ready(0), ready(2)))
    assert of(sixth).phase == P.COMPLETED
    assert [e.reason for e in (*first.events, *sixth.events)] == ["MigrationRequestAccepted", "MigrationCompleted"]
    # An ended ticket stays as it is.
    assert plan(sixth.tickets, (ready(0), ready(2))).tickets == sixth.tickets


# --- Cancel --------------------------------------------------------------------------------


def test_cancel_in_accepted_moves_nothing() -> None:
    result = plan([ticket(cancel_requested="operator", audit=None)])
    after = of(result)
    assert (after.phase, after.failure_reason, after.message) == (P.FAILED, "MigrationCancelled", "cancelled by operator")
    assert result.events == (warning("MigrationCancelled", "cancelled by operator"),)
    assert result.start is None and result.delete == ()


def test_cancel_while_draining_is_too_late() -> None:
    current = moving(P.DRAINING, cancel_requested="operator")
    result = plan([current], (*PAIR, ready(2)))
    assert of(result) == current
    assert result.events == () and result.delete == ()


# --- Retention and teardown ----------------------------------------------------------------


def test_retained_keeps_active_ones_and_ended_ones_within_their_window() -> None:
    window = MigrationAudit(window_seconds=600)
    active = ticket("active")
    recent = ended("recent", NOW - timedelta(minutes=9), audit=window)
    old = ended("old", NOW - timedelta(minutes=10), audit=window)
    default_recent = ended("default-recent", NOW - DEFAULT_RETENTION + timedelta(seconds=1), audit=None)
    default_old = ended("default-old", NOW - DEFAULT_RETENTION, audit=None)
    no_end = replace(ended("no-end", None, P.FAILED), ended_at=None)
    kept = retained([active, recent, old, default_recent, default_old, no_end], NOW)
    assert [t.uuid for t in kept] == ["active", "recent", "default-recent", "no-end"]
    assert DEFAULT_RETENTION == timedelta(hours=1)


def test_fail_all_ends_only_active_tickets() -> None:
    done = ended("done", BEGAN_AT)
    result = fail_all([ticket("a"), moving(), done], NOW, "the InferenceService is being deleted")
    assert [(t.uuid, t.phase, t.failure_reason) for t in result] == [
        ("a", P.FAILED, "MigrationRequestRejected"),
        ("m1", P.FAILED, "MigrationRequestRejected"),
        ("done", P.COMPLETED, None),
    ]
    assert {t.message for t in result[:2]} == {"the InferenceService is being deleted"}
    assert {t.ended_at for t in result[:2]} == {NOW}
    assert result[2] is done


# --- Review fixes: a dead node under a draining source, scale-down of a pair, a lost start -------


def test_a_drain_overdue_source_that_no_longer_serves_completes_the_migration() -> None:
    """Its pods stuck Terminating on a dead node: the replacement serves, the move is done."""
    overdue_at = NOW - timedelta(seconds=1)
    stuck = replace(deleting(1), serving=False)
    result = plan([moving(P.DRAINING)], (ready(0), stuck, ready(2)), drain_deadlines={1: overdue_at})
    assert (of(result).phase, of(result).message) == (P.COMPLETED, "migrated to instance=2")
    early = plan([moving(P.DRAINING)], (ready(0), stuck, ready(2)), drain_deadlines={1: NOW + timedelta(minutes=3)})
    assert of(early).phase == P.DRAINING and early.wake_at == NOW + timedelta(minutes=3)


def test_a_pair_scaled_down_together_is_not_a_blocked_surge() -> None:
    result = plan([moving()], (ready(0), deleting(1), deleting(2)))
    after = of(result)
    assert (after.phase, after.failure_reason) == (P.FAILED, "MigrationRequestRejected")
    assert after.message == "instance=1 and its replacement instance=2 were scaled down"


def test_a_start_that_found_its_index_still_closing_goes_back_to_accepted() -> None:
    back = not_started(moving())
    assert (back.phase, back.surge_instance, back.began_at, back.revision) == (P.ACCEPTED, None, None, None)
    # The next pass chooses again, past the reserved index.
    again = plan([back], PAIR, reserved_indexes=[2])
    assert again.start is not None and again.start.index == 3


def test_a_migration_completing_lets_the_next_one_start_in_the_same_pass() -> None:
    draining = ticket("m0", 0, "node-b", accepted_at=OLDER, phase=P.DRAINING, surge_instance=2, began_at=BEGAN_AT)
    result = plan([draining, ticket()], (ready(1), ready(2)), nodes={1: ("node-a",), 2: ("node-c",)})
    assert of(result, "m0").phase == P.COMPLETED
    assert of(result).phase == P.SURGE_PENDING
    assert result.start == SurgeStart(uuid="m1", index=0, source=1, revision=OLD, avoid_node="node-a")
