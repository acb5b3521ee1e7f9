"""Garbage collection by ownerReferences and the namespace controller.

Background deletion removes dependents once their owners are gone; foreground deletion holds
the owner (finalizer `foregroundDeletion`) until its dependents are gone; orphan deletion
(finalizer `orphan`) strips the owner's references from its dependents and lets them live.
A terminating namespace has its contents deleted before it goes itself.
"""

from __future__ import annotations

from typing import Any

from kubesim.controllers.base import Controller
from kubesim.errors import ApiError
from kubesim.store import Change, Object, TypeKey
from kubesim.timing import clone

NAMESPACES = ("", "namespaces")
SERVICE_ACCOUNTS = ("", "serviceaccounts")


class GarbageCollector(Controller):
    name = "garbage-collector"
    watches = ()  # every kind; see relevant()

    def on_change(self, change: Change) -> None:
        if self.relevant(change):
            self._dirty.set()

    def relevant(self, change: Change) -> bool:
        meta = change.obj["metadata"]
        if change.type == "DELETED":
            return True
        if change.type == "ADDED":
            return bool(meta.get("ownerReferences"))
        finalizers = meta.get("finalizers") or []
        return bool(meta.get("deletionTimestamp")) and ("orphan" in finalizers or "foregroundDeletion" in finalizers)

    def _all(self) -> list[tuple[TypeKey, Object]]:
        return [(tk, obj) for tk in self.store.type_keys() for obj in self.store.list(tk)]

    def reconcile(self) -> None:
        everything = self._all()
        by_uid = {obj["metadata"]["uid"]: (tk, obj) for tk, obj in everything}
        dependents: dict[str, list[tuple[TypeKey, Object]]] = {}
        for tk, obj in everything:
            for ref in obj["metadata"].get("ownerReferences") or []:
                dependents.setdefault(ref.get("uid", ""), []).append((tk, obj))
        for tk, obj in everything:
            meta = obj["metadata"]
            finalizers = meta.get("finalizers") or []
            if meta.get("deletionTimestamp") and "orphan" in finalizers:
                self._orphan(obj, dependents.get(meta["uid"], []))
                self._drop_finalizer(tk, obj, "orphan")
            elif meta.get("deletionTimestamp") and "foregroundDeletion" in finalizers:
                waiting = dependents.get(meta["uid"], [])
                for dtk, dep in waiting:
                    self._delete(dtk, dep, "Foreground")
                if not [d for d in waiting if self.store.get(d[0], *self._key(d[1])) is not None]:
                    self._drop_finalizer(tk, obj, "foregroundDeletion")
            refs = meta.get("ownerReferences") or []
            if refs and not meta.get("deletionTimestamp"):
                alive = [r for r in refs if r.get("uid") in by_uid]
                if not alive:
                    self._delete(tk, obj, "Background")
                elif len(alive) < len(refs):
                    self._set_refs(tk, obj, alive)

    @staticmethod
    def _key(obj: Object) -> tuple[str, str]:
        return obj["metadata"].get("namespace") or "", obj["metadata"]["name"]

    def _rt(self, tk: TypeKey) -> Any:
        return self.api.registry.get(*tk)

    def _delete(self, tk: TypeKey, obj: Object, policy: str) -> None:
        rt = self._rt(tk)
        if rt is None:
            return
        try:
            self.api.delete(rt, *self._key(obj), {"propagationPolicy": policy})
        except ApiError:
            return

    def _set_refs(self, tk: TypeKey, obj: Object, refs: list[Object]) -> None:
        rt = self._rt(tk)
        current = self.store.get(tk, *self._key(obj))
        if rt is None or current is None:
            return
        updated = clone(current)
        if refs:
            updated["metadata"]["ownerReferences"] = refs
        else:
            updated["metadata"].pop("ownerReferences", None)
        self.api.write(rt, updated, "garbage-collector")

    def _orphan(self, owner: Object, deps: list[tuple[TypeKey, Object]]) -> None:
        uid = owner["metadata"]["uid"]
        for tk, dep in deps:
            current = self.store.get(tk, *self._key(dep))
            if current is not None:
                self._set_refs(tk, current, [r for r in current["metadata"].get("ownerReferences") or []
                                             if r.get("uid") != uid])

    def _drop_finalizer(self, tk: TypeKey, obj: Object, finalizer: str) -> None:
        rt = self._rt(tk)
        current = self.store.get(tk, *self._key(obj))
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
