"""Deployments and ReplicaSets, as kube-controller-manager runs them: a Deployment owns one
ReplicaSet per pod template (labelled `pod-template-hash`), rolls from old to new within
`maxSurge` / `maxUnavailable` (or all at once with Recreate), and reports replica counts and
the Available / Progressing conditions; a ReplicaSet creates and deletes pods to match its
replicas, replacing pods that are deleted or fail.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

from kubesim.controllers.base import Controller
from kubesim.errors import ApiError
from kubesim.events import record_event
from kubesim.fastjson import clone
from kubesim.store import Change, Object
from kubesim.subresources import pod_is_ready
from kubesim.timing import random_suffix, timestamp

PODS = ("", "pods")
DEPLOYMENTS = ("apps", "deployments")
REPLICASETS = ("apps", "replicasets")
HASH_LABEL = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
CREATE_RETRY_SECONDS = 5.0
"""How soon a ReplicaSet whose pod creation was refused tries again, failing other news."""


def controller_uid(obj: Object) -> str | None:
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("uid"))
    return None


def controlled_by_replicaset(obj: Object | None) -> bool:
    """Whether a ReplicaSet is `obj`'s controller."""
    if obj is None:
        return False
    refs = obj["metadata"].get("ownerReferences") or []
    return any(ref.get("controller") and ref.get("kind") == "ReplicaSet" for ref in refs)


def owner_ref(owner: Object) -> Object:
    return {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}


def template_hash(template: Object) -> str:
    digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).digest()
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    return "".join(alphabet[b % len(alphabet)] for b in digest[:10])


def _resolve(value: Any, total: int, round_up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        exact = total * int(value[:-1]) / 100
        return math.ceil(exact) if round_up else math.floor(exact)
    return int(value or 0)


class ReplicaSets(Controller):
    name = "replicaset-controller"
    watches = (REPLICASETS, PODS)

    def relevant(self, change: Change) -> bool:
        """A ReplicaSet's change, or a pod's that a ReplicaSet controls (or did before the
        change), as the real controller enqueues a pod's controller on the pod's events: a pass
        lists every pod, and a fleet's thousands of pods that no ReplicaSet owns (Instances')
        must not each bring one. Like the rest of this controller, no orphan is adopted."""
        if change.type_key == REPLICASETS:
            return True
        return controlled_by_replicaset(change.obj) or controlled_by_replicaset(change.old)

    def reconcile(self) -> None:
        rs_rt, pods_rt = self.api.type_of(*REPLICASETS), self.api.type_of(*PODS)
        by_owner: dict[str, list[Object]] = {}
        for pod in self.store.list(PODS):
            uid = controller_uid(pod)
            if uid:
                by_owner.setdefault(uid, []).append(pod)
        for rs in self.store.list(REPLICASETS):
            if rs["metadata"].get("deletionTimestamp"):
                continue
            pods = by_owner.get(rs["metadata"]["uid"], [])
            active = [p for p in pods if not p["metadata"].get("deletionTimestamp")
                      and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
            want = int((rs.get("spec") or {}).get("replicas", 1))
            for _ in range(want - len(active)):
                created = self._create_pod(pods_rt, rs)
                if created is None:
                    # Refused (a full quota, say): the rest would be too. Tried again later, as
                    # the controller's rate-limited requeue does, or at a change of its pods.
                    self.wake_in(CREATE_RETRY_SECONDS)
                    break
                active.append(created)
            if len(active) > want:
                # Delete the least useful first: unscheduled, then not ready, then newest.
                victims = sorted(active, key=lambda p: (bool((p.get("spec") or {}).get("nodeName")),
                                                        pod_is_ready(p), p["metadata"].get("creationTimestamp", "")))
                for pod in victims[: len(active) - want]:
                    try:
                        self.api.delete(pods_rt, pod["metadata"]["namespace"], pod["metadata"]["name"])
                    except ApiError:
                        continue
                    active.remove(pod)
            ready = sum(1 for p in active if pod_is_ready(p))
            labels = ((rs.get("spec") or {}).get("template") or {}).get("metadata", {}).get("labels") or {}
            status = {
                "replicas": len(active),
                "fullyLabeledReplicas": sum(1 for p in active if all(
                    (p["metadata"].get("labels") or {}).get(k) == v for k, v in labels.items())),
                "readyReplicas": ready,
                "availableReplicas": ready,
                "observedGeneration": rs["metadata"].get("generation", 1),
            }
            self.api.write_status(rs_rt, rs, status, "replicaset-controller")

    def _create_pod(self, rt: Any, rs: Object) -> Object | None:
        template = clone((rs.get("spec") or {}).get("template") or {})
        meta = template.get("metadata") or {}
        pod_meta: Object = {
            "name": f"{rs['metadata']['name']}-{random_suffix()}",
            "labels": meta.get("labels") or {},
            "ownerReferences": [owner_ref(rs)],
        }
        if meta.get("annotations"):
            pod_meta["annotations"] = meta["annotations"]
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": template.get("spec") or {}}
        try:
            created = self.api.create(rt, rs["metadata"]["namespace"], pod, "kube-controller-manager")
        except ApiError as exc:
            record_event(self.api, rs, "Warning", "FailedCreate", f"Error creating: {exc.message}",
                         "replicaset-controller")
            return None
        record_event(self.api, rs, "Normal", "SuccessfulCreate", f"Created pod: {created['metadata']['name']}",
                     "replicaset-controller")
        return created


class Deployments(Controller):
    name = "deployment-controller"
    watches = (DEPLOYMENTS, REPLICASETS)

    def reconcile(self) -> None:
        owned: dict[str, list[Object]] = {}
        for rs in self.store.list(REPLICASETS):
            uid = controller_uid(rs)
            if uid:
                owned.setdefault(uid, []).append(rs)
        for deploy in self.store.list(DEPLOYMENTS):
            if not deploy["metadata"].get("deletionTimestamp"):
                self._sync(deploy, owned.get(deploy["metadata"]["uid"], []))

    def _sync(self, deploy: Object, sets: list[Object]) -> None:
        rs_rt = self.api.type_of(*REPLICASETS)
        spec = deploy.get("spec") or {}
        replicas = int(spec.get("replicas", 1))
        template = spec.get("template") or {}
        want_hash = template_hash(template)
        new = next((rs for rs in sets if (rs["metadata"].get("labels") or {}).get(HASH_LABEL) == want_hash), None)
        old = [rs for rs in sets if rs is not new]
        revision = max([int((rs["metadata"].get("annotations") or {}).get(REVISION, 0)) for rs in sets] + [0])
        if new is None:
            new = self._create_rs(rs_rt, deploy, want_hash, revision + 1, replicas if not old else 0)
            if new is None:
                return
        elif int((new["metadata"].get("annotations") or {}).get(REVISION, 0)) < revision:
            updated = clone(new)
            updated["metadata"].setdefault("annotations", {})[REVISION] = str(revision + 1)
            new = self.api.write(rs_rt, updated, "deployment-controller")
        if not spec.get("paused"):
            self._roll(rs_rt, deploy, new, old, replicas)
        self._cleanup(rs_rt, deploy, old)
        self._status(deploy, new, [rs for rs in sets if rs is not new] if new in sets else sets)

    def _create_rs(self, rt: Any, deploy: Object, hash_: str, revision: int, replicas: int) -> Object | None:
        template = clone((deploy.get("spec") or {}).get("template") or {})
        template.setdefault("metadata", {}).setdefault("labels", {})[HASH_LABEL] = hash_
        selector = clone((deploy.get("spec") or {}).get("selector") or {})
        selector.setdefault("matchLabels", {})[HASH_LABEL] = hash_
        rs = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": f"{deploy['metadata']['name']}-{hash_}",
                "labels": template["metadata"]["labels"],
                "annotations": {REVISION: str(revision),
                                "deployment.kubernetes.io/desired-replicas": str(deploy["spec"].get("replicas", 1))},
                "ownerReferences": [owner_ref(deploy)],
            },
            "spec": {"replicas": replicas, "selector": selector, "template": template},
        }
        try:
            created = self.api.create(rt, deploy["metadata"]["namespace"], rs, "kube-controller-manager")
        except ApiError:
            return None
        record_event(self.api, deploy, "Normal", "ScalingReplicaSet",
                     f"Scaled up replica set {created['metadata']['name']} from 0 to {replicas}",
                     "deployment-controller")
        return created

    def _scale(self, rt: Any, deploy: Object, rs: Object, to: int) -> Object:
        current = int((rs.get("spec") or {}).get("replicas", 0))
        if current == to:
            return rs
        updated = clone(rs)
        updated["spec"]["replicas"] = to
        stored = self.api.write(rt, updated, "deployment-controller")
        verb = "up" if to > current else "down"
        record_event(self.api, deploy, "Normal", "ScalingReplicaSet",
                     f"Scaled {verb} replica set {rs['metadata']['name']} from {current} to {to}",
                     "deployment-controller")
        return stored

    def _roll(self, rt: Any, deploy: Object, new: Object, old: list[Object], replicas: int) -> None:
        strategy = (deploy.get("spec") or {}).get("strategy") or {}
        old_total = sum(int((rs.get("spec") or {}).get("replicas", 0)) for rs in old)
        if strategy.get("type") == "Recreate":
            for rs in old:
                self._scale(rt, deploy, rs, 0)
            old_pods = sum(int((rs.get("status") or {}).get("replicas", 0)) for rs in old)
            if old_pods == 0:
                self._scale(rt, deploy, new, replicas)
            return
        rolling = strategy.get("rollingUpdate") or {}
        surge = _resolve(rolling.get("maxSurge", "25%"), replicas, round_up=True)
        unavailable = _resolve(rolling.get("maxUnavailable", "25%"), replicas, round_up=False)
        if surge == 0 and unavailable == 0:
            unavailable = 1
        new_count = int((new.get("spec") or {}).get("replicas", 0))
        if not old_total:
            self._scale(rt, deploy, new, replicas)
            return
        # Scale the new ReplicaSet up within the surge budget.
        room = replicas + surge - (old_total + new_count)
        if new_count < replicas and room > 0:
            new_count = min(replicas, new_count + room)
            new = self._scale(rt, deploy, new, new_count)
        # Scale old ReplicaSets down: unavailable old pods first, then within maxUnavailable.
        available = sum(int((rs.get("status") or {}).get("availableReplicas", 0)) for rs in old + [new])
        budget = available - (replicas - unavailable)
        for rs in sorted(old, key=lambda r: r["metadata"].get("creationTimestamp", "")):
            count = int((rs.get("spec") or {}).get("replicas", 0))
            if not count:
                continue
            unhealthy = max(0, count - int((rs.get("status") or {}).get("availableReplicas", 0)))
            cut = min(count, unhealthy + max(0, budget))
            budget -= max(0, cut - unhealthy)
            if cut:
                self._scale(rt, deploy, rs, count - cut)

    def _cleanup(self, rt: Any, deploy: Object, old: list[Object]) -> None:
        limit = int((deploy.get("spec") or {}).get("revisionHistoryLimit", 10))
        idle = [rs for rs in old if not (rs.get("spec") or {}).get("replicas")
                and not (rs.get("status") or {}).get("replicas")]
        idle.sort(key=lambda r: int((r["metadata"].get("annotations") or {}).get(REVISION, 0)))
        for rs in idle[: max(0, len(idle) - limit)]:
            try:
                self.api.delete(rt, rs["metadata"]["namespace"], rs["metadata"]["name"])
            except ApiError:
                continue

    def _status(self, deploy: Object, new: Object, old: list[Object]) -> None:
        new = self.store.get(REPLICASETS, new["metadata"]["namespace"], new["metadata"]["name"]) or new
        sets = [new] + [self.store.get(REPLICASETS, r["metadata"]["namespace"], r["metadata"]["name"]) or r
                        for r in old]
        replicas = int((deploy.get("spec") or {}).get("replicas", 1))

        def total(field: str) -> int:
            return sum(int((rs.get("status") or {}).get(field, 0)) for rs in sets)

        available = total("availableReplicas")
        rolling = ((deploy.get("spec") or {}).get("strategy") or {}).get("rollingUpdate") or {}
        max_unavailable = _resolve(rolling.get("maxUnavailable", "25%"), replicas, round_up=False)
        old_status = deploy.get("status") or {}
        previous = {c.get("type"): c for c in old_status.get("conditions") or []}
        now = timestamp()

        def condition(ctype: str, ok: bool, reason: str, message: str) -> Object:
            prev = previous.get(ctype) or {}
            value = "True" if ok else "False"
            same = prev.get("status") == value
            return {"type": ctype, "status": value, "reason": reason, "message": message,
                    "lastUpdateTime": prev.get("lastUpdateTime", now) if same and prev.get("reason") == reason
                    else now,
                    "lastTransitionTime": prev.get("lastTransitionTime", now) if same else now}

        is_available = available >= replicas - max_unavailable
        updated = int((new.get("status") or {}).get("replicas", 0))
        complete = updated == replicas and total("replicas") == replicas and available == replicas
        rs_name = new["metadata"]["name"]
        status: Object = {
            "observedGeneration": deploy["metadata"].get("generation", 1),
            "replicas": total("replicas"),
            "updatedReplicas": updated,
            "readyReplicas": total("readyReplicas"),
            "availableReplicas": available,
            "conditions": [
                condition("Available", is_available,
                          "MinimumReplicasAvailable" if is_available else "MinimumReplicasUnavailable",
                          "Deployment has minimum availability." if is_available
                          else "Deployment does not have minimum availability."),
                condition("Progressing", True, "NewReplicaSetAvailable" if complete else "ReplicaSetUpdated",
                          f'ReplicaSet "{rs_name}" has successfully progressed.' if complete
                          else f'ReplicaSet "{rs_name}" is progressing.'),
            ],
        }
        if replicas - available > 0:
            status["unavailableReplicas"] = replicas - available
        self.api.write_status(self.api.type_of(*DEPLOYMENTS), deploy, status, "deployment-controller")
