"""Events expire, as the kube-apiserver's `--event-ttl` (one hour by default) makes them: each
write of an Event (its creation, a `count` bump) starts its time to live again, and when that
runs out the Event is deleted, which watchers see as DELETED.

Without it a cluster that runs for weeks keeps every Event it ever recorded (a month of a pod
lost an hour: thousands), and so does the aggregation index behind `kubesim.events`.
"""

from __future__ import annotations

import time

from kubesim.api import Api
from kubesim.controllers.base import Controller
from kubesim.errors import ApiError
from kubesim.store import Change

EVENTS = ("", "events")
EVENT_TTL_SECONDS = 3600.0
"""kube-apiserver's `--event-ttl` default."""


class EventExpiry(Controller):
    name = "event-ttl"
    watches = (EVENTS,)

    def __init__(self, api: Api, ttl_seconds: float = EVENT_TTL_SECONDS) -> None:
        super().__init__(api)
        self.ttl_seconds = ttl_seconds
        self._written: dict[tuple[str, str], float] = {}
        """(namespace, name) -> `time.monotonic()` of the Event's last write."""

    def on_change(self, change: Change) -> None:
        if change.type_key != EVENTS:
            return
        meta = change.obj["metadata"]
        key = (meta.get("namespace") or "", meta["name"])
        if change.type == "DELETED":
            self._written.pop(key, None)
            return
        self._written[key] = time.monotonic()
        if self._wake_at is None and self._task is not None:  # started: in the cluster's loop
            self.wake_in(self.ttl_seconds)

    def reconcile(self) -> None:
        now = time.monotonic()
        rt = self.api.type_of(*EVENTS)
        gone: set[tuple[str, str]] = set()
        for event in self.store.list(EVENTS):
            meta = event["metadata"]
            key = (meta.get("namespace") or "", meta["name"])
            # An Event this controller never saw written (restored from a saved state) lives a
            # whole TTL from now.
            written = self._written.setdefault(key, now)
            if now - written < self.ttl_seconds:
                continue
            try:
                self.api.delete(rt, key[0], key[1])
            except ApiError:
                pass  # deleted meanwhile
            gone.add(key)
        if gone:
            for index_key in [k for k, where in self.api.event_index.items() if where in gone]:
                del self.api.event_index[index_key]
        if self._written:
            self.wake_in(max(0.0, min(self._written.values()) + self.ttl_seconds - now))
