"""When a long-lived workflow continues as new: at the server's suggestion, or earlier, once
its history reaches `EVENTS` events or `BYTES` bytes.

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
