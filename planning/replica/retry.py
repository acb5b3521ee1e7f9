"""Retry blocks of a revision, their release, and what follows an Instance's failure.

Retry blocks (spec reference §8, §11) are revision-scoped and shared by every Instance of
the component. Only a failure that is the revision's own fault counts: `ImagePullBackOff`,
`ErrImagePull`, `InvalidImageName`, `CreateContainerConfigError`, `InvalidPodSpec`; never a
crash loop or a readiness timeout. With the chart's `updateRetry` (three attempts; the 2nd
one minute after the 1st failure, the 3rd two minutes after the 2nd) a block goes
`Backoff` -> `RetryInProgress` -> `Backoff` ... and ends `Held` when the attempts are used
up; without a policy the first counting failure holds. An Instance that becomes Ready on
the revision removes its block; a new update revision makes blocks of other revisions moot.
A `release_held` request removes a Held block (and only a Held one).

What follows a failure that holds nothing (a crash loop, a missed deadline) is the
Instance's own rule: it rebuilds after `planning.instance.rules.rebuild_delay_seconds`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from models.instance import RetryBlock, RetryBlockState, UpdateRetryPolicy

COUNTING_FAILURE_REASONS = frozenset(
    {"ImagePullBackOff", "ErrImagePull", "InvalidImageName", "CreateContainerConfigError", "InvalidPodSpec"}
)

CHART_UPDATE_RETRY = UpdateRetryPolicy(max_attempts=3, attempt_delays_seconds=[60.0, 120.0])


def is_counting_failure(reason: str | None) -> bool:
    """Whether a failure is the revision's own fault and counts toward holding it."""
    return reason in COUNTING_FAILURE_REASONS


def retry_delay(policy: UpdateRetryPolicy, failed_attempt: int) -> timedelta:
    """The wait after attempt number `failed_attempt` (1-based) fails; the last delay repeats."""
    delays = policy.attempt_delays_seconds or [0.0]
    position = min(max(failed_attempt, 1), len(delays)) - 1
    return timedelta(seconds=delays[position])


@dataclass(frozen=True)
class BlockChange:
    """The block after an event, and whether this event is the one that held it."""

    block: RetryBlock | None
    newly_held: bool = False


def record_counting_failure(
    block: RetryBlock | None,
    revision: str,
    reason: str,
    now: datetime,
    policy: UpdateRetryPolicy | None,
) -> BlockChange:
    """Fold one counting failure of an attempt at `revision` into its block.

    A failure reported while the block is already in Backoff or Held (another Instance of
    the same attempt wave) updates the last failure only: it used no new attempt.
    """
    if block is None or block.target_revision != revision:
        block = RetryBlock(
            target_revision=revision,
            state=RetryBlockState.RETRY_IN_PROGRESS,
            attempts_started=1,
            first_failure_at=now,
            last_failure_at=now,
            reason=reason,
        )
    elif block.state != RetryBlockState.RETRY_IN_PROGRESS:
        return BlockChange(block.model_copy(update={"last_failure_at": now, "reason": reason}))
    attempts = block.attempts_started
    if policy is None or attempts >= policy.max_attempts:
        held = block.model_copy(
            update={
                "state": RetryBlockState.HELD,
                "next_retry_at": None,
                "last_failure_at": now,
                "reason": reason,
            }
        )
        return BlockChange(held, newly_held=True)
    backoff = block.model_copy(
        update={
            "state": RetryBlockState.BACKOFF,
            "next_retry_at": now + retry_delay(policy, attempts),
            "last_failure_at": now,
            "reason": reason,
        }
    )
    return BlockChange(backoff)


def start_retry_attempt(block: RetryBlock) -> RetryBlock:
    """A Backoff block whose time has come starts its next attempt."""
    if block.state != RetryBlockState.BACKOFF:
        return block
    return block.model_copy(
        update={
            "state": RetryBlockState.RETRY_IN_PROGRESS,
            "attempts_started": block.attempts_started + 1,
            "next_retry_at": None,
        }
    )


def current_blocks(
    blocks: Sequence[RetryBlock], update_revision: str | None, ready_revisions: set[str]
) -> list[RetryBlock]:
    """Blocks that still matter: those of the update revision that nothing has proved good.

    A new revision replaces a held one (its block goes), and an Instance Ready on the
    block's revision proves the revision can run (the block goes).
    """
    return [
        block
        for block in blocks
        if block.target_revision == update_revision and block.target_revision not in ready_revisions
    ]


def revision_matches(target_revision: str, requested: str) -> bool:
    """A release names the full revision, its hash, or the hash's first 8 characters."""
    if not requested:
        return False
    if requested == target_revision:
        return True
    digest = target_revision.rsplit("-", 1)[-1]
    return requested == digest or (len(requested) == 8 and digest.startswith(requested))


def absorb_abandoned_surge(
    kept: RetryBlock | None,
    reported: RetryBlock | None,
    revision: str,
    failure_reason: str | None,
    now: datetime,
    policy: UpdateRetryPolicy | None,
) -> RetryBlock | None:
    """The InferenceReplica's block for `revision` after a gang surge replacement gave up.

    The replacement deletes itself (`GangSurgeAbandoned`), and its block with it, so the
    InferenceReplica keeps the block and starts the next attempt itself. Each replacement
    is a new Instance that counts its own attempts from one, so the kept block is the
    record: a counting failure of the attempt it started is folded into it; the first one
    with no kept block takes the replacement's block as it is. A failure that is not the
    revision's fault uses no attempt: a block waiting for that attempt is due again now.
    """
    if kept is not None and kept.target_revision != revision:
        kept = None
    if is_counting_failure(failure_reason) and failure_reason is not None:
        if kept is not None and kept.state == RetryBlockState.RETRY_IN_PROGRESS:
            return record_counting_failure(kept, revision, failure_reason, now, policy).block
        if kept is None and reported is not None and reported.target_revision == revision:
            return reported
        if kept is None:
            return record_counting_failure(None, revision, failure_reason, now, policy).block
        return kept.model_copy(update={"last_failure_at": now, "reason": failure_reason})
    if kept is not None and kept.state == RetryBlockState.RETRY_IN_PROGRESS:
        return kept.model_copy(
            update={
                "state": RetryBlockState.BACKOFF,
                "attempts_started": max(0, kept.attempts_started - 1),
                "next_retry_at": now,
            }
        )
    return kept


class ReleaseResult(StrEnum):
    RELEASED = "Released"
    NO_BLOCK = "NoBlock"
    NOT_HELD = "NotHeld"


@dataclass(frozen=True)
class ReleaseOutcome:
    result: ReleaseResult
    blocks: tuple[RetryBlock, ...]
    """The blocks after the request (the released one removed)."""
    block: RetryBlock | None = None
    """The block the request named, when there is one."""


def release_held(blocks: Sequence[RetryBlock], requested: str) -> ReleaseOutcome:
    """Remove the Held block the request names; anything else is skipped, never changed."""
    for block in blocks:
        if not revision_matches(block.target_revision, requested):
            continue
        if block.state != RetryBlockState.HELD:
            return ReleaseOutcome(ReleaseResult.NOT_HELD, tuple(blocks), block)
        remaining = tuple(other for other in blocks if other is not block)
        return ReleaseOutcome(ReleaseResult.RELEASED, remaining, block)
    return ReleaseOutcome(ReleaseResult.NO_BLOCK, tuple(blocks))
