"""ResourceQuota on the number of pods: the admission that refuses a pod over its namespace's
quota, and what a quota's status shows.

As kube-apiserver's quota admission does, a pod's creation is judged against each quota's
status, which the quota controller keeps (`kubesim.controllers.quota`), not against the pods
themselves: a quota counts from the moment its status names its limits (one just created limits
nothing until then), and room a pod frees shows once the controller has counted again. A pod
admitted is charged to every quota that limits it at once (`status.used` one higher), so pods
created faster than the controller counts are still held to the limit. The creation is refused
with 403 Forbidden:
- `pods "<name>" is forbidden: exceeded quota: <quota>, requested: pods=1, used: pods=<n>,
  limited: pods=<n>` when a quota of its namespace limits `pods` (or `count/pods`) and that many
  already count against it;
- `pods "<name>" is forbidden: status unknown for quota: <quota>, resources: pods` when a quota's
  status names a limit but no use of it.

Quota admission comes last, after the validating webhooks (`WEBHOOK_PREVIEW`), as the
ResourceQuota plugin is the API server's last validating admission; a create of a name already
taken is refused after it, by storage (409 AlreadyExists), and its charge stays until the quota
is counted again, as on the API server.

Against `pods` a pod counts as the quota evaluator counts it: unless it finished (Succeeded or
Failed), or it is Terminating past its deletion grace (a pod stuck on a lost node stops holding
its user's quota); against `count/pods` every pod stored counts, finished or not.

What kubesim keeps of ResourceQuota beyond that: every `spec.hard` entry is shown in
`status.hard`, and `status.used` shows the pod count; other resources (cpu, memory, object
counts) and quota scopes are stored but not enforced, and a quota with `scopes` or a
`scopeSelector` is not enforced at all (it could not be told which pods it covers).
"""

from __future__ import annotations

import datetime as dt
from contextvars import ContextVar
from typing import Any

from kubesim.errors import ApiError
from kubesim.scheduler.match import QuantityError, parse_quantity
from kubesim.store import Object, Store
from kubesim.timing import parse_timestamp

PODS = ("", "pods")
QUOTAS = ("", "resourcequotas")
POD_COUNT_KEYS = ("pods", "count/pods")
"""The `spec.hard` names that limit the number of pods."""
Charges = list[tuple[Object, Object]]
"""What a pod's admission charges: each quota with its status once charged."""
WEBHOOK_PREVIEW: ContextVar[bool] = ContextVar("webhook_preview", default=False)
"""Set while a write is previewed for the validating webhooks (`kubesim.admitted_writes`): the
preview is not judged on the quota, which comes after them, nor a create on its name being
taken, which storage finds after the whole admission."""


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


def _count(value: Any) -> int:
    return int(parse_quantity(value))


def admit_pod(store: Store, pod: Object) -> Charges:
    """Refuse `pod`'s creation when a quota of its namespace does not know its use yet (its
    status names a pod limit but no use of it), or, by its status, has no room for one more pod
    (the first such quota by name, with each of its limits the pod would pass); else the
    charges: each quota that limits pods, with its status one pod higher."""
    namespace = pod["metadata"].get("namespace") or ""
    name = pod["metadata"]["name"]
    judged = []
    for quota in sorted(store.list(QUOTAS, namespace), key=lambda q: q["metadata"]["name"]):
        status = quota.get("status") or {}
        hard, used = status.get("hard") or {}, status.get("used") or {}
        limited = sorted(key for key in POD_COUNT_KEYS if key in hard)
        if not enforced(quota) or not limited:
            continue
        # Every quota's use must be known before any is judged full.
        if any(key not in used for key in limited):
            quota_name = quota["metadata"]["name"]
            raise _forbidden(name, f"status unknown for quota: {quota_name}, resources: {','.join(limited)}")
        judged.append((quota, status, limited))
    charges: Charges = []
    for quota, status, limited in judged:
        quota_name = quota["metadata"]["name"]
        hard, used = status["hard"], status["used"]
        counts = {key: (_count(used[key]), _count(hard[key])) for key in limited}
        over = [(key, n, limit) for key, (n, limit) in counts.items() if n + 1 > limit]
        if over:
            raise _forbidden(
                name,
                f"exceeded quota: {quota_name}, "
                f"requested: {','.join(f'{key}=1' for key, _, _ in over)}, "
                f"used: {','.join(f'{key}={n}' for key, n, _ in over)}, "
                f"limited: {','.join(f'{key}={limit}' for key, _, limit in over)}",
            )
        charged = {key: str(n + 1) for key, (n, _) in counts.items()}
        charges.append((quota, {**status, "used": {**used, **charged}}))
    return charges


def _forbidden(name: str, why: str) -> ApiError:
    return ApiError(403, f'pods "{name}" is forbidden: {why}', details={"name": name, "kind": "pods"})


def quota_status(quota: Object, used: dict[str, int]) -> Object:
    """What `quota`'s status shows: its hard limits, and the pods counted against them (none
    for a scoped quota, whose pods kubesim cannot tell)."""
    hard = dict((quota.get("spec") or {}).get("hard") or {})
    shown = {key: str(used[key]) for key in POD_COUNT_KEYS if key in hard} if enforced(quota) else {}
    return {"hard": hard, "used": shown}
