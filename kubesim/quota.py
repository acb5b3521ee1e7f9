"""ResourceQuota on the number of pods: the admission that refuses a pod over its namespace's
quota, and what a quota's status shows.

As kube-apiserver's quota admission does, a pod's creation is refused with 403 Forbidden,
`pods "<name>" is forbidden: exceeded quota: <quota>, requested: pods=1, used: pods=<n>,
limited: pods=<n>`, when a ResourceQuota in its namespace limits `pods` (or `count/pods`) and
that many pods already count against it. Against `pods` a pod counts as the quota evaluator counts it:
unless it finished (Succeeded or Failed), or it is Terminating past its deletion grace (a pod
stuck on a lost node stops holding its user's quota); against `count/pods` every pod stored
counts, finished or not.

What kubesim keeps of ResourceQuota beyond that: every `spec.hard` entry is shown in
`status.hard`, and `status.used` shows the pod count (`kubesim.controllers.quota`); other
resources (cpu, memory, object counts) and quota scopes are stored but not enforced, and a
quota with `scopes` or a `scopeSelector` is not enforced at all (it could not be told which
pods it covers).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from kubesim.errors import ApiError
from kubesim.scheduler.match import QuantityError, parse_quantity
from kubesim.store import Object, Store
from kubesim.timing import parse_timestamp

PODS = ("", "pods")
QUOTAS = ("", "resourcequotas")
POD_COUNT_KEYS = ("pods", "count/pods")
"""The `spec.hard` names that limit the number of pods."""


def stops_counting(pod: Object) -> dt.datetime | None:
    """When a Terminating pod stops holding its quota: its deletion grace after its deletion
    time; None for a pod not Terminating."""
    meta = pod["metadata"]
    deletion, grace = meta.get("deletionTimestamp"), meta.get("deletionGracePeriodSeconds")
    if not deletion or grace is None:
        return None
    return parse_timestamp(deletion) + dt.timedelta(seconds=grace)


def pod_counts(pod: Object, now: dt.datetime) -> bool:
    """Whether `pod` holds its namespace's pod quota now."""
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return False
    stop = stops_counting(pod)
    return stop is None or now <= stop


def usage(store: Store, namespace: str, now: dt.datetime) -> dict[str, int]:
    """What the pods of `namespace` use of a quota: `pods` counts the pods that hold it
    (`pod_counts`), `count/pods` every pod in storage, as the object count does."""
    pods = store.list(PODS, namespace)
    return {"pods": sum(1 for pod in pods if pod_counts(pod, now)), "count/pods": len(pods)}


def enforced(quota: Object) -> bool:
    spec = quota.get("spec") or {}
    return not spec.get("scopes") and not spec.get("scopeSelector")


def pod_limits(quota: Object) -> list[tuple[str, int]]:
    """The pod-count limits of `quota` (`pods`, `count/pods`), as (name, limit)."""
    hard: dict[str, Any] = (quota.get("spec") or {}).get("hard") or {}
    return [(key, int(parse_quantity(hard[key]))) for key in POD_COUNT_KEYS if key in hard]


def hard_causes(quota: Object) -> list[tuple[str, str, str]]:
    """Validation causes for `spec.hard`: each value a quantity, none negative."""
    causes: list[tuple[str, str, str]] = []
    for key, value in ((quota.get("spec") or {}).get("hard") or {}).items():
        field = f"spec.hard[{key}]"
        try:
            amount = parse_quantity(value)
        except QuantityError as error:
            causes.append((field, "FieldValueInvalid", f'Invalid value: "{value}": {error}'))
            continue
        if amount < 0:
            causes.append(
                (field, "FieldValueInvalid", f'Invalid value: "{value}": must be greater than or equal to 0')
            )
    return causes


def admit_pod(store: Store, pod: Object, now: dt.datetime) -> None:
    """Refuse `pod`'s creation when a quota of its namespace has no room for one more pod:
    the first such quota by name, with each of its limits the pod would pass."""
    namespace = pod["metadata"].get("namespace") or ""
    quotas = [q for q in store.list(QUOTAS, namespace) if enforced(q) and pod_limits(q)]
    if not quotas:
        return
    used = usage(store, namespace, now)
    for quota in sorted(quotas, key=lambda q: q["metadata"]["name"]):
        over = sorted((key, limit) for key, limit in pod_limits(quota) if used[key] + 1 > limit)
        if not over:
            continue
        name = pod["metadata"]["name"]
        requested = ",".join(f"{key}=1" for key, _ in over)
        in_use = ",".join(f"{key}={used[key]}" for key, _ in over)
        limited = ",".join(f"{key}={limit}" for key, limit in over)
        raise ApiError(
            403,
            f'pods "{name}" is forbidden: exceeded quota: {quota["metadata"]["name"]}, '
            f"requested: {requested}, used: {in_use}, limited: {limited}",
            details={"name": name, "kind": "pods"},
        )


def quota_status(quota: Object, used: dict[str, int]) -> Object:
    """What `quota`'s status shows: its hard limits, and the pods counted against them (none
    for a scoped quota, whose pods kubesim cannot tell)."""
    hard = dict((quota.get("spec") or {}).get("hard") or {})
    shown = {key: str(used[key]) for key in POD_COUNT_KEYS if key in hard} if enforced(quota) else {}
    return {"hard": hard, "used": shown}
