"""Garbage collection by ownerReferences and the namespace controller.

Background deletion removes dependents once their owners are gone; foreground deletion holds
the owner (finalizer `foregroundDeletion`) until its dependents are gone; orphan deletion
(finalizer `orphan`) strips the owner's references from its dependents and lets them live.
A terminating namespace has its contents deleted before it goes itself.

The garbage collector is incremental: a full pass over every object of every type per change
would be quadratic over a fleet's bring-up. From the changes it sees (every change of every
kind) it keeps two indexes:

  - `_where`: uid -> (type key, namespace, name) of every stored object, which tells whether
    an owner is alive;
  - `_dependents`: owner uid -> keys of the stored objects whose ownerReferences name it (the
    owner may be gone, or may never have existed);

and two queues that the next reconcile empties:

  - `_check`: objects that may have a dead owner: the dependents of an object just deleted,
    and an object added, or whose references changed, naming a uid not stored;
  - `_owners`: terminating owners with an `orphan` or `foregroundDeletion` finalizer, on
    their own writes and whenever one of their dependents goes or gains or drops the reference.

A reconcile looks at the queued objects only, so a quiet cluster costs nothing. Neither index
is persisted: the first reconcile, one after a store `restore` (which replaces the objects and
announces no changes; `Store.restores` counts them, as `kubesim.follow` reads it: the next
change wakes the rebuild) and one after a failure rebuild both from the store and queue
everything, which is the full pass.
"""

from __future__ import annotations

import logging
from typing import Any

from kubesim.api import Api
from kubesim.controllers.base import Controller
from kubesim.errors import ApiError
from kubesim.fastjson import clone
from kubesim.store import Change, Object, TypeKey, object_key

log = logging.getLogger("kubesim.controllers")
NAMESPACES = ("", "namespaces")
SERVICE_ACCOUNTS = ("", "serviceaccounts")
Key = tuple[TypeKey, str, str]  # (type key, namespace or "", name)


def _owner_uids(obj: Object | None) -> set[str]:
    refs = obj["metadata"].get("ownerReferences") if obj is not None else None
    return {ref.get("uid") or "" for ref in refs or ()}


def _held(obj: Object | None) -> bool:
    """Whether `obj` is terminating with a finalizer this collector removes."""
    if obj is None or not obj["metadata"].get("deletionTimestamp"):
        return False
    finalizers = obj["metadata"].get("finalizers") or ()
    return "orphan" in finalizers or "foregroundDeletion" in finalizers


class GarbageCollector(Controller):
    name = "garbage-collector"
    watches = ()  # every kind; see on_change()

    def __init__(self, api: Api) -> None:
        super().__init__(api)
        self._resync = True
        self._restores = self.store.restores  # a restore replaces the objects unannounced
        self._where: dict[str, Key] = {}
        self._dependents: dict[str, set[Key]] = {}
        self._check: set[Key] = set()
        self._owners: set[Key] = set()

    # ---- change tracking -------------------------------------------------------------------

    def on_change(self, change: Change) -> None:
        if self._restores != self.store.restores:
            self._resync = True
            self.poke()
        if self._resync:
            return  # the pending resync reads the store as it will be
        meta, old = change.obj["metadata"], change.old
        if change.type == "MODIFIED" and old is not None and not meta.get("deletionTimestamp") and (
            meta.get("ownerReferences") == old["metadata"].get("ownerReferences")
        ):
            return  # the common case (a status write): nothing to index or queue
        try:
            self._track(change)
        except Exception:  # a writer must not fail for our bookkeeping: rebuild it instead
            log.exception("%s could not index a change", self.name)
            self._resync = True
        if self._resync or self._check or self._owners:
            self.poke()

    def _track(self, change: Change) -> None:
        meta = change.obj["metadata"]
        key: Key = (change.type_key, meta.get("namespace") or "", meta["name"])
        uid = meta.get("uid") or ""
        if change.type == "DELETED":
            if self._where.get(uid) == key:
                del self._where[uid]
            self._check.update(self._dependents.get(uid, ()))
            self._refile(key, _owner_uids(change.old), set())
            return
        if uid:
            self._where[uid] = key
        if meta.get("deletionTimestamp") and _held(change.obj):
            self._owners.add(key)
        old_meta = change.old["metadata"] if change.old is not None else {}
        if meta.get("ownerReferences") == old_meta.get("ownerReferences"):
            return  # no references, or the same ones
        owners = _owner_uids(change.obj)
        if not owners <= self._where.keys():
            self._check.add(key)
        self._refile(key, _owner_uids(change.old), owners)

    def _refile(self, key: Key, old: set[str], new: set[str]) -> None:
        """File `key` under the owners it names now; a held owner it came to or left looks again."""
        for owner in old - new:
            dependents = self._dependents.get(owner)
            if dependents is not None:
                dependents.discard(key)
                if not dependents:
                    del self._dependents[owner]
            self._owner_changed(owner)
        for owner in new - old:
            self._dependents.setdefault(owner, set()).add(key)
            self._owner_changed(owner)

    def _owner_changed(self, uid: str) -> None:
        """A dependent of `uid` came, went or moved: a held owner has to look again."""
        key = self._where.get(uid)
        if key is not None and _held(self.store.get(*key)):
            self._owners.add(key)

    def _rebuild(self) -> None:
        """Index the store afresh and queue every object a full pass would look at."""
        self._where.clear()
        self._dependents.clear()
        for tk in self.store.type_keys():
            for obj in self.store.list(tk):
                key: Key = (tk, *object_key(obj))
                if obj["metadata"].get("uid"):
                    self._where[obj["metadata"]["uid"]] = key
                for owner in _owner_uids(obj):
                    self._dependents.setdefault(owner, set()).add(key)
                    self._check.add(key)
                if _held(obj):
                    self._owners.add(key)
        self._resync, self._restores = False, self.store.restores

    # ---- reconcile -------------------------------------------------------------------------

    def reconcile(self) -> None:
        if self._resync:
            self._rebuild()
        # What this reconcile's own writes queue waits for the next one (it pokes).
        owners, self._owners = self._owners, set()
        check, self._check = self._check, set()
        try:
            for key in sorted(owners):
                self._settle_owner(key)
            for key in sorted(check):
                self._collect(key)
        except Exception:
            self._resync = True  # what was dequeued and not done is looked at again
            raise

    def _settle_owner(self, key: Key) -> None:
        owner = self.store.get(*key)
        if owner is None or not _held(owner):
            return
        uid = owner["metadata"].get("uid") or ""
        if "orphan" in owner["metadata"].get("finalizers"):
            for dep in sorted(self._dependents.get(uid, ())):
                current = self.store.get(*dep)
                if current is not None:
                    self._set_refs(dep, [r for r in current["metadata"].get("ownerReferences") or []
                                         if r.get("uid") != uid])
            self._drop_finalizer(key, "orphan")
        else:
            for dep in sorted(self._dependents.get(uid, ())):
                self._delete(dep, "Foreground")
            if not self._dependents.get(uid):  # kept up to date by the deletions' changes
                self._drop_finalizer(key, "foregroundDeletion")

    def _collect(self, key: Key) -> None:
        """Delete a dependent whose owners are all gone; drop its references to gone ones."""
        obj = self.store.get(*key)
        if obj is None or obj["metadata"].get("deletionTimestamp"):
            return
        refs = obj["metadata"].get("ownerReferences") or []
        alive = [r for r in refs if r.get("uid") in self._where]
        if refs and not alive:
            self._delete(key, "Background")
        elif len(alive) < len(refs):
            self._set_refs(key, alive)

    # ---- writes ----------------------------------------------------------------------------

    def _rt(self, tk: TypeKey) -> Any:
        return self.api.registry.get(*tk)

    def _delete(self, key: Key, policy: str) -> None:
        rt = self._rt(key[0])
        if rt is None:
            return
        try:
            self.api.delete(rt, key[1], key[2], {"propagationPolicy": policy})
        except ApiError:
            return

    def _set_refs(self, key: Key, refs: list[Object]) -> None:
        rt = self._rt(key[0])
        current = self.store.get(*key)
        if rt is None or current is None:
            return
        updated = clone(current)
        if refs:
            updated["metadata"]["ownerReferences"] = refs
        else:
            updated["metadata"].pop("ownerReferences", None)
        self.api.write(rt, updated, "garbage-collector")

    def _drop_finalizer(self, key: Key, finalizer: str) -> None:
        rt = self._rt(key[0])
        current = self.store.get(*key)
        if rt is None or current is None:
            return
        updated = clone(current)
        updated["metadata"]["finalizers"] = [f for f in current["metadata"].get("finalizers") or [] if f != finalizer]
        if not updated["metadata"]["finalizers"]:
            del updated["metadata"]["finalizers"]
        self.api.write(rt, updated, "garbage-collector")


class NamespaceController(Controller):
    name = "namespace-controller"
    watches = ()

    def on_change(self, change: Change) -> None:
        # Anything leaving a terminating namespace may be the last thing holding it; a deleted
        # default ServiceAccount is recreated.
        if change.type_key == NAMESPACES or (change.type == "DELETED" and change.obj["metadata"].get("namespace")):
            self._dirty.set()

    def reconcile(self) -> None:
        namespaces = self.store.list(NAMESPACES)
        self._default_service_accounts([n for n in namespaces if not n["metadata"].get("deletionTimestamp")])
        terminating = [n for n in namespaces if n["metadata"].get("deletionTimestamp")]
        if not terminating:
            return
        for ns in terminating:
            name = ns["metadata"]["name"]
            remaining = 0
            for rt in self.api.registry.all():
                if not rt.namespaced:
                    continue
                for obj in self.store.list(rt.key, name):
                    remaining += 1
                    if not obj["metadata"].get("deletionTimestamp"):
                        try:
                            self.api.delete(rt, name, obj["metadata"]["name"], {"propagationPolicy": "Background"})
                        except ApiError:
                            continue
            if remaining == 0:
                self.store.remove(NAMESPACES, ns)
            else:
                self.wake_in(0.2)

    def _default_service_accounts(self, active: list[Object]) -> None:
        """Every namespace has a `default` ServiceAccount, as the serviceaccount controller ensures."""
        rt = self.api.type_of(*SERVICE_ACCOUNTS)
        for ns in active:
            name = ns["metadata"]["name"]
            if self.store.get(SERVICE_ACCOUNTS, name, "default") is None:
                try:
                    self.api.create(rt, name, {"metadata": {"name": "default"}}, "kube-controller-manager")
                except ApiError:
                    continue
