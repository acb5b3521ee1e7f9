"""Held-revision event messages, verbatim from reference §11."""

from __future__ import annotations

import pytest

from models.instance import InstanceSpec, RetryBlock, RetryBlockState
from planning.instance.rules import instance_failed_message
from planning.replica.events import (
    retry_block_release_skipped_no_block,
    retry_block_release_skipped_not_held,
    retry_block_released,
    retry_held,
)
from tests.unit.planning.replica.rows import NEW, NOW

pytestmark = pytest.mark.unit


def _block(state: RetryBlockState) -> RetryBlock:
    return RetryBlock(
        target_revision=NEW,
        state=state,
        attempts_started=3,
        first_failure_at=NOW,
        last_failure_at=NOW,
        reason="ErrImagePull",
    )


def test_retry_held() -> None:
    event = retry_held("prod", "chat-engine", "engine", _block(RetryBlockState.HELD))
    assert (event.type, event.reason) == ("Warning", "RetryHeld")
    assert event.message == (
        f"InferenceReplica prod/chat-engine component=engine update to revision {NEW} held after 3 failed "
        "attempt(s) (last failure: ErrImagePull); publish a corrected revision or raise lifecycle.updateRetry limits"
    )


def test_retry_block_released() -> None:
    event = retry_block_released("prod", "chat-engine", "engine", NEW)
    assert (event.type, event.reason) == ("Normal", "RetryBlockReleased")
    assert event.message == (
        f"InferenceReplica prod/chat-engine component=engine: Held retryBlock for revision {NEW} removed at "
        "operator request (ome.io/release-held-revision annotation)"
    )


def test_release_skipped_without_block() -> None:
    event = retry_block_release_skipped_no_block("prod", "chat-engine", "engine", "deadbeef")
    assert event.reason == "RetryBlockReleaseSkipped"
    assert event.message.endswith(
        'release requested for revision "deadbeef" but no retryBlock exists for it; nothing to release'
    )


def test_release_skipped_not_held() -> None:
    event = retry_block_release_skipped_not_held(
        "prod", "chat-engine", "engine", _block(RetryBlockState.BACKOFF)
    )
    assert event.message.endswith(f"retryBlock for revision {NEW} is Backoff, not Held; nothing to release")


def test_instance_failed_has_one_wording_the_instances() -> None:
    # The InferenceReplica records no InstanceFailed of its own: the Instance's is the one.
    spec = InstanceSpec.model_construct(component="engine", index=2)  # all the wording reads
    assert (
        instance_failed_message(spec, "DeadlineExceeded", "not ready within 30m0s")
        == "OMENative component=engine instance=2 failed (DeadlineExceeded): not ready within 30m0s"
    )
