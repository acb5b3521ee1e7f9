"""The controller loop: woken by store changes of the kinds it watches and by its own timers,
it runs a full, idempotent reconcile of what it owns.

Full resyncs keep each controller short and obviously correct, and a no-op write never reaches
the store, so loops settle. A controller whose full pass would cost the whole store per change
at fleet scale (thousands of pods: the endpoint controller, the garbage collector, the
scheduler's per-node totals) keeps what it needs from `on_change` and reconciles only what
changed.
"""

from __future__ import annotations

import abc
import asyncio
import logging

from kubesim.api import Api
from kubesim.store import Change, TypeKey

log = logging.getLogger("kubesim.controllers")
# Changes arriving within this window are reconciled together.
BATCH_SECONDS = 0.002


class Controller(abc.ABC):
    """Subclasses set `name` and `watches`, and implement `reconcile()`.

    A controller gets the API semantics it writes through (and the store behind them, which it
    reads); one that needs more (timing, a scheduling function) takes it as its own argument.
    """

    name = "controller"
    watches: tuple[TypeKey, ...] = ()

    def __init__(self, api: Api) -> None:
        self.api = api
        self.store = api.store
        self._dirty = asyncio.Event()
        self._wake_at: float | None = None
        self._task: asyncio.Task[None] | None = None
        self._reconciling = False
        self._stopped = False

    def on_change(self, change: Change) -> None:
        if change.type_key in self.watches and self.relevant(change):
            self._dirty.set()

    def relevant(self, change: Change) -> bool:
        return True

    def poke(self) -> None:
        self._dirty.set()

    def wake_in(self, seconds: float) -> None:
        """Ask for a reconcile after `seconds` (the earliest request wins)."""
        at = asyncio.get_running_loop().time() + max(0.0, seconds)
        if self._wake_at is None or at < self._wake_at:
            self._wake_at = at
            if not self._reconciling:
                self._dirty.set()  # re-arm the wait with the earlier deadline

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"kubesim-{self.name}")

    async def stop(self) -> None:
        # Python 3.11's wait_for can swallow a cancellation that races with its timeout, so the
        # loop also checks a flag; asyncio.wait bounds the wait without raising.
        self._stopped = True
        self._dirty.set()
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait({self._task}, timeout=5)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        self._dirty.set()
        while not self._stopped:
            timeout = None if self._wake_at is None else max(0.0, self._wake_at - loop.time())
            try:
                await asyncio.wait_for(self._dirty.wait(), timeout)
            except TimeoutError:
                pass
            if self._stopped:
                return
            if self._dirty.is_set():
                await asyncio.sleep(BATCH_SECONDS)
            self._dirty.clear()
            # Every reconcile is a full pass that asks again for the timers it still needs.
            self._wake_at = None
            self._reconciling = True
            try:
                self.reconcile()
            except Exception:  # one bad object must not stop the controller
                log.exception("%s reconcile failed", self.name)
                self.wake_in(0.5)
            finally:
                self._reconciling = False

    @abc.abstractmethod
    def reconcile(self) -> None:
        """Bring everything this controller owns in line with the stored state."""
