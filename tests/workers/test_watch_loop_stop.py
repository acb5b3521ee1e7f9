"""A watch loop stops when told, even when the stop lands just as a watch event arrives.

On Python 3.11 `asyncio.wait_for` returns the item when a cancel lands while its `queue.get()`
has just been given one, and drops the cancel (python/cpython#86296): the controller's loop then
went back to `queue.get()` and `stop()` waited forever for it (the chaos test's controller did
not exit within 30 s of SIGTERM). The loop waits with `asyncio.timeout` instead.
"""

from __future__ import annotations

import asyncio
import logging

from workers.watch.loop import WatchLoop
from workers.watch.stream import WatchItem


class Counting(WatchLoop):
    """No kinds; counts what it takes, never has anything to send."""

    def __init__(self) -> None:
        super().__init__([], coalesce_seconds=5.0, logger=logging.getLogger("test"))
        self.taken = 0

    def _apply(self, item: WatchItem) -> None:
        self.taken += 1

    async def _flush(self) -> None:
        self._after_flush(False)

    def _has_dirty(self) -> bool:
        return False


async def test_a_stop_that_lands_with_a_watch_event_still_stops_the_loop() -> None:
    loop = Counting()
    await loop.start()
    assert loop._queue is not None and loop._task is not None
    task = loop._task
    loop._queue.put_nowait(WatchItem("pods", "ADDED"))
    # The first event opens the 5 s coalescing window: the loop now waits there for more.
    await asyncio.sleep(0.1)
    assert loop.taken == 1
    # In one step, before the loop runs again: the next event arrives and the stop comes.
    loop._queue.put_nowait(WatchItem("pods", "MODIFIED"))
    stopping = asyncio.ensure_future(loop.stop())
    done, _ = await asyncio.wait({stopping}, timeout=2)  # (no cancel of the stop on timeout)
    try:
        assert stopping in done, "stop() still waiting for the loop 2 s later"
    finally:
        task.cancel()  # a second cancel, which the loop does not lose, ends it either way
        await stopping
