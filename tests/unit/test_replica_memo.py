"""What the InferenceReplica keeps of each Instance between passes (`workflows.replica.memo`):
computed once per report object, let go once unused for a whole pass, equal to what it stands
for, and never carried across continue-as-new."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from planning.replica.facts import facts_from_status
from planning.replica.overlay import replica_facts
from planning.replica.status import instance_row
from tests.unit.replica_rows import ready_report, replica_config
from workers.client import DATA_CONVERTER
from workflows.replica import view
from workflows.replica.carry import carried, unpacked
from workflows.replica.memo import Kept
from workflows.replica.messages import ReplicaState

pytestmark = pytest.mark.unit

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
REVISION = "bbbbbbbb"


class Counted:
    """A compute that counts its calls."""

    def __init__(self) -> None:
        self.calls: list[object] = []

    def __call__(self, obj: object) -> str:
        self.calls.append(obj)
        return f"result {len(self.calls)}"


def test_a_result_is_kept_for_the_same_object_only() -> None:
    compute = Counted()
    kept: Kept[object, str] = Kept(compute)
    report, equal_copy = ready_report(0, REVISION, NOW), ready_report(0, REVISION, NOW)
    assert kept(report) == kept(report) == "result 1"
    # An equal but other object (a new signal's report, an overlay's copy) is computed anew.
    assert kept(equal_copy) == "result 2"
    assert compute.calls == [report, equal_copy]


def test_what_a_whole_pass_did_not_use_is_let_go() -> None:
    compute = Counted()
    kept: Kept[object, str] = Kept(compute)
    used, dropped = ready_report(0, REVISION, NOW), ready_report(1, REVISION, NOW)
    kept(used), kept(dropped)
    kept.turn()
    kept(used)  # asked in this pass: kept on
    kept.turn()
    assert kept(used) == "result 1"
    assert kept(dropped) == "result 3", "unused for a whole pass: computed again"
    assert len(compute.calls) == 3


def state(instances: int) -> ReplicaState:
    reports = {index: ready_report(index, REVISION, NOW) for index in range(instances)}
    return ReplicaState(config=replica_config(REVISION), instances=reports, last_desired=instances)


def test_the_kept_facts_and_rows_are_what_they_stand_for() -> None:
    replica = state(5)
    replica.requested_updates[2] = "cccccccc"  # an overlay: a copy of the report, new each pass
    plain = replica_facts(
        replica.instances, replica.launched, replica.requested_updates, replica.removing, replica.gang_surges,
        view.policy(replica.config), True,
    )  # fmt: skip
    replica.shows_requested = True
    for _ in range(3):
        replica.memo.turn()
        assert view.raw_facts(replica) == plain
    assert [replica.memo.rows(status) for status in replica.instances.values()] == [
        instance_row(status) for status in replica.instances.values()
    ]
    assert replica.memo.facts(replica.instances[0]) is replica.memo.facts(replica.instances[0])
    assert replica.memo.facts(replica.instances[0]) == facts_from_status(replica.instances[0])


def test_nothing_kept_crosses_continue_as_new() -> None:
    replica = state(3)
    view.raw_facts(replica)
    assert replica.memo.facts.current
    converter = DATA_CONVERTER.payload_converter
    payloads = converter.to_payloads([carried(replica, converter)])
    assert b"memo" not in payloads[0].data
    [decoded] = converter.from_payloads(payloads, [ReplicaState])
    after = unpacked(decoded, converter)
    assert after.instances == replica.instances
    assert not after.memo.facts.current and not after.memo.rows.current
    # What is kept does not make two states differ.
    assert after == replica
