"""When a long-lived workflow continues as new: at the server's suggestion, or earlier, once
its history reaches `EVENTS` events or `BYTES` bytes.

The server suggests continue-as-new at about 4,000 events; an InferenceReplica of 20 Instances
is then at 2.3 MB, and replaying that after an evicted task (a worker restart, a task that
timed out) took ~9.5 s on the 2-core machine, near the 10 s workflow task timeout: one slow
task, and every retry replays and times out again. Half of that keeps a replay a few seconds.
Each workflow asks under a patch id of its own, only when the budget is first reached, so a
history recorded before goes on as it did.
"""

from __future__ import annotations

from temporalio import workflow

EVENTS = 2_000
BYTES = 1_000_000


def hands_over(patch: str) -> bool:
    """Whether the run continues as new now (from `patch` on, also at the budget)."""
    info = workflow.info()
    if info.is_continue_as_new_suggested():
        return True
    over = info.get_current_history_length() >= EVENTS or info.get_current_history_size() >= BYTES
    return over and workflow.patched(patch)
