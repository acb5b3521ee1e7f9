"""Heartbeats for a thread-pool activity while it waits on the Kubernetes API.

A sync activity runs in a thread of the worker's pool, and while one of its requests blocks
(up to the client's connect and read timeouts, `kube_rest.REQUEST_TIMEOUT`) it cannot heartbeat
itself. So the workflows could only notice a dead worker after a call's whole start-to-close
timeout, a minute or more per Kubernetes call the worker held when it died.

While any regular activity is inside a request (`waiting`), a daemon thread wakes every
`BEAT_SECONDS` and has a heartbeat sent for each such activity; it sleeps while none waits. A
heartbeat then says what the server needs to know, that the worker process holding the attempt
is alive, and the workflows give Kubernetes calls a short heartbeat timeout
(`workflows.kube_calls.KUBE_HEARTBEAT`): an attempt on a worker that died is retried elsewhere
within seconds. A hung request still ends at the client's timeouts, and a hung attempt at its
start-to-close timeout.

Local activities cannot heartbeat (the workflow task bounds them) and are left out. Async
activities must not use it: their heartbeat is called on the worker's event loop, so they run
a task of their own, as `activities.prometheus` does (its `KubeRest` is made with
`keep_alive=False`).
"""

from __future__ import annotations

import contextvars
import itertools
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

from temporalio import activity

SENDERS = 4
"""Threads that hand heartbeats to the SDK."""

BEAT_SECONDS = 2.0
"""How often the thread heartbeats each waiting activity (the SDK throttles what it sends on to
the server to 80% of the activity's heartbeat timeout)."""


class _Beats:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._waiting: dict[int, contextvars.Context] = {}
        self._sending: set[int] = set()
        self._keys = itertools.count()
        self._thread: threading.Thread | None = None
        # The SDK's heartbeat waits (up to 10 s) for the worker's event loop to take it: a few
        # threads send them, so one slow heartbeat does not hold back the others.
        self._senders = ThreadPoolExecutor(max_workers=SENDERS, thread_name_prefix="activity-heartbeat")

    def add(self, context: contextvars.Context) -> int:
        with self._lock:
            key = next(self._keys)
            self._waiting[key] = context
            if len(self._waiting) == 1:
                self._changed.notify()  # the thread sleeps while nothing waits
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="activity-keep-alive", daemon=True)
                self._thread.start()
            return key

    def remove(self, key: int) -> None:
        with self._lock:
            self._waiting.pop(key, None)

    def waiting(self) -> int:
        with self._lock:
            return len(self._waiting)

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._waiting:
                    self._changed.wait()
                self._changed.wait(BEAT_SECONDS)
                due = [(key, context) for key, context in self._waiting.items() if key not in self._sending]
                self._sending.update(key for key, _ in due)
            for key, context in due:
                self._senders.submit(self._beat, key, context)

    def _beat(self, key: int, context: contextvars.Context) -> None:
        try:
            context.run(activity.heartbeat)
        except Exception:  # noqa: BLE001 - the SDK drops or refuses a heartbeat of an attempt that ended
            return
        finally:
            with self._lock:
                self._sending.discard(key)


_BEATS = _Beats()


@contextmanager
def waiting() -> Iterator[None]:
    """Keep the current activity heartbeating while the block runs. Call it only from a
    thread-pool activity's own thread (outside any activity, or in a local one, it does nothing)."""
    if not activity.in_activity() or activity.info().is_local:
        yield
        return
    key = _BEATS.add(contextvars.copy_context())
    try:
        yield
    finally:
        _BEATS.remove(key)
