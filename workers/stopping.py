"""A bounded graceful stop for the long-running processes (controller, watcher).

On SIGTERM they follow, cancel what is in flight, release their Lease and stop their watches,
each step bounded on its own. Should one hang all the same, the process must not sit there until
the orchestrator's SIGKILL (15 s `terminationGracePeriodSeconds` in `deploy/`) with no word of
why: `stop_on_signal` logs, `STOP_BUDGET_SECONDS` after the stop signal, the stack of every task still
running and of every thread, and exits with code 1. Nothing is lost by that: everything durable
lives in Temporal and the cluster, and the next process re-lists; a Lease not released is taken
over once it runs out.
"""

from __future__ import annotations

import asyncio
import faulthandler
import io
import logging
import sys
from collections.abc import Callable

from workers.client import exit_process

logger = logging.getLogger("workers.stopping")

STOP_BUDGET_SECONDS = 12.0
"""Seconds from the stop signal to a forced exit: within the deploy's 15 s grace period."""

HARD_EXIT_AFTER_SECONDS = 2.0
"""Further seconds before the C-level watchdog exits even when the event loop itself is blocked."""


def stop_on_signal(stop: asyncio.Event, process: str, budget: float = STOP_BUDGET_SECONDS) -> Callable[[], None]:
    """The SIGTERM/SIGINT handler (`loop.add_signal_handler`): set `stop`, and give the process
    `budget` seconds to exit before it reports what still runs and exits with code 1."""
    watchdogs: list[asyncio.Task[None]] = []

    async def report_and_exit() -> None:
        await asyncio.sleep(budget)
        logger.error(
            "%s did not stop within %gs of the stop signal: exiting with code 1; what still runs follows",
            process, budget,
        )  # fmt: skip
        report = io.StringIO()
        for task in asyncio.all_tasks():
            if task is not asyncio.current_task():
                task.print_stack(limit=8, file=report)
        logger.error("%s tasks still running:\n%s", process, report.getvalue())
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        exit_process(1)

    def on_signal() -> None:
        if not watchdogs:
            # A thread of its own fires too, should a blocking call hold the event loop itself.
            faulthandler.dump_traceback_later(budget + HARD_EXIT_AFTER_SECONDS, exit=True, file=sys.stderr)
            watchdogs.append(asyncio.get_running_loop().create_task(report_and_exit(), name=f"{process} stop watchdog"))
        stop.set()

    return on_signal
