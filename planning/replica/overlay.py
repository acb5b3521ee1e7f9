"""What the InferenceReplica's rules read: its Instances' reports, overlaid with what the
workflow knows and the Instances do not say.

The workflow folds its own requests into its view at once (an update signalled, an Instance
started, a delete sent), so a second pass before the Instance answers neither repeats the
request nor spends the budget twice. On top of that lie the multi-pod handovers in flight
(`planning.replica.handover`), which only the InferenceReplica knows of, and the retry
blocks it keeps from surge replacements that gave up and deleted themselves.

Each rule here was once an override in a chain of workflow mixins; it is spelled out once.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime

from models.instance import InstanceOperation, InstancePhase, InstanceStatus, RetryBlock
from planning.replica.budget import UpdatePolicy
from planning.replica.facts import InstanceFacts, facts_from_status
from planning.replica.handover import GangSurge, with_handovers
from planning.replica.reconcile import aggregate_blocks, with_target
from planning.replica.retry import current_blocks


def ready_revisions(reports: Iterable[InstanceStatus]) -> set[str]:
    """Revisions some Instance is Ready on: proof that they can run (their blocks go)."""
    return {status.running_revision for status in reports if status.ready and status.running_revision}


def as_counted(status: InstanceStatus, requested: str | None) -> InstanceStatus:
    """`status`, or, when it is still Ready on another revision than the update `requested` of
    it, as the Instance's report of that update's start would show it (`Updating` to
    `requested`): such an Instance sends none when counted from the request
    (`UpdateRequest.counted_by_parent`)."""
    if requested is None or status.target_revision == requested or status.phase != InstancePhase.READY:
        return status
    return status.model_copy(update={"phase": InstancePhase.UPDATING, "target_revision": requested})


COUNTED_DELETE_ID = "delete"
"""The id a counted deletion's operation shows in the parent's rows until the Instance reports
its own (`delete-<n>`, numbered by the Instance)."""


def out_of_rotation(status: InstanceStatus) -> InstanceStatus:
    """`status` as an Instance told to delete shows it at once: out of rotation (serving
    nothing), its pods still counted, unless it reported its deletion already."""
    if status.phase == InstancePhase.DELETING or status.deleted:
        return status
    return status.model_copy(
        update={
            "draining": True,
            "serving": False,
            "serving_pods": 0,
            "available": False,
            "available_pods": 0,
        }
    )


def as_deleting(status: InstanceStatus, since: datetime, deadline: datetime | None) -> InstanceStatus:
    """`status`, or, unless it shows its deletion already, as the Instance's report of the
    deletion's start would show it: `Deleting` out of rotation, its Delete operation started
    `since` (the request) with its drain `deadline`. Such an Instance sends none when its
    parent counts the deletion from its request (`DeleteRequest.counted_since`)."""
    if status.phase == InstancePhase.DELETING or status.deleted:
        return status
    operation = InstanceOperation(
        id=COUNTED_DELETE_ID, type="Delete", step="Drain", started_at=since, deadline=deadline,
        target_revision=status.target_revision,
    )  # fmt: skip
    return out_of_rotation(status).model_copy(update={"phase": InstancePhase.DELETING, "operation": operation})


def replica_facts(
    reports: Mapping[int, InstanceStatus],
    launched: Mapping[int, str],
    requested_updates: Mapping[int, str],
    removing: Sequence[int],
    surges: Mapping[int, GangSurge],
    policy: UpdatePolicy,
    counts_requested: bool = False,
    counted_deletes: Collection[int] = (),
    launched_removals: bool = False,
    facts_of: Callable[[InstanceStatus], InstanceFacts] = facts_from_status,
) -> list[InstanceFacts]:
    """The rows the rules read, by index.

    Each report, moved to the revision an update was requested for (until the report shows
    it), and (`counts_requested`) shown `Updating` as the Instance's report of the update's
    start would show it, since such an Instance sends none (`UpdateRequest.counted_by_parent`);
    or shown deleting once a delete was sent, and out of rotation where the delete is counted
    from the request (`counted_deletes`: such an Instance reports only its end); an Instance
    started and not heard from yet, as `Creating`, or (`launched_removals`) as deleting once
    told to go, since one told before its first report may send none until its end: counted
    as live, it would be planned for removal again by every pass until then; then the
    handovers in flight (`with_handovers`). `facts_of`: `facts_from_status`, or one that keeps
    its results (`workflows.replica.memo`).
    """
    facts: dict[int, InstanceFacts] = {}
    for index, status in reports.items():
        requested = requested_updates.get(index)
        if index in counted_deletes:
            status = out_of_rotation(status)
        fact = facts_of(as_counted(status, requested) if counts_requested else status)
        if requested is not None and status.target_revision != requested:
            fact = with_target(fact, requested, policy)
        if index in removing:
            fact = replace(fact, phase=InstancePhase.DELETING, operation="Delete")
        facts[index] = fact
    for index, revision in launched.items():
        if index in facts:
            continue
        leaving = launched_removals and index in removing
        facts[index] = InstanceFacts(
            index=index,
            phase=InstancePhase.DELETING if leaving else InstancePhase.CREATING,
            target_revision=revision,
            operation="Delete" if leaving else "Create",
            has_pods=False,
        )
    return with_handovers([facts[index] for index in sorted(facts)], surges)


def replica_retry_blocks(
    reports: Iterable[InstanceStatus], kept: Sequence[RetryBlock], update_revision: str
) -> list[RetryBlock]:
    """The update revision's block: the Instances' own, and those kept from surge
    replacements that gave up (`kept`); none once an Instance is Ready on the revision."""
    reports = list(reports)
    ready = ready_revisions(reports)
    reported = current_blocks(aggregate_blocks([status.retry_block for status in reports]), update_revision, ready)
    return current_blocks(aggregate_blocks([*reported, *kept]), update_revision, ready)


def earliest(*moments: datetime | None) -> datetime | None:
    """The first of the moments given; None when none is."""
    present = [moment for moment in moments if moment is not None]
    return min(present) if present else None
