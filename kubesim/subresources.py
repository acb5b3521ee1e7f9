"""Subresources other than status: `scale` (autoscaling/v1 Scale over the declared replica
paths), pod `eviction` (policy/v1, refused with 429 when a PodDisruptionBudget allows no
disruption) and pod `binding` (what a scheduler posts to place a pod).
"""

from __future__ import annotations

import json
from typing import Any

from kubesim import errors
from kubesim.api import Api, dig
from kubesim.errors import ApiError
from kubesim.fastjson import clone
from kubesim.patch import apply_patch
from kubesim.resources import ResourceType
from kubesim.selectors import selector_matches, selector_to_string
from kubesim.store import Object
from kubesim.timing import timestamp

PODS = ("", "pods")


def _set_path(obj: Object, dotted: str, value: Any) -> None:
    parts = dotted.strip(".").split(".")
    node = obj
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value


def get_scale(api: Api, rt: ResourceType, namespace: str, name: str) -> Object:
    if not rt.scale:
        raise ApiError(404, f"the server could not find the requested resource ({rt.plural}/scale)")
    obj = api.get(rt, namespace, name)
    paths = rt.scale_paths
    meta = obj["metadata"]
    status: Object = {"replicas": dig(obj, paths.get("statusReplicasPath", ".status.replicas")) or 0}
    selector = dig(obj, paths["labelSelectorPath"]) if "labelSelectorPath" in paths else None
    if isinstance(selector, dict):
        selector = selector_to_string(selector)
    if selector:
        status["selector"] = selector
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                     if k in meta},
        "spec": {"replicas": dig(obj, paths.get("specReplicasPath", ".spec.replicas")) or 0},
        "status": status,
    }


def write_scale(api: Api, rt: ResourceType, namespace: str, name: str, body: Any, manager: str,
                content_type: str = "", dry_run: bool = False) -> Object:
    """Set the replicas through the scale subresource (a PUT body, or a patch when `content_type`
    names one); `dry_run` answers the Scale it would leave and changes nothing."""
    current = get_scale(api, rt, namespace, name)
    if content_type:
        try:
            patch_body = json.loads(body or b"null")
        except ValueError as exc:
            raise ApiError(400, f"the patch body is not valid JSON: {exc}") from exc
        scale = apply_patch(content_type, clone(current), patch_body, builtin=True)
    else:
        scale = body if isinstance(body, dict) else {}
    replicas = (scale.get("spec") or {}).get("replicas")
    if not isinstance(replicas, int) or replicas < 0:
        raise errors.invalid("Scale", "autoscaling", name, [(
            "spec.replicas", "FieldValueInvalid", f"Invalid value: {replicas!r}: must be a non-negative integer")])
    obj = clone(api.get(rt, namespace, name))
    rv = (scale.get("metadata") or {}).get("resourceVersion")
    if rv and rv != obj["metadata"]["resourceVersion"]:
        raise errors.conflict(rt.group, rt.plural, name, "the object has been modified; please apply your changes "
                              "to the latest version and try again")
    if dry_run:
        return {**current, "spec": {**current["spec"], "replicas": replicas}}
    _set_path(obj, rt.scale_paths.get("specReplicasPath", ".spec.replicas"), replicas)
    api.write(rt, obj, manager)
    return get_scale(api, rt, namespace, name)


def pod_is_ready(pod: Object) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def evict(api: Api, namespace: str, name: str, body: Any) -> Object:
    pods = api.type_of(*PODS)
    pod = api.get(pods, namespace, name)
    options = (body or {}).get("deleteOptions") or {}
    if pod["metadata"].get("deletionTimestamp"):
        return errors.status_object(201, "")
    phase = (pod.get("status") or {}).get("phase")
    if phase not in ("Succeeded", "Failed", "Pending"):
        pdbs = [p for p in api.store.list(("policy", "poddisruptionbudgets"), namespace)
                if selector_matches((p.get("spec") or {}).get("selector"), pod["metadata"].get("labels"))
                and (p.get("spec") or {}).get("selector") is not None]
        if len(pdbs) > 1:
            raise ApiError(500, "This pod has more than one PodDisruptionBudget, which the eviction subresource "
                           "does not support.")
        if pdbs and api.eviction_check is not None:
            pdb = pdbs[0]
            status = _fresh_pdb_status(api, pdb)
            policy = (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy", "IfHealthyBudget")
            unhealthy_ok = not pod_is_ready(pod) and (
                policy == "AlwaysAllow" or status["currentHealthy"] >= status["desiredHealthy"])
            if not unhealthy_ok and status["disruptionsAllowed"] <= 0:
                message = (f"The disruption budget {pdb['metadata']['name']} needs {status['desiredHealthy']} "
                           f"healthy pods and has {status['currentHealthy']} currently")
                raise ApiError(429, "Cannot evict pod as it would violate the pod's disruption budget.",
                               details={"causes": [{"reason": "DisruptionBudget", "message": message}]})
    # Since 1.26 an evicted pod is marked first, so its owner can tell eviction from failure.
    status = dict(pod.get("status") or {})
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != "DisruptionTarget"]
    conditions.append({"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI",
                       "message": "Eviction API: evicting", "lastTransitionTime": timestamp()})
    api.write_status(pods, pod, {**status, "conditions": conditions}, "kube-apiserver")
    api.delete(pods, namespace, name, options)
    return errors.status_object(201, "")


def _fresh_pdb_status(api: Api, pdb: Object) -> Object:
    # The PDB controller's status can lag a just-changed pod; decide on the current pods, as the
    # real eviction handler re-reads the budget and the disruption controller keeps it current.
    assert api.eviction_check is not None
    api.eviction_check(pdb)
    current = api.find("policy", "poddisruptionbudgets", pdb["metadata"]["namespace"], pdb["metadata"]["name"])
    return dict((current or pdb).get("status") or {})


def bind(api: Api, namespace: str, name: str, body: Any) -> Object:
    pods = api.type_of(*PODS)
    pod = api.get(pods, namespace, name)
    target = (body or {}).get("target") or {}
    node = target.get("name")
    if not node:
        raise errors.invalid("Binding", "", name, [("target.name", "FieldValueRequired", "Required value")])
    if (pod.get("spec") or {}).get("nodeName"):
        raise errors.conflict("", "pods", name, f"pod {name} is already assigned to node "
                              f"\"{pod['spec']['nodeName']}\"")
    if pod["metadata"].get("deletionTimestamp"):
        raise errors.conflict("", "pods", name, "pod is being deleted, cannot be assigned to a host")
    bind_pod(api, pod, node)
    return errors.status_object(201, "")


def bind_pod(api: Api, pod: Object, node: str, manager: str = "kube-scheduler") -> Object:
    """Set nodeName and PodScheduled=True, as the binding subresource does."""
    pods = api.type_of(*PODS)
    updated = clone(pod)
    updated["spec"]["nodeName"] = node
    # Binding writes nodeName directly, without the update strategy: no generation bump.
    stored = api.commit_update(pods, pod, updated, manager, "", bump_generation=False)
    conditions = [c for c in (stored.get("status") or {}).get("conditions") or [] if c.get("type") != "PodScheduled"]
    conditions.append({"type": "PodScheduled", "status": "True", "lastTransitionTime": timestamp()})
    return api.write_status(pods, stored, {**(stored.get("status") or {}), "conditions": conditions}, manager)
