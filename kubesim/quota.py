"""ResourceQuota: the admission that refuses a pod, or any object a quota counts, over its
namespace's quota, and what a quota's status shows.

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

The creation of any other namespaced object is judged the same way on the names that count
objects of its kind (`kubesim.quota_objects`: `services`, `count/configmaps`,
`count/deployments.apps`, `services.nodeports`), one each (a Service's node ports by its
ports): `services "<name>" is forbidden: exceeded quota: <quota>, requested: services=1, used:
services=4, limited: services=4`; a kind of another group is named with it
(`deployments.apps "<name>" is forbidden: ...`). Updates are not judged: a Service whose
change of type would take more node ports than the quota allows is let through, and counted.

What kubesim keeps of ResourceQuota beyond that: every `spec.hard` entry is shown in
`status.hard`, and `status.used` shows each name kubesim counts; a name it does not count (a
PersistentVolumeClaim's `requests.storage`) is stored, not shown in `status.used`, and not
enforced, and a quota with `scopes` or a `scopeSelector` is not enforced at all (it could not
be told which pods it covers).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from contextvars import ContextVar

from kubesim.errors import ApiError
from kubesim.quota_objects import PODS, counted_kind, kind_usage, object_usage
from kubesim.quota_usage import ZERO, Quantity, Usage, matching, missing, pod_usage, total
from kubesim.scheduler.match import QuantityError, parse_quantity
from kubesim.store import Object, Store, TypeKey
from kubesim.timing import parse_timestamp

QUOTAS = ("", "resourcequotas")
Charges = list[tuple[Object, Object]]
"""What an object's admission charges: each quota that counts it, with its status once charged."""
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


def usage(store: Store, namespace: str, now: dt.datetime, names: Iterable[str] = ()) -> Usage:
    """What `namespace` uses of a quota: what its pods use (`count/pods` every pod in storage,
    as the object count does, everything else only the pods that hold it: `pod_counts`), and the
    objects of each other kind one of `names` counts."""
    used = total(pod_usage(pod, pod_counts(pod, now)) for pod in store.list(PODS, namespace))
    for kind in sorted({kind for kind in map(counted_kind, names) if kind is not None}):
        used.update(kind_usage(kind, store.list(kind, namespace)))
    return used


def counted(name: str) -> bool:
    """Whether kubesim counts a quota's `name`: by pods or by objects of a kind."""
    return matching(name) or counted_kind(name) is not None


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


def admit(store: Store, kind: TypeKey, obj: Object) -> Charges:
    """Refuse the creation of `obj` (of `kind`, in a namespace) when a quota of its namespace that
    counts it requires what a pod's containers do not state, or does not know its use yet (its
    status names a limit but no use of it), or, by its status, has no room for it (the first
    such quota by name, with each of its limits it would pass); else the charges: each quota
    that counts it, with its status raised by its use. A pod is counted by `kubesim.quota_usage`,
    any other object by `kubesim.quota_objects`."""
    namespace = obj["metadata"].get("namespace") or ""
    if not namespace:
        return []
    name = obj["metadata"]["name"]
    requested = pod_usage(obj, counts=True) if kind == PODS else object_usage(kind, obj)
    counts: Callable[[str], bool] = matching if kind == PODS else requested.__contains__
    judged = []
    for quota in sorted(store.list(QUOTAS, namespace), key=lambda q: q["metadata"]["name"]):
        status = quota.get("status") or {}
        hard, used = status.get("hard") or {}, status.get("used") or {}
        limited = sorted(key for key in hard if counts(key))
        if not enforced(quota) or not limited:
            continue
        quota_name = quota["metadata"]["name"]
        absent = missing(obj.get("spec") or {}, limited) if kind == PODS else {}
        if absent:
            needs = "; ".join(f"{key} for: {','.join(containers)}" for key, containers in absent.items())
            raise _forbidden(kind, name, f"failed quota: {quota_name}: must specify {needs}")
        # Every quota's use must be known before any is judged full.
        if any(key not in used for key in limited):
            raise _forbidden(kind, name, f"status unknown for quota: {quota_name}, resources: {','.join(limited)}")
        judged.append((quota, status, limited))
    charges: Charges = []
    for quota, status, limited in judged:
        quota_name = quota["metadata"]["name"]
        hard = {key: Quantity.parse(status["hard"][key]) for key in limited}
        used = {key: Quantity.parse(status["used"][key]) for key in limited}
        raised = {key: used[key] + requested[key] for key in limited if key in requested}
        over = [key for key, amount in raised.items() if amount.amount > hard[key].amount]
        if over:
            raise _forbidden(
                kind,
                name,
                f"exceeded quota: {quota_name}, requested: {_shown(requested, over)}, "
                f"used: {_shown(used, over)}, limited: {_shown(hard, over)}",
            )
        if raised:
            charged = {key: str(amount) for key, amount in raised.items()}
            charges.append((quota, {**status, "used": {**status["used"], **charged}}))
    return charges


def _forbidden(kind: TypeKey, name: str, why: str) -> ApiError:
    group, resource = kind
    qualified = f"{resource}.{group}" if group else resource
    details = {"name": name, "group": group, "kind": resource} if group else {"name": name, "kind": resource}
    return ApiError(403, f'{qualified} "{name}" is forbidden: {why}', details=details)


def quota_status(quota: Object, used: Usage) -> Object:
    """What `quota`'s status shows: its hard limits, and what is used of each kubesim counts
    (nothing for a scoped quota, whose pods kubesim cannot tell)."""
    hard = dict((quota.get("spec") or {}).get("hard") or {})
    shown = {key: str(used.get(key, ZERO)) for key in hard if counted(key)} if enforced(quota) else {}
    return {"hard": hard, "used": shown}
