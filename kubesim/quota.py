"""ResourceQuota on pods: the admission that refuses a pod over its namespace's quota, and what
a quota's status shows.

As kube-apiserver's quota admission does, a pod's creation is judged against each quota's
status, which the quota controller keeps (`kubesim.controllers.quota`), not against the pods
themselves: a quota counts from the moment its status names its limits (one just created limits
nothing until then), and room a pod frees shows once the controller has counted again. A pod
admitted is charged to every quota that limits it at once (`status.used` raised by its use),
so pods created faster than the controller counts are still held to the limit. What a pod uses,
and which `spec.hard` names count pods, is `kubesim.quota_usage`: the pod count, cpu, memory,
ephemeral storage, hugepages and extended resources (`requests.nvidia.com/gpu`). Each quota
that has such a name is judged, by name; the creation is refused with 403 Forbidden:
- `pods "<name>" is forbidden: failed quota: <quota>: must specify limits.cpu for: <c>; ...`
  when the quota limits cpu or memory and a container does not state it;
- `pods "<name>" is forbidden: status unknown for quota: <quota>, resources: <names>` when a
  quota's status names a limit but no use of it;
- `pods "<name>" is forbidden: exceeded quota: <quota>, requested: requests.nvidia.com/gpu=8,
  used: requests.nvidia.com/gpu=16, limited: requests.nvidia.com/gpu=16` when the pod would
  take a quota past a limit, naming each limit it would pass (sorted by name).

Quota admission comes last, after the validating webhooks (`WEBHOOK_PREVIEW`), as the
ResourceQuota plugin is the API server's last validating admission; a create of a name already
taken is refused after it, by storage (409 AlreadyExists), and its charge stays until the quota
is counted again, as on the API server.

A pod counts as the quota evaluator counts it: unless it finished (Succeeded or Failed), or it
is Terminating past its deletion grace (a pod stuck on a lost node stops holding its user's
quota); against `count/pods` every pod stored counts, finished or not.

What kubesim keeps of ResourceQuota beyond that: every `spec.hard` entry is shown in
`status.hard`, and `status.used` shows each name that counts pods; object counts of other kinds
(`services`, `count/configmaps`) are stored but neither counted nor enforced, and a quota with
`scopes` or a `scopeSelector` is not enforced at all (it could not be told which pods it covers).
"""

from __future__ import annotations

import datetime as dt
from contextvars import ContextVar

from kubesim.errors import ApiError
from kubesim.quota_usage import ZERO, Quantity, Usage, matching, missing, pod_usage, total
from kubesim.scheduler.match import QuantityError, parse_quantity
from kubesim.store import Object, Store
from kubesim.timing import parse_timestamp

PODS = ("", "pods")
QUOTAS = ("", "resourcequotas")
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
    """Whether `pod` holds its namespace's quota now (all but `count/pods`)."""
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return False
    stop = stops_counting(pod)
    return stop is None or now <= stop


def usage(store: Store, namespace: str, now: dt.datetime) -> Usage:
    """What the pods of `namespace` use of a quota: `count/pods` every pod in storage, as the
    object count does, everything else only the pods that hold it (`pod_counts`)."""
    return total(pod_usage(pod, pod_counts(pod, now)) for pod in store.list(PODS, namespace))


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


def _shown(amounts: dict[str, Quantity], names: list[str]) -> str:
    return ",".join(f"{name}={amounts[name]}" for name in names)


def admit_pod(store: Store, pod: Object) -> Charges:
    """Refuse `pod`'s creation when a quota of its namespace that counts pods requires what
    its containers do not state, or does not know its use yet (its status names a limit but no
    use of it), or, by its status, has no room for the pod (the first such quota by name, with
    each of its limits the pod would pass); else the charges: each quota that counts the pod,
    with its status raised by the pod's use."""
    namespace = pod["metadata"].get("namespace") or ""
    name = pod["metadata"]["name"]
    spec = pod.get("spec") or {}
    judged = []
    for quota in sorted(store.list(QUOTAS, namespace), key=lambda q: q["metadata"]["name"]):
        status = quota.get("status") or {}
        hard, used = status.get("hard") or {}, status.get("used") or {}
        limited = sorted(key for key in hard if matching(key))
        if not enforced(quota) or not limited:
            continue
        quota_name = quota["metadata"]["name"]
        absent = missing(spec, limited)
        if absent:
            needs = "; ".join(f"{key} for: {','.join(containers)}" for key, containers in absent.items())
            raise _forbidden(name, f"failed quota: {quota_name}: must specify {needs}")
        # Every quota's use must be known before any is judged full.
        if any(key not in used for key in limited):
            raise _forbidden(name, f"status unknown for quota: {quota_name}, resources: {','.join(limited)}")
        judged.append((quota, status, limited))
    requested = pod_usage(pod, counts=True)
    charges: Charges = []
    for quota, status, limited in judged:
        quota_name = quota["metadata"]["name"]
        hard = {key: Quantity.parse(status["hard"][key]) for key in limited}
        used = {key: Quantity.parse(status["used"][key]) for key in limited}
        raised = {key: used[key] + requested[key] for key in limited if key in requested}
        over = [key for key, amount in raised.items() if amount.amount > hard[key].amount]
        if over:
            raise _forbidden(
                name,
                f"exceeded quota: {quota_name}, requested: {_shown(requested, over)}, "
                f"used: {_shown(used, over)}, limited: {_shown(hard, over)}",
            )
        if raised:
            charged = {key: str(amount) for key, amount in raised.items()}
            charges.append((quota, {**status, "used": {**status["used"], **charged}}))
    return charges


def _forbidden(name: str, why: str) -> ApiError:
    return ApiError(403, f'pods "{name}" is forbidden: {why}', details={"name": name, "kind": "pods"})


def quota_status(quota: Object, used: Usage) -> Object:
    """What `quota`'s status shows: its hard limits, and what the pods use of each that counts
    them (nothing for a scoped quota, whose pods kubesim cannot tell)."""
    hard = dict((quota.get("spec") or {}).get("hard") or {})
    shown = {key: str(used.get(key, ZERO)) for key in hard if matching(key)} if enforced(quota) else {}
    return {"hard": hard, "used": shown}
