"""`omectl rollout status --watch`: read the service about every second and redraw its tree as
it changes (like `kubectl argo rollouts get rollout --watch`), until Ctrl-C or, with
`--until-done`, until the rollout has finished.

On a terminal the tree is redrawn in place (Rich Live). Piped, a new frame is printed only when
its content changed, each after a `--- <time>` line, so a script (or a test) reads one frame
per change.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from enum import StrEnum

from rich.console import Console
from rich.live import Live
from rich.text import Text
from temporalio.client import WorkflowQueryFailedError
from temporalio.service import RPCError

from workers.omectl.rollout_reads import not_found
from workers.omectl.rollout_tree import StatusSnapshot, render_text, same_revision, status_tree
from workers.omectl.session import stderr

POLL_SECONDS = 1.0
"""How often the queries are asked: a person sees a change within a second, and a query is cheap."""

SETTLED_POLLS = 3
"""Readings in a row that show nothing moving before `--until-done` ends on a service it never
saw move: an apply the workflow has not acted on yet looks at rest for a moment."""

FAILED_PHASES = frozenset({"Failed", "RolledBack"})
FRAME_MARK = "--- "


class Progress(StrEnum):
    MOVING = "Moving"
    COMPLETE = "Complete"
    FAILED = "Failed"


def progress_of(snapshot: StatusSnapshot, watched_runs: frozenset[int] = frozenset()) -> Progress:
    """Whether the service's change is done: the run failed or rolled back (the active run, or one
    this watch saw active: a run that closed before the watch began is an earlier change's), or
    no run is active and every OMENative component serves its update revision on every Instance."""
    rollout = snapshot.rollout
    phases = {rollout.reported, *(row.phase for row in rollout.rows), *(row.group_phase for row in rollout.rows)}
    ours = rollout.active or (rollout.run is not None and rollout.run in watched_runs)
    if ours and phases & FAILED_PHASES:
        return Progress.FAILED
    if rollout.active or snapshot.unread:
        return Progress.MOVING
    ready = snapshot.service.status.condition("Ready")
    if ready is None or ready.status != "True":
        return Progress.MOVING
    for replica in snapshot.replicas.values():
        if replica.current_revision != replica.update_revision:
            return Progress.MOVING
        if replica.updated_ready_replicas != replica.replicas:
            return Progress.MOVING
        if not all(same_revision(row.running_revision, replica.update_revision) for row in replica.instance_statuses):
            return Progress.MOVING
    return Progress.COMPLETE


async def watch(
    read: Callable[[], Awaitable[StatusSnapshot]],
    console: Console,
    *,
    until_done: bool,
    poll_seconds: float = POLL_SECONDS,
) -> Progress | None:
    """Redraw until interrupted (None) or, `until_done`, until the change is complete or failed."""
    if console.is_terminal:
        with Live(console=console, auto_refresh=False) as live:
            return await poll(read, lambda s: live.update(status_tree(s), refresh=True), until_done, poll_seconds)
    last: list[str] = [""]

    def print_changed(snapshot: StatusSnapshot) -> None:
        text = render_text(status_tree(snapshot))
        if text != last[0]:
            last[0] = text
            console.print(f"{FRAME_MARK}{datetime.now(UTC):%H:%M:%S}", markup=False, highlight=False)
            console.print(Text(text.rstrip("\n")), highlight=False, soft_wrap=True)
            console.file.flush()

    return await poll(read, print_changed, until_done, poll_seconds)


async def poll(
    read: Callable[[], Awaitable[StatusSnapshot]],
    show: Callable[[StatusSnapshot], None],
    until_done: bool,
    poll_seconds: float,
) -> Progress | None:
    moved, settled = False, 0
    watched_runs: set[int] = set()
    waiting = False
    while True:
        try:
            snapshot = await read()
        except (RPCError, WorkflowQueryFailedError) as error:
            if not_found(error):
                raise
            # A worker restarting or busy: keep the last frame and ask again.
            if not waiting:
                stderr.print(f"waiting for the workflows to answer: {error}", markup=False)
            waiting = True
            await asyncio.sleep(poll_seconds)
            continue
        waiting = False
        show(snapshot)
        if snapshot.rollout.active and snapshot.rollout.run is not None:
            watched_runs.add(snapshot.rollout.run)
        progress = progress_of(snapshot, frozenset(watched_runs))
        if progress is Progress.MOVING:
            moved, settled = True, 0
        else:
            settled += 1
        if until_done and progress is Progress.FAILED:
            return progress
        if until_done and progress is Progress.COMPLETE and (moved or settled >= SETTLED_POLLS):
            return progress
        await asyncio.sleep(poll_seconds)
