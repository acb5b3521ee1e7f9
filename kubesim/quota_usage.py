"""What a pod uses of a ResourceQuota, as kube-apiserver's pod quota evaluator counts it, and
how a quota prints an amount.

A pod is counted against these `spec.hard` names (`matching`): `pods` and `count/pods`; `cpu`,
`memory` and `ephemeral-storage` with their `requests.` forms (the same amount) and their
`limits.` forms; `hugepages-<size>` and `requests.hugepages-<size>`; and an extended resource
(a name with a domain, outside `kubernetes.io`) as `requests.<name>` only, as quota admits it
(`requests.nvidia.com/gpu`).

A pod's requests are its containers' requests summed, or an init container's where that is
larger (init containers run one at a time, before the others), plus `spec.overhead`; its limits
likewise. A container's missing request was set to its limit when the pod was stored
(`kubesim.defaults`). Restartable init containers (sidecars) are counted as the others are,
one at a time: kubesim does not add them to the containers that follow them.

A quota that limits `cpu` or `memory` (in any of their forms) requires every container and init
container to state that request or limit (`missing`): the API server's backward-compatible
constraint, which refuses the pod with `failed quota: <quota>: must specify <names> for:
<containers>`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal

from kubesim.scheduler.match import parse_quantity
from kubesim.store import Object

COUNTS = ("pods", "count/pods")
STANDARD = ("cpu", "memory", "ephemeral-storage")
CONSTRAINED = frozenset({"cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"})
"""The names whose quota makes every container state the resource (the evaluator's
validation set)."""
_DECIMAL = (("E", 18), ("P", 15), ("T", 12), ("G", 9), ("M", 6), ("k", 3), ("", 0), ("m", -3), ("u", -6), ("n", -9))
_BINARY = (("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10))


@dataclass(frozen=True)
class Quantity:
    """An amount and the form it prints in: binary (`16Gi`) when the first amount it was
    summed from was written so, else decimal (`500m`, `8`, `2k`), as `resource.Quantity`
    keeps its receiver's format through additions."""

    amount: Decimal
    binary: bool = False

    @classmethod
    def parse(cls, value: object) -> Quantity:
        return cls(parse_quantity(value), str(value).strip().endswith("i"))

    def __add__(self, other: Quantity) -> Quantity:
        # A zero takes the other's form (Quantity.Add): "0" plus "16Gi" prints as "16Gi".
        return Quantity(self.amount + other.amount, other.binary if self.amount == 0 else self.binary)

    def __str__(self) -> str:
        amount = self.amount
        if amount == 0:
            return "0"
        if self.binary and amount == amount.to_integral_value() and abs(amount) >= 1024:
            for suffix, power in _BINARY:
                whole, rest = divmod(amount, 2**power)
                if not rest:
                    return f"{int(whole)}{suffix}"
            return str(int(amount))
        for suffix, exponent in _DECIMAL:
            mantissa = amount.scaleb(-exponent)
            if mantissa == mantissa.to_integral_value():
                return f"{int(mantissa)}{suffix}"
        return f"{int(amount.scaleb(9).to_integral_value(rounding='ROUND_CEILING'))}n"


ONE = Quantity(Decimal(1))
ZERO = Quantity(Decimal(0))
Usage = dict[str, Quantity]


def is_extended(name: str) -> bool:
    """A resource named with a domain other than kubernetes.io's (`nvidia.com/gpu`)."""
    domain = name.split("/", 1)[0] if "/" in name else ""
    return bool(domain) and not name.startswith("requests.") and not (
        domain == "kubernetes.io" or domain.endswith(".kubernetes.io"))


def matching(name: str) -> bool:
    """Whether a quota's `name` counts pods (the pod evaluator's matching resources)."""
    if name in COUNTS or name in STANDARD or name.startswith("hugepages-"):
        return True
    prefix, _, resource = name.partition(".")
    if prefix == "limits":
        return resource in STANDARD
    if prefix == "requests":
        return resource in STANDARD or resource.startswith("hugepages-") or is_extended(resource)
    return False


def _add(into: Usage, name: str, quantity: Quantity) -> None:
    into[name] = into[name] + quantity if name in into else quantity


def _per_resource(containers: Iterable[Object], side: str) -> Usage:
    total: Usage = {}
    for container in containers:
        for name, value in ((container.get("resources") or {}).get(side) or {}).items():
            _add(total, str(name), Quantity.parse(value))
    return total


def pod_resources(spec: Object, side: str) -> Usage:
    """The pod's `side` ("requests" or "limits"): its containers' summed, an init container's
    where larger, plus the pod's overhead."""
    total = _per_resource(spec.get("containers") or [], side)
    for init in spec.get("initContainers") or []:
        for name, quantity in _per_resource([init], side).items():
            if name not in total or quantity.amount > total[name].amount:
                total[name] = quantity
    for name, value in (spec.get("overhead") or {}).items():
        _add(total, str(name), Quantity.parse(value))
    return total


def _compute(requests: Mapping[str, Quantity], limits: Mapping[str, Quantity]) -> Usage:
    """The quota names a set of requests and limits is counted under (podComputeUsageHelper)."""
    usage: Usage = {"pods": ONE}
    for name in STANDARD:
        if name in requests:
            usage[name] = usage[f"requests.{name}"] = requests[name]
        if name in limits:
            usage[f"limits.{name}"] = limits[name]
    for name, quantity in requests.items():
        if name.startswith("hugepages-"):
            usage[name] = usage[f"requests.{name}"] = quantity
        elif is_extended(name):
            usage[f"requests.{name}"] = quantity
    return usage


def pod_usage(pod: Object, counts: bool) -> Usage:
    """What `pod` uses: `count/pods` always, everything else while it `counts`
    (`kubesim.quota.pod_counts`: not finished, not Terminating past its grace)."""
    usage: Usage = {"count/pods": ONE}
    if counts:
        spec = pod.get("spec") or {}
        usage.update(_compute(pod_resources(spec, "requests"), pod_resources(spec, "limits")))
    return usage


def total(usages: Iterable[Usage]) -> Usage:
    summed: Usage = {}
    for usage in usages:
        for name, quantity in usage.items():
            _add(summed, name, quantity)
    return summed


def missing(spec: Object, required: Iterable[str]) -> dict[str, list[str]]:
    """The constrained names in `required` that containers do not state, each with those
    containers' names, sorted (as the API server's message lists them)."""
    wanted = CONSTRAINED.intersection(required)
    absent: dict[str, list[str]] = {}
    if not wanted:
        return absent
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        stated = _compute(_per_resource([container], "requests"), _per_resource([container], "limits"))
        for name in wanted - stated.keys():
            absent.setdefault(name, []).append(str(container.get("name")))
    return {name: sorted(containers) for name, containers in sorted(absent.items())}
