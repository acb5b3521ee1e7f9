"""What the InferenceReplica's rules read: reports overlaid with the workflow's own knowledge."""

from __future__ import annotations

from datetime import timedelta

import pytest

from models.instance import InstancePhase, RetryBlockState
from planning.replica.budget import UpdatePolicy
from planning.replica.handover import GangSurge
from planning.replica.overlay import earliest, ready_revisions, replica_facts, replica_retry_blocks
from tests.unit.planning.replica.rows import NEW, NOW, OLD
from tests.unit.planning.replica.test_reconcile import block
from tests.unit.planning.replica.test_status import status

pytestmark = pytest.mark.unit


def test_facts_fold_in_requests_deletes_starts_and_handovers() -> None:
    reports = {0: status(0), 1: status(1), 2: status(2)}
    surges = {3: GangSurge(source=2, revision=NEW, started_at=NOW)}
    facts = replica_facts(reports, {3: NEW}, {0: NEW}, [1], surges, UpdatePolicy())
    by_index = {fact.index: fact for fact in facts}
    assert [fact.index for fact in facts] == [0, 1, 2, 3]
    assert (by_index[0].target_revision, by_index[0].operation) == (NEW, "Update")
    assert (by_index[1].phase, by_index[1].operation) == (InstancePhase.DELETING, "Delete")
    assert (by_index[2].target_revision, by_index[2].operation) == (NEW, "Update")
    assert (by_index[3].phase, by_index[3].replaces) == (InstancePhase.CREATING, 2)


def test_a_report_that_shows_the_requested_revision_is_taken_as_it_is() -> None:
    reported = status(0).model_copy(update={"target_revision": NEW})
    (fact,) = replica_facts({0: reported}, {}, {0: NEW}, [], {}, UpdatePolicy())
    assert fact.operation is None


def test_retry_blocks_keep_the_most_advanced_block_of_the_update_revision() -> None:
    reports = [status(0).model_copy(update={"retry_block": block(RetryBlockState.BACKOFF)})]
    kept = [block(RetryBlockState.HELD, attempts=3), block(RetryBlockState.HELD, OLD)]
    assert replica_retry_blocks(reports, kept, NEW) == [kept[0]]


def test_retry_blocks_go_once_an_instance_is_ready_on_the_revision() -> None:
    ready_on_new = status(0).model_copy(update={"running_revision": NEW})
    assert ready_revisions([ready_on_new, status(1)]) == {NEW, OLD}
    assert replica_retry_blocks([ready_on_new], [block(RetryBlockState.HELD)], NEW) == []


def test_earliest() -> None:
    assert earliest(None, None) is None
    assert earliest(NOW + timedelta(seconds=5), None, NOW) == NOW
