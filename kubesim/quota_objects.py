"""What an object other than a pod uses of a ResourceQuota: object counts, as kube-apiserver's
object count evaluators count them.

A quota counts the objects of a kind by `count/<resource>` (core) or `count/<resource>.<group>`
(any other group: `count/deployments.apps`, `count/inferenceservices.ome.io`), and, for the core
kinds the API server always knew, by the resource's plain name: `services`, `configmaps`,
`secrets`, `persistentvolumeclaims`, `replicationcontrollers`, `resourcequotas`. A Service also
counts against `services.loadbalancers` (one, when its type is LoadBalancer) and
`services.nodeports` (each of its ports, when its type is NodePort or LoadBalancer; only the
ports given a node port when a LoadBalancer sets `allocateLoadBalancerNodePorts: false`).
Every stored object counts, a terminating one too. Pods are counted by `kubesim.quota_usage`.
Not counted: a PersistentVolumeClaim's storage (`requests.storage`).
"""

from __future__ import annotations

from decimal import Decimal

from kubesim.quota_usage import Quantity, Usage
from kubesim.store import Object, TypeKey

PODS: TypeKey = ("", "pods")
SERVICES: TypeKey = ("", "services")
PLAIN = frozenset({"services", "configmaps", "secrets", "persistentvolumeclaims", "replicationcontrollers", "resourcequotas"})
"""The core resources a quota counts by their plain name as well as by `count/<resource>`."""
SERVICE_NAMES = {"services.loadbalancers": SERVICES, "services.nodeports": SERVICES}


def counted_kind(name: str) -> TypeKey | None:
    """The kind whose objects a quota's `name` counts; None for a name that counts no objects,
    and for pods' names (`kubesim.quota_usage`)."""
    if name in PLAIN:
        kind: TypeKey = ("", name)
    elif name in SERVICE_NAMES:
        kind = SERVICE_NAMES[name]
    elif name.startswith("count/") and len(name) > len("count/"):
        resource, _, group = name.removeprefix("count/").partition(".")
        kind = (group, resource)
    else:
        return None
    return None if kind == PODS else kind


def count_name(kind: TypeKey) -> str:
    group, resource = kind
    return f"count/{resource}.{group}" if group else f"count/{resource}"


def object_usage(kind: TypeKey, obj: Object) -> Usage:
    """What `obj`, of `kind`, uses of every quota name that counts it (a Service's node ports
    and load balancers too, zero when it has none)."""
    used = {count_name(kind): _count(1)}
    if kind[0] == "" and kind[1] in PLAIN:
        used[kind[1]] = _count(1)
    if kind == SERVICES:
        spec = obj.get("spec") or {}
        ports = spec.get("ports") or []
        node_ports = load_balancers = 0
        if spec.get("type") == "NodePort":
            node_ports = len(ports)
        elif spec.get("type") == "LoadBalancer":
            load_balancers = 1
            allocated = spec.get("allocateLoadBalancerNodePorts") is not False
            node_ports = len(ports) if allocated else sum(1 for port in ports if port.get("nodePort"))
        used["services.loadbalancers"] = _count(load_balancers)
        used["services.nodeports"] = _count(node_ports)
    return used


def kind_usage(kind: TypeKey, objects: list[Object]) -> Usage:
    """What the objects of `kind` in a namespace use, summed."""
    summed: Usage = {}
    for obj in objects:
        for name, amount in object_usage(kind, obj).items():
            summed[name] = summed[name] + amount if name in summed else amount
    return summed


def _count(n: int) -> Quantity:
    return Quantity(Decimal(n))
