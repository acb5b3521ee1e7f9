"""The object store: every object by resource type and key, one global resourceVersion, and the
change log that watches resume from.

Like etcd behind a real API server, the store knows nothing about kinds: it assigns
resourceVersions, keeps a bounded history of changes and tells subscribers about every change.
Older changes are "compacted", which makes watches from before them answer 410 Gone: those
beyond `history` changes, and those older than `retention_seconds` (five minutes, as
kube-apiserver's default etcd compaction interval). Stored
objects are never mutated in place: writers build a new dict, so readers and watch events can
share one without copying.
"""

from __future__ import annotations

import builtins
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubesim.errors import ApiError
from kubesim.selectors import Requirement, labels_match

ObjectKey = tuple[str, str]  # (namespace or "", name)
TypeKey = tuple[str, str]  # (group, plural)
Object = dict[str, Any]


@dataclass(frozen=True)
class Change:
    """One committed change: what a watch event is made of."""

    rv: int
    type: str  # ADDED, MODIFIED or DELETED
    type_key: TypeKey
    obj: Object
    old: Object | None
    committed_at: float
    """When it was committed, by the store's clock; it leaves the history `retention_seconds` later."""


def object_key(obj: Object) -> ObjectKey:
    meta = obj["metadata"]
    return (meta.get("namespace") or "", meta["name"])


class Store:
    """All objects, the global resourceVersion counter and the bounded watch history."""

    def __init__(
        self,
        history: int = 50_000,
        first_rv: int = 1000,
        retention_seconds: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rv = first_rv
        self._objects: dict[TypeKey, dict[ObjectKey, Object]] = {}
        self._log: deque[Change] = deque(maxlen=history)
        self.retention_seconds = retention_seconds
        self.clock = clock
        # Every change with rv <= compacted_rv has left the history.
        self.compacted_rv = first_rv
        self._subscribers: list[Callable[[Change], None]] = []
        # Bumped by every `restore`, which replaces the objects without announcing changes.
        self.restores = 0
        # Secondary indexes, kept in step with every put/remove/restore, so a namespaced list
        # or a label-selected list reads the matching objects, not the whole type: a fleet of
        # Instances each listing its own pods by label would otherwise be quadratic.
        self._by_namespace: dict[TypeKey, dict[str, set[ObjectKey]]] = {}
        self._by_label: dict[TypeKey, dict[tuple[str, str], set[ObjectKey]]] = {}

    # ---- reads -----------------------------------------------------------------------------

    def get(self, type_key: TypeKey, namespace: str, name: str) -> Object | None:
        return self._objects.get(type_key, {}).get((namespace, name))

    def list(self, type_key: TypeKey, namespace: str | None = None) -> builtins.list[Object]:
        bucket = self._objects.get(type_key, {})
        if namespace:
            keys = self._by_namespace.get(type_key, {}).get(namespace, ())
            return [bucket[key] for key in sorted(keys)]
        return [bucket[key] for key in sorted(bucket)]

    def select(self, type_key: TypeKey, namespace: str | None, reqs: builtins.list[Requirement]
               ) -> builtins.list[Object]:
        """The objects (sorted by key) whose labels satisfy `reqs`, in one namespace or all.

        Equality and `in` requirements narrow the candidates through the label index (the
        smallest set first); every candidate is then checked against all requirements, so
        set-based operators stay exact.
        """
        bucket = self._objects.get(type_key, {})
        index = self._by_label.get(type_key, {})
        narrowing: builtins.list[set[ObjectKey]] = []
        for key, op, values in reqs:
            if op == "In":
                found: set[ObjectKey] = set()
                for value in values:
                    found |= index.get((key, value), set())
                narrowing.append(found)
        if not narrowing:
            return [obj for obj in self.list(type_key, namespace) if labels_match(reqs, obj["metadata"].get("labels"))]
        narrowing.sort(key=len)
        candidates = set(narrowing[0])
        for other in narrowing[1:]:
            candidates &= other
            if not candidates:
                break
        return [bucket[key] for key in sorted(candidates)
                if (not namespace or key[0] == namespace)
                and labels_match(reqs, bucket[key]["metadata"].get("labels"))]

    def label_count(self, type_key: TypeKey, key: str, value: str) -> int:
        """How many objects of a type carry the label `key=value` (in every namespace)."""
        return len(self._by_label.get(type_key, {}).get((key, value), ()))

    def type_keys(self) -> builtins.list[TypeKey]:
        return list(self._objects)

    # ---- writes ----------------------------------------------------------------------------

    def put(self, type_key: TypeKey, obj: Object) -> Object:
        """Store a new or replaced object under a fresh resourceVersion and announce it."""
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        key = object_key(obj)
        bucket = self._objects.setdefault(type_key, {})
        old = bucket.get(key)
        bucket[key] = obj
        self._reindex(type_key, key, old, obj)
        self._commit("MODIFIED" if old is not None else "ADDED", type_key, obj, old)
        return obj

    def remove(self, type_key: TypeKey, obj: Object) -> Object:
        """Remove an object; the DELETED event carries it under the deletion's resourceVersion."""
        key = object_key(obj)
        bucket = self._objects.get(type_key, {})
        old = bucket.pop(key, None)
        if old is None:
            return obj
        self._reindex(type_key, key, old, None)
        self.rv += 1
        gone = {**old, "metadata": {**old["metadata"], "resourceVersion": str(self.rv)}}
        self._commit("DELETED", type_key, gone, old)
        return gone

    def drop_type(self, type_key: TypeKey) -> builtins.list[Object]:
        """Delete every object of a type (a CRD going away takes its objects with it)."""
        removed = [self.remove(type_key, obj) for obj in self.list(type_key)]
        self._objects.pop(type_key, None)
        self._by_namespace.pop(type_key, None)
        self._by_label.pop(type_key, None)
        return removed

    def _reindex(self, type_key: TypeKey, key: ObjectKey, old: Object | None, new: Object | None) -> None:
        """Move `key` from the index entries of its old labels to those of its new ones."""
        old_labels: dict[str, str] = (old["metadata"].get("labels") or {}) if old is not None else {}
        new_labels: dict[str, str] = (new["metadata"].get("labels") or {}) if new is not None else {}
        if old is None or new is None:
            spaces = self._by_namespace.setdefault(type_key, {})
            if new is not None:
                spaces.setdefault(key[0], set()).add(key)
            else:
                members = spaces.get(key[0])
                if members is not None:
                    members.discard(key)
                    if not members:
                        del spaces[key[0]]
        if old_labels == new_labels and old is not None and new is not None:
            return
        index = self._by_label.setdefault(type_key, {})
        for pair in old_labels.items():
            if new_labels.get(pair[0]) != pair[1]:
                holders = index.get(pair)
                if holders is not None:
                    holders.discard(key)
                    if not holders:
                        del index[pair]
        for pair in new_labels.items():
            if old_labels.get(pair[0]) != pair[1]:
                index.setdefault(pair, set()).add(key)

    def _commit(self, kind: str, type_key: TypeKey, obj: Object, old: Object | None) -> None:
        """Log the change under the current resourceVersion and announce it."""
        change = Change(self.rv, kind, type_key, obj, old, committed_at=self.clock())
        if len(self._log) == self._log.maxlen:
            self.compacted_rv = self._log[0].rv
        # Without it a long run keeps every pod it ever wrote (the kube-apiserver compacts too).
        while self._log and change.committed_at - self._log[0].committed_at > self.retention_seconds:
            self.compacted_rv = self._log.popleft().rv
        self._log.append(change)
        for subscriber in list(self._subscribers):
            subscriber(change)

    # ---- watch support ---------------------------------------------------------------------

    def subscribe(self, callback: Callable[[Change], None]) -> Callable[[], None]:
        self._subscribers.append(callback)

        def unsubscribe() -> None:
            if callback in self._subscribers:
                self._subscribers.remove(callback)

        return unsubscribe

    def changes_since(self, rv: int) -> builtins.list[Change]:
        """Changes after `rv`, or 410 Expired when part of that history was compacted."""
        if rv < self.compacted_rv:
            raise ApiError(410, f"too old resource version: {rv} ({self.compacted_rv + 1})", reason="Expired")
        if not self._log or rv >= self._log[-1].rv:
            return []
        # The log is ordered by rv; walk back from the end because watchers resume near the tail.
        out: builtins.list[Change] = []
        for change in reversed(self._log):
            if change.rv <= rv:
                break
            out.append(change)
        out.reverse()
        return out

    def compact(self) -> None:
        """Forget the whole history (used by tests to provoke 410 and after a restore)."""
        self._log.clear()
        self.compacted_rv = self.rv

    # ---- persistence -----------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        return {
            "resourceVersion": self.rv,
            "objects": [
                {"group": tk[0], "plural": tk[1], "object": obj}
                for tk, bucket in self._objects.items()
                for obj in bucket.values()
            ],
        }

    def restore(self, data: dict[str, Any]) -> None:
        self.restores += 1
        self._objects.clear()
        self._by_namespace.clear()
        self._by_label.clear()
        for entry in data.get("objects", []):
            obj = entry["object"]
            type_key, key = (entry["group"], entry["plural"]), object_key(obj)
            bucket = self._objects.setdefault(type_key, {})
            self._reindex(type_key, key, bucket.get(key), None)
            bucket[key] = obj
            self._reindex(type_key, key, None, obj)
        self.rv = max(self.rv, int(data.get("resourceVersion", self.rv)))
        self.compact()
