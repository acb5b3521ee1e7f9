"""A bounded graceful stop for the long-running processes (controller, watcher).

On SIGTERM they follow, cancel what is in flight, release their Lease and stop their watches,
each step bounded on its own. Should one hang all the same, the process must not sit there until
the orchestrator's SIGKILL (15 s `terminationGracePeriodSeconds` in `deploy/`) with no word of
why: `handle_stop_signals` logs, `STOP_BUDGET_SECONDS` after the stop signal, the stack of every
task still running and of every thread, and exits with code 1. Nothing is lost by that: everything durable
lives in Temporal and the cluster, and the next process re-lists; a Lease not released is taken
over once it runs out.
"""

from __future__ import annotations

import asyncio
import faulthandler
import io
import logging
import signal
import socket
import sys
from types import FrameType

from workers.client import exit_process

logger = logging.getLogger("workers.stopping")

STOP_BUDGET_SECONDS = 12.0
"""Seconds from the stop signal to a forced exit: within the deploy's 15 s grace period."""

HARD_EXIT_AFTER_SECONDS = 2.0
"""Further seconds before the C-level watchdog exits even when the event loop itself is blocked."""


def handle_stop_signals(
    loop: asyncio.AbstractEventLoop, stop: asyncio.Event, process: str, budget: float = STOP_BUDGET_SECONDS
) -> None:
    """On SIGTERM or SIGINT: set `stop`, and give the process `budget` seconds to exit before it
    reports what still runs and exits with code 1.

    Plain `signal.signal` handlers, not `loop.add_signal_handler`: those run on the event loop,
    so a loop already held by a blocking call would never arm the watchdog. These run in the
    main thread as soon as the interpreter gets control, arm the C-level timer at once, and hand
    the rest to the loop."""
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

    def on_loop() -> None:
        if not watchdogs:
            watchdogs.append(loop.create_task(report_and_exit(), name=f"{process} stop watchdog"))
        stop.set()

    armed: list[bool] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if not armed:
            armed.append(True)
            # A thread of its own: it fires even when a blocking call holds the event loop.
            faulthandler.dump_traceback_later(budget + HARD_EXIT_AFTER_SECONDS, exit=True, file=sys.stderr)
        loop.call_soon_threadsafe(on_loop)

    # Python runs a handler in the main thread, which may sit in the selector while the kernel
    # hands the signal to another thread (the SDK's and the pools'); a wakeup fd the loop reads
    # makes the selector return at once, as `loop.add_signal_handler` would.
    reader, writer = socket.socketpair()
    reader.setblocking(False)
    writer.setblocking(False)
    loop.add_reader(reader.fileno(), _drain, reader)
    signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    _kept.append((reader, writer))
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, on_signal)


_kept: list[tuple[socket.socket, socket.socket]] = []
"""The wakeup sockets, alive as long as the process."""


def _drain(reader: socket.socket) -> None:
    try:
        reader.recv(4096)
    except BlockingIOError:
        pass
