"""Retry blocks and their release (reference §11)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from models.instance import RetryBlock, RetryBlockState, UpdateRetryPolicy
from planning.replica.retry import (
    CHART_UPDATE_RETRY,
    ReleaseResult,
    current_blocks,
    is_counting_failure,
    record_counting_failure,
    release_held,
    retry_delay,
    revision_matches,
    start_retry_attempt,
)
from tests.unit.planning.replica.rows import NEW, NOW, OLD

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("reason", "counting"),
    [
        ("ImagePullBackOff", True),
        ("ErrImagePull", True),
        ("InvalidImageName", True),
        ("CreateContainerConfigError", True),
        ("InvalidPodSpec", True),
        ("CrashLoopBackOff", False),
        ("DeadlineExceeded", False),
        ("ContainersNotReady", False),
        ("Unschedulable", False),
        (None, False),
    ],
)
def test_counting_failures(reason: str | None, counting: bool) -> None:
    assert is_counting_failure(reason) is counting


def test_chart_policy_walks_backoff_then_holds() -> None:
    first = record_counting_failure(None, NEW, "ErrImagePull", NOW, CHART_UPDATE_RETRY)
    assert first.block is not None and not first.newly_held
    assert first.block.state == RetryBlockState.BACKOFF
    assert first.block.attempts_started == 1
    assert first.block.next_retry_at == NOW + timedelta(minutes=1)

    second_start = start_retry_attempt(first.block)
    assert second_start.state == RetryBlockState.RETRY_IN_PROGRESS
    assert second_start.attempts_started == 2
    later = NOW + timedelta(minutes=2)
    second = record_counting_failure(second_start, NEW, "ImagePullBackOff", later, CHART_UPDATE_RETRY)
    assert second.block is not None and second.block.state == RetryBlockState.BACKOFF
    assert second.block.next_retry_at == later + timedelta(minutes=2)

    third_start = start_retry_attempt(second.block)
    assert third_start.attempts_started == 3
    third = record_counting_failure(third_start, NEW, "ErrImagePull", later, CHART_UPDATE_RETRY)
    assert third.newly_held
    assert third.block is not None and third.block.state == RetryBlockState.HELD
    assert third.block.first_failure_at == NOW
    assert third.block.reason == "ErrImagePull"


def test_without_policy_the_first_failure_holds() -> None:
    change = record_counting_failure(None, NEW, "ErrImagePull", NOW, None)
    assert change.newly_held
    assert change.block is not None and change.block.attempts_started == 1


def test_a_second_failure_in_backoff_uses_no_attempt() -> None:
    first = record_counting_failure(None, NEW, "ErrImagePull", NOW, CHART_UPDATE_RETRY).block
    assert first is not None
    again = record_counting_failure(first, NEW, "ImagePullBackOff", NOW, CHART_UPDATE_RETRY)
    assert again.block is not None
    assert again.block.attempts_started == 1
    assert again.block.state == RetryBlockState.BACKOFF
    assert again.block.reason == "ImagePullBackOff"


def test_a_failure_of_a_new_revision_starts_a_fresh_block() -> None:
    held = record_counting_failure(None, OLD, "ErrImagePull", NOW, None).block
    fresh = record_counting_failure(held, NEW, "ErrImagePull", NOW, CHART_UPDATE_RETRY).block
    assert fresh is not None and fresh.target_revision == NEW and fresh.state == RetryBlockState.BACKOFF


@pytest.mark.parametrize(("attempt", "seconds"), [(1, 60), (2, 120), (3, 120), (0, 60)])
def test_retry_delays(attempt: int, seconds: float) -> None:
    assert retry_delay(CHART_UPDATE_RETRY, attempt) == timedelta(seconds=seconds)


def test_raising_limits_does_not_release_an_existing_hold() -> None:
    held = record_counting_failure(None, NEW, "ErrImagePull", NOW, None).block
    assert held is not None
    again = record_counting_failure(held, NEW, "ErrImagePull", NOW, UpdateRetryPolicy(max_attempts=10))
    assert again.block is not None and again.block.state == RetryBlockState.HELD


def _block(state: RetryBlockState, revision: str = NEW) -> RetryBlock:
    return RetryBlock(
        target_revision=revision,
        state=state,
        attempts_started=3,
        first_failure_at=NOW,
        last_failure_at=NOW,
        reason="ErrImagePull",
    )


@pytest.mark.parametrize(
    ("requested", "matches"),
    [
        (NEW, True),
        ("bbbbbbbb", True),
        ("aaaaaaaa", False),
        ("bbbb", False),
        ("", False),
    ],
)
def test_revision_matches(requested: str, matches: bool) -> None:
    assert revision_matches(NEW, requested) is matches


def test_release_removes_a_held_block() -> None:
    outcome = release_held([_block(RetryBlockState.HELD)], "bbbbbbbb")
    assert outcome.result == ReleaseResult.RELEASED
    assert outcome.blocks == ()
    assert outcome.block is not None and outcome.block.target_revision == NEW


def test_release_skips_a_block_that_is_not_held() -> None:
    blocks = [_block(RetryBlockState.BACKOFF)]
    outcome = release_held(blocks, NEW)
    assert outcome.result == ReleaseResult.NOT_HELD
    assert outcome.blocks == tuple(blocks)


def test_release_without_a_block() -> None:
    outcome = release_held([_block(RetryBlockState.HELD, OLD)], "bbbbbbbb")
    assert outcome.result == ReleaseResult.NO_BLOCK
    assert len(outcome.blocks) == 1


def test_current_blocks_drop_replaced_and_proven_revisions() -> None:
    blocks = [_block(RetryBlockState.HELD, OLD), _block(RetryBlockState.BACKOFF, NEW)]
    assert [b.target_revision for b in current_blocks(blocks, NEW, set())] == [NEW]
    assert current_blocks(blocks, NEW, {NEW}) == []
