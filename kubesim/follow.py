"""State derived from every object of one kind, kept in step with the store's changes.

A controller or the API that needs, per operation, something gathered over all objects of
a kind (the pods counting on each node, the pod IPs or Service clusterIPs taken) folds each
change into it instead of walking the store again. A `Follower` subscribes to the store when
made. `sync()` makes the state current: a no-op while every change has been folded in order,
a rebuild from the store when one may have been missed: nothing folded yet, a change out of
order (a write made from inside another subscriber), a fold that failed, or a `restore`
(which replaces the objects without announcing changes).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kubesim.store import Change, Object, Store, TypeKey

log = logging.getLogger("kubesim.follow")
Fold = Callable[[Object | None, Object | None], None]
"""Called with (old, new) per change of the kind: (None, obj) added, (obj, None) deleted."""


class Follower:
    def __init__(self, store: Store, type_key: TypeKey, fold: Fold, reset: Callable[[], None]) -> None:
        self.store = store
        self.type_key = type_key
        self._fold = fold
        self._reset = reset
        self._rv: int | None = None  # the store's resourceVersion the state reflects; None: stale
        self._restores = store.restores
        store.subscribe(self._on_change)

    def _on_change(self, change: Change) -> None:
        if self._rv is None:
            return
        if change.rv != self._rv + 1:
            self._rv = None
            return
        self._rv = change.rv
        if change.type_key != self.type_key:
            return
        try:
            self._fold(change.old, None if change.type == "DELETED" else change.obj)
        except Exception:  # a store write must not fail because of derived state
            log.exception("folding a change of %s failed; rebuilding on next use", self.type_key)
            self._rv = None

    def sync(self) -> None:
        """Bring the derived state in line with the store's current objects."""
        store = self.store
        if self._rv == store.rv and self._restores == store.restores:
            return
        self._rv = None
        self._reset()
        for obj in store.list(self.type_key):
            self._fold(None, obj)
        self._rv, self._restores = store.rv, store.restores
