"""When a long-lived workflow continues as new: at the server's suggestion, or earlier, once
its history reaches `EVENTS` events or `BYTES` bytes; and, a workflow that knows it is at rest
(the InferenceReplica: `workflows.replica.rest`), from `AT_REST_EVENTS` events on.

The server suggests continue-as-new at about 4,000 events; an InferenceReplica of 20 Instances
is then at 2.3 MB, and replaying that after an evicted task (a worker restart, a task that
timed out) took ~9.5 s on the 2-core machine, near the 10 s workflow task timeout: one slow
task, and every retry replays and times out again. Half of that keeps a replay a few seconds.
Each workflow asks under a patch id of its own, only when the budget is first reached, so a
history recorded before goes on as it did.

The bytes are counted from the run's start (`GROWTH`): a run starts with its state as its input,
and an InferenceReplica of 2,000 Instances carries about 1.4 MB of it, so counting the whole
history had it continue as new at every rest (each new run decoding the state again and the
server storing it again: 13% of the worker's CPU while 2,000 Instances came up).
"""

from __future__ import annotations

from temporalio import workflow

EVENTS = 2_000
BYTES = 1_000_000
AT_REST_EVENTS = 500
"""A run at rest continues as new once its history has this many events (`hands_over_at_rest`).
Midway through a rollout, a continue-as-new competes with the reports still arriving: each one
that lands while its task runs fails that task (`UnhandledCommand`), and the retry replays the
whole history. On the bench (200 Instances, an image change) one such hand-over held the
InferenceReplica still for 1.2 s of a 6 s update, its task failing twice. At rest no such
stream arrives, and the next rollout (one of 200 Instances writes some 1,300 events) starts
with most of the budget."""
GROWTH = "history-budget-counts-growth"
"""`workflow.patched` id: runs from it on count `BYTES` from the run's start."""


def start_size() -> int:
    """The history's size at the run's first task (its input, mostly): call it there."""
    return workflow.info().get_current_history_size()


def hands_over(patch: str, started_at_size: int) -> bool:
    """Whether the run continues as new now (from `patch` on, also at the budget);
    `started_at_size` is `start_size()` of this run."""
    info = workflow.info()
    if info.is_continue_as_new_suggested():
        return True
    length, size = info.get_current_history_length(), info.get_current_history_size()
    if (length < EVENTS and size < BYTES) or not workflow.patched(patch):
        return False
    if length >= EVENTS:
        return True
    return size - started_at_size >= BYTES or not workflow.patched(GROWTH)


def hands_over_at_rest(patch: str) -> bool:
    """Whether a run at rest (the caller knows) continues as new now: from `patch` on, once its
    history has `AT_REST_EVENTS` events."""
    return workflow.info().get_current_history_length() >= AT_REST_EVENTS and workflow.patched(patch)
