"""Telling Instances to delete: the one way a scale-down, a finished handover, a migration and
the component's own deletion ask it, and what the InferenceReplica counts from the asking.

Every Instance told goes on `state.removing` until it reports its end. A run that counts
deletions (`state.counts_deletes`, asked at its start: `COUNTED_DELETES`) also records when it
asked and when that drain becomes overdue (`state.requested_deletes`) and says so in the
request (`DeleteRequest.counted_since`): the Instance then starts its deletion's clock at that
moment and reports only what the parent cannot count itself, its end above all
(`planning.instance.reports.deletion_counted`). A single-pod Instance's deletion is one report
instead of two: on a scale-down of hundreds, hundreds of signals fewer at one workflow.

Imported by the workflow modules inside `workflow.unsafe.imports_passed_through()`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence

from temporalio import workflow

from models.instance import SIGNAL_DELETE as INSTANCE_DELETE
from models.instance import DeleteRequest
from planning.instance.rules import drain_deadline
from planning.replica.template import instance_ready_timeout_seconds
from workflows.replica.children import signal_instance
from workflows.replica.messages import DeleteCounted, ReplicaState

COUNTED_DELETES = "replica-counted-deletes"
"""`workflow.patched` id, asked at each run's start: the run counts the Instances it tells to
delete from its own request (`ReplicaState.counts_deletes`). Runs from before waited for each
Instance's report of its deletion's start."""


LAUNCHED_REMOVALS = "replica-launched-removals"
"""`workflow.patched` id, asked at each run's start: an Instance told to delete before its first
report (only in `ReplicaState.launched`) counts as deleting, not `Creating`
(`ReplicaState.counts_launched_removals`). A single-pod Instance told so sends no report until
its end (its parent counts its start and its deletion from its own records), and runs from
before counted it as live until then: each pass meanwhile planned its removal again, told it
again and put its index on `removing` once more, where its end took off one entry and left the
index reserved for good."""


def count_launched_removals(state: ReplicaState) -> None:
    """Take `LAUNCHED_REMOVALS` for this run (at its start) and, when taken, leave `removing`
    holding each Instance still present once: a run before may have left an index twice, or
    left one whose Instance has ended (nothing else takes it off)."""
    state.counts_launched_removals = workflow.patched(LAUNCHED_REMOVALS)
    if state.counts_launched_removals:
        present = set(state.instances) | set(state.launched)
        state.removing = [index for index in dict.fromkeys(state.removing) if index in present]


def tell_to_delete(state: ReplicaState, indexes: Sequence[int], reason: str) -> list[Awaitable[None]]:
    """Tell each of `indexes` to drain and delete itself for `reason`: the signals to send (in
    one workflow task, `children.send_all`), with the state already counting them."""
    config = state.config
    counted: DeleteCounted | None = None
    if state.counts_deletes:
        now = workflow.now()
        # Every Instance runs the component's lifecycle settings: a change of them is sent to
        # all (`instances.resend_lifecycle`), so the timeout is the config's.
        timeout = instance_ready_timeout_seconds(config.effective, config.cluster)
        counted = DeleteCounted(since=now, deadline=drain_deadline(now, timeout))
    request = (
        DeleteRequest(
            reason=reason, counted_since=counted.since, drain_deadline=counted.deadline, drain_deadline_said=True
        )
        if counted is not None
        else DeleteRequest(reason=reason)
    )
    sends: list[Awaitable[None]] = []
    for index in indexes:
        if not (state.counts_launched_removals and index in state.removing):
            state.removing.append(index)
        if counted is not None:
            state.requested_deletes[index] = counted
        sends.append(signal_instance(config, index, INSTANCE_DELETE, request))
    return sends
