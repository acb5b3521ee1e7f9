"""Publishing a TrafficMap as a global endpoint (spec reference §21), the built-in `gatewayapi`
publisher: what to write, or why not.

`plan` turns the map and the endpoint settings into an HTTPRoute `<isvc>-global` attached to
the global gateway, matching the global hostname at all paths, one backendRef per entry at the
entry's weight (0 included, at most 16), and per backend an ExternalName Service `tmb-<hash>`
pointing at the host of the entry's endpoint. When it cannot, the outcome says why, as the
`Published` condition will: `Withdrawn` (no gateway, port or hostname: route and Services
go), `InvalidPlan` (a hostname, template or gateway reference that cannot work, too many
entries). `claim_problem` decides `ClaimRejected` from what the cluster holds; `current` is
the staleness check a reader runs before trusting the route.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from models.trafficmap import TrafficMapEntry
from planning.trafficmap import texts

ROUTE_API_VERSION = "gateway.networking.k8s.io/v1"
ROUTE_KIND = "HTTPRoute"
ROUTE_PLURAL = "httproutes"
MAX_BACKENDS = 16
SERVICE_PREFIX = "tmb-"
_DNS_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
_TEMPLATE_ACTION = re.compile(r"\{\{-?\s*(.*?)\s*-?\}\}")
_TEMPLATE_FIELDS = {".Name": "name", ".Namespace": "namespace"}


@dataclass(frozen=True)
class EndpointSettings:
    """`ome.multicluster.config.endpoint` and the publisher's resync interval."""

    global_gateway: str = ""
    backend_port: int = 0
    global_host_template: str = ""


@dataclass(frozen=True)
class Plan:
    reason: str
    """`Published` when the objects below are to be written; else the outcome."""
    message: str
    route: dict[str, Any] | None = None
    services: list[dict[str, Any]] = field(default_factory=list)
    gateway: tuple[str, str] | None = None
    hostname: str | None = None
    weights: dict[str, int] = field(default_factory=dict)
    hosts: dict[str, str] = field(default_factory=dict)

    @property
    def withdraw(self) -> bool:
        return self.reason == texts.WITHDRAWN


def route_name(isvc: str) -> str:
    return f"{isvc}-global"


def service_name(namespace: str, isvc: str, cluster: str) -> str:
    """`tmb-<hash>`: stable per (map, cluster), short enough for any names."""
    digest = hashlib.sha256(f"{namespace}/{isvc}/{cluster}".encode()).hexdigest()[:10]
    return f"{SERVICE_PREFIX}{digest}"


def backend_selector(isvc: str) -> str:
    """The label selector of this map's backend Services."""
    return f"{texts.ENDPOINT_ISVC_LABEL}={isvc}"


def gateway_ref(text: str, namespace: str) -> tuple[str, str] | str:
    """(namespace, name) of `ns/name` or `name` (in the route's namespace), or the problem."""
    parts = text.split("/")
    if len(parts) > 2 or not all(_DNS_LABEL.match(p) for p in parts):
        return f'globalGateway "{text}" must be "namespace/name" or "name"'
    return (parts[0], parts[1]) if len(parts) == 2 else (namespace, parts[0])


def render_host(template: str, namespace: str, isvc: str) -> str:
    """The Go template with `.Name` and `.Namespace`; `ValueError` naming any other action."""
    values = {"name": isvc, "namespace": namespace}

    def substitute(match: re.Match[str]) -> str:
        action = match.group(1)
        if action not in _TEMPLATE_FIELDS:
            raise ValueError(f'globalHostTemplate "{template}" may use only .Name and .Namespace, not "{action}"')
        return values[_TEMPLATE_FIELDS[action]]

    rendered = _TEMPLATE_ACTION.sub(substitute, template)
    if "{{" in rendered or "}}" in rendered:
        raise ValueError(f'globalHostTemplate "{template}" is not a valid template')
    return rendered


def hostname_problem(host: str) -> str | None:
    """Why the global hostname is unusable: a lowercase DNS subdomain (may start `*.`), no IP."""
    try:
        ipaddress.ip_address(host)
        return f'global hostname "{host}" must be a DNS name, not an IP address'
    except ValueError:
        pass
    body = host[2:] if host.startswith("*.") else host
    if len(host) > 253 or not body or not all(_DNS_LABEL.match(label) for label in body.split(".")):
        return f'global hostname "{host}" must be a lowercase DNS subdomain (it may start with "*.")'
    return None


def endpoint_host(endpoint: str) -> str | None:
    return urlsplit(endpoint).hostname


def plan(namespace: str, isvc: str, entries: Sequence[TrafficMapEntry], settings: EndpointSettings,
         host_annotation: str | None) -> Plan:
    """What to publish for the map, or the outcome that says why not (§21)."""
    # Nothing to attach to or no name to answer at: the endpoint is switched off, not broken.
    if not settings.global_gateway:
        return Plan(texts.WITHDRAWN, "no global gateway is configured (OME_ROUTING__GLOBAL_GATEWAY); "
                    "the global route and its Services are removed")
    if not 1 <= settings.backend_port <= 65535:
        return Plan(texts.WITHDRAWN, f"the backend port must be from 1 to 65535 with a global gateway, got "
                    f"{settings.backend_port} (OME_ROUTING__BACKEND_PORT); the global route and its Services are removed")
    if not (host_annotation or settings.global_host_template):
        return Plan(texts.WITHDRAWN, f"no global hostname: set OME_ROUTING__GLOBAL_HOST_TEMPLATE or the "
                    f"{texts.GLOBAL_HOST_ANNOTATION} annotation; the global route and its Services are removed")
    gateway = gateway_ref(settings.global_gateway, namespace)
    if isinstance(gateway, str):
        return Plan(texts.INVALID_PLAN, gateway)
    try:
        host = host_annotation or render_host(settings.global_host_template, namespace, isvc)
    except ValueError as error:
        return Plan(texts.INVALID_PLAN, str(error))
    problem = hostname_problem(host)
    if problem is not None:
        return Plan(texts.INVALID_PLAN, problem)
    backends = [e for e in entries if e.endpoint and endpoint_host(e.endpoint)]
    if len(backends) > MAX_BACKENDS:
        return Plan(texts.INVALID_PLAN, f"the map has {len(backends)} entries; a global route takes at most "
                    f"{MAX_BACKENDS} backends")
    services = []
    backend_refs = []
    hosts: dict[str, str] = {}
    for entry in backends:
        assert entry.endpoint is not None
        target = endpoint_host(entry.endpoint) or ""
        hosts[entry.cluster] = target
        name = service_name(namespace, isvc, entry.cluster)
        services.append({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {texts.ENDPOINT_ISVC_LABEL: isvc, texts.CLUSTER_LABEL: entry.cluster},
            },
            "spec": {
                "type": "ExternalName",
                "externalName": target,
                "ports": [{"name": "http", "port": settings.backend_port, "protocol": "TCP"}],
            },
        })
        backend_refs.append({"group": "", "kind": "Service", "name": name, "port": settings.backend_port,
                             "weight": entry.weight})
    route = {
        "apiVersion": ROUTE_API_VERSION,
        "kind": ROUTE_KIND,
        "metadata": {"name": route_name(isvc), "namespace": namespace, "labels": {texts.ENDPOINT_ISVC_LABEL: isvc}},
        "spec": {
            "parentRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "namespace": gateway[0],
                            "name": gateway[1]}],
            "hostnames": [host],
            "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": "/"}}], "backendRefs": backend_refs}],
        },
    }
    return Plan(texts.REASON_PUBLISHED, texts.PUBLISHED_MESSAGE, route, services, gateway, host,
                {e.cluster: e.weight for e in backends}, hosts)


def _attached_to(route: Mapping[str, Any], gateway: tuple[str, str]) -> bool:
    route_namespace = (route.get("metadata") or {}).get("namespace")
    for parent in (route.get("spec") or {}).get("parentRefs") or []:
        if parent.get("name") == gateway[1] and (parent.get("namespace") or route_namespace) == gateway[0]:
            return True
    return False


def claim_problem(isvc: str, existing: Mapping[str, Any] | None, routes: Sequence[Mapping[str, Any]],
                  planned: Plan) -> str | None:
    """Why the route cannot be ours (`ClaimRejected`): its name is taken by a route we did not
    write, or another route on the gateway already answers at the hostname."""
    assert planned.route is not None and planned.gateway is not None
    metadata = planned.route["metadata"]
    if existing is not None and ((existing.get("metadata") or {}).get("labels") or {}).get(
        texts.ENDPOINT_ISVC_LABEL
    ) != isvc:
        return (f'HTTPRoute {metadata["namespace"]}/{metadata["name"]} exists and was not written for '
                f"InferenceService {isvc}; rename or remove it")
    for route in routes:
        other = route.get("metadata") or {}
        if (other.get("namespace"), other.get("name")) == (metadata["namespace"], metadata["name"]):
            continue
        if planned.hostname in ((route.get("spec") or {}).get("hostnames") or []) and _attached_to(
            route, planned.gateway
        ):
            return (f'HTTPRoute {other.get("namespace")}/{other.get("name")} already has hostname '
                    f'"{planned.hostname}" on Gateway {planned.gateway[0]}/{planned.gateway[1]}')
    return None


def stale_services(services: Sequence[Mapping[str, Any]], planned: Plan | None) -> list[str]:
    """Names of this map's backend Services that the plan no longer has (all, when withdrawn)."""
    keep = {s["metadata"]["name"] for s in planned.services} if planned is not None else set()
    return sorted(
        name for s in services
        if (name := (s.get("metadata") or {}).get("name", "")).startswith(SERVICE_PREFIX) and name not in keep
    )


def route_conditions(route: Mapping[str, Any] | None, gateway: tuple[str, str] | None) -> dict[str, str]:
    """The statuses of the route's conditions for our gateway, by type (`Accepted`, ...)."""
    if route is None or gateway is None:
        return {}
    route_namespace = (route.get("metadata") or {}).get("namespace")
    for parent in (route.get("status") or {}).get("parents") or []:
        ref = parent.get("parentRef") or {}
        if ref.get("name") == gateway[1] and (ref.get("namespace") or route_namespace) == gateway[0]:
            return {c.get("type", ""): c.get("status", "") for c in parent.get("conditions") or []}
    return {}


def current(map_generation: int | None, observed_generation: int | None,
            conditions: Mapping[str, str]) -> tuple[bool, str]:
    """§21's staleness check before trusting the route: (trustworthy, why not)."""
    if map_generation is None or observed_generation != map_generation:
        return False, (f"status.observedTrafficMapGeneration ({observed_generation}) is not the map's generation "
                       f"({map_generation}): the route carries an older table")
    for condition in ("Accepted", "ResolvedRefs"):
        if conditions.get(condition) != "True":
            return False, f"the route's {condition} condition is {conditions.get(condition, 'not reported')}, not True"
    return True, "the route carries the map's current weights"
