"""What the signal verbs read before sending (spec reference §3.3 step 1: validate, read, refuse
if unsafe, nothing changed). A signal has no answer, so without this a refused `pause`,
`resume` or `release-held` would exit 0: the CLI reads what the workflow would decide on and
refuses with the reference's text (exit 1) before anything is sent.

The decisions are the workflows' own (`planning.service.pause`, `planning.replica.retry`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from temporalio.client import Client

from models.inferencereplica import RetryBlockRow
from planning.replica.retry import revision_matches
from planning.service.pause import PauseMode, parse_pause_mode, request_pause, request_resume
from workers.omectl import reads
from workers.omectl.session import CommandFailed
from workflows.names import irep_workflow_id, isvc_workflow_id

Guard = Callable[[Client], Awaitable[None]]
"""Reads, and raises `CommandFailed` (exit 1) when the action would be refused."""

REFUSED_NOT_RELEASABLE = "action refused: no exact current valid Held retry block is releasable"
REFUSED_DELETING = "action refused: target is being deleted"


def pause_refusal(current: str | None, freeze: bool) -> str | None:
    """The workflow's answer to `pause` (a freeze is never downgraded; the same depth twice is
    refused), None when it would pause."""
    requested = PauseMode.FREEZE if freeze else PauseMode.RECOVER
    return request_pause(parse_pause_mode(current), requested, active_work=True).refusal


def resume_refusal(current: str | None) -> str | None:
    return request_resume(parse_pause_mode(current)).refusal


def release_refusal(blocks: Sequence[RetryBlockRow], revision: str, deleting: bool = False) -> str | None:
    """Refused unless a Held block names `revision` (full name, hash or 8-hex prefix, §11)."""
    if deleting:
        return REFUSED_NOT_RELEASABLE
    if any(block.state == "Held" and revision_matches(block.target_revision, revision) for block in blocks):
        return None
    return REFUSED_NOT_RELEASABLE


def refuse(refusal: str | None) -> None:
    if refusal is not None:
        raise CommandFailed(refusal)


def pause(namespace: str, isvc: str, freeze: bool) -> Guard:
    async def check(temporal: Client) -> None:
        view = await reads.service_status(temporal, isvc_workflow_id(namespace, isvc))
        refuse(REFUSED_DELETING if view.deleting else pause_refusal(view.pause, freeze))

    return check


def resume(namespace: str, isvc: str) -> Guard:
    async def check(temporal: Client) -> None:
        view = await reads.service_status(temporal, isvc_workflow_id(namespace, isvc))
        refuse(resume_refusal(view.pause))

    return check


def release_held(namespace: str, isvc: str, component: str, revision: str) -> Guard:
    async def check(temporal: Client) -> None:
        view = await reads.service_status(temporal, isvc_workflow_id(namespace, isvc))
        answer = await reads.replica_status(temporal, irep_workflow_id(namespace, isvc, component))
        refuse(release_refusal(answer.retry_blocks, revision, view.deleting))

    return check
