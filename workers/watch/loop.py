"""The loop both watchers share: list+watch threads feed a queue, bursts are coalesced, and
each pass signals what changed, retrying failed signals with back-off.

`PodWatcher` (workers/watch/pods.py) and `DeploymentWatcher` (workers/watch/deployments.py)
differ only in what they keep and whom they signal; they implement `_apply` (fold one watch
event into their view, marking what is dirty), `_flush` (signal the dirty keys, leave the
failed ones dirty) and, when a pass needs more than one kind listed first, `_ready`.

Under leader election (`workers.leader`) a loop starts as a follower (`follow()`): it lists and
watches like the leader, so its view is warm, but runs no pass and sends nothing until
`lead()`, and stops sending at the next `follow()`, which cancels the pass in flight (what it
had not sent stays dirty) and returns once it has ended.
"""

from __future__ import annotations

import abc
import asyncio
import logging

from workers.watch.stream import KindWatch, WatchItem

FIRST_RETRY_SECONDS = 0.5
LONGEST_RETRY_SECONDS = 30.0
STANDBY_GONE_KEPT = 10_000
"""A standby keeps what it needs to hand over at most this many deleted objects (Instances,
InferenceServices): the leader handles a deletion within seconds, so only the last ones before
a takeover can be pending; the oldest are forgotten, so a long-lived standby stays bounded."""
LEAD = WatchItem("lead", "BOOKMARK")
"""Posted by `lead()` to wake the pass loop; it changes no view."""


class WatchLoop(abc.ABC):
    """Start/stop the watches and run the coalescing pass loop; subclasses say what a pass does."""

    name = "watcher"
    """Task name and log label."""

    def __init__(self, kinds: list[KindWatch], coalesce_seconds: float, logger: logging.Logger) -> None:
        self._kinds = kinds
        self.coalesce_seconds = coalesce_seconds
        self._logger = logger
        self._queue: asyncio.Queue[WatchItem] | None = None
        self._task: asyncio.Task[None] | None = None
        self._synced_event = asyncio.Event()
        self._retry_delay = FIRST_RETRY_SECONDS
        self.sending = True
        """Whether passes run; False while a standby follows the leader (`follow`/`lead`)."""
        self._passing: asyncio.Task[None] | None = None
        """The pass (`_flush`) in flight, which `follow()` cancels."""

    # --- to implement ------------------------------------------------------------------------

    @abc.abstractmethod
    def _apply(self, item: WatchItem) -> None:
        """Fold one watch event into the view and mark what it changes as dirty."""

    @abc.abstractmethod
    async def _flush(self) -> None:
        """Signal everything dirty; what failed stays dirty (see `_after_flush`)."""

    @abc.abstractmethod
    def _has_dirty(self) -> bool:
        """Whether signals are waiting (failed ones included)."""

    def _ready(self) -> bool:
        """Whether a pass may run (e.g. every kind listed once); True by default."""
        return True

    def _after_flush(self, failed: bool) -> None:
        """Back off while signals fail, reset once they go through; the first pass marks synced."""
        self._retry_delay = (
            min(self._retry_delay * 2, LONGEST_RETRY_SECONDS) if failed else FIRST_RETRY_SECONDS
        )
        self._synced_event.set()

    # --- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the watch threads and the pass task on the running loop."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[WatchItem] = asyncio.Queue()
        self._queue = queue

        def post(item: WatchItem) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:
                pass  # the loop closed while a thread was still delivering: we are stopping

        for kind in self._kinds:
            kind.start(post)
        self._task = asyncio.create_task(self._loop(), name=self.name)

    async def stop(self) -> None:
        """Stop the threads and the task; in-flight signals finish or are cancelled."""
        for kind in self._kinds:
            kind.stop()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        await asyncio.gather(*(asyncio.to_thread(kind.join, 5.0) for kind in self._kinds))

    async def follow(self) -> None:
        """Stop sending (another process leads): cancel the pass in flight and wait until it has
        ended, so nothing is sent after this returns; the view keeps following the watches."""
        self.sending = False
        passing = self._passing
        if passing is not None:
            passing.cancel()
            await asyncio.wait({passing})

    def lead(self) -> None:
        """Send again: the next pass signals what is dirty in the view."""
        self.sending = True
        if self._queue is not None:
            self._queue.put_nowait(LEAD)

    async def wait_synced(self) -> None:
        """Wait until the watched kinds were listed once and the first pass was sent."""
        await self._synced_event.wait()

    async def run(self, stop: asyncio.Event) -> None:
        """Run until `stop` is set (the process entry point)."""
        await self.start()
        try:
            await stop.wait()
        finally:
            await self.stop()

    # --- the pass loop -----------------------------------------------------------------------

    def _take(self, item: WatchItem) -> None:
        if item is not LEAD:
            self._apply(item)

    async def _loop(self) -> None:
        assert self._queue is not None
        queue = self._queue
        loop = asyncio.get_running_loop()
        while True:
            try:
                if self.sending and self._has_dirty() and self._ready():
                    # Failed signals are waiting: retry them after the back-off, or sooner.
                    try:
                        self._take(await _get_within(queue, self._retry_delay))
                    except TimeoutError:
                        await self._pass()
                        continue
                else:
                    self._take(await queue.get())
                # Coalesce: a rollout or a node failure changes many objects within milliseconds.
                deadline = loop.time() + self.coalesce_seconds
                while (remaining := deadline - loop.time()) > 0:
                    try:
                        self._take(await _get_within(queue, remaining))
                    except TimeoutError:
                        break
                while not queue.empty():
                    self._take(queue.get_nowait())
                if self.sending and self._ready():
                    await self._pass()
            except asyncio.CancelledError:
                raise
            except Exception:
                # A bug in one pass must not end the watcher: the next event re-evaluates.
                self._logger.exception("%s pass failed", self.name)

    async def _pass(self) -> None:
        """One `_flush`, as a task `follow()` can cancel without ending the loop."""
        passing = self._passing = asyncio.create_task(self._flush(), name=f"{self.name} pass")
        try:
            await asyncio.wait({passing})
        except asyncio.CancelledError:
            passing.cancel()
            raise
        finally:
            self._passing = None
        if not passing.cancelled():
            passing.result()


async def _get_within(queue: asyncio.Queue[WatchItem], seconds: float) -> WatchItem:
    """`queue.get()` within `seconds`, else TimeoutError. Not `asyncio.wait_for`: on Python 3.11
    it returns the item when a cancel lands just as one arrives and drops the cancel
    (python/cpython#86296); `stop()` then waited forever for a loop back in `queue.get()`."""
    async with asyncio.timeout(seconds):
        return await queue.get()
