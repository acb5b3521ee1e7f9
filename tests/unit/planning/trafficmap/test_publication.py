"""§21's publication plan as tables: the route and its backends, the outcomes that stop it,
claims, stale backends, and the staleness check."""

from __future__ import annotations

from typing import Any

import pytest

from models.trafficmap import TrafficMapEntry
from planning.trafficmap import texts
from planning.trafficmap.publication import (
    MAX_BACKENDS,
    EndpointSettings,
    claim_problem,
    current,
    plan,
    route_conditions,
    service_name,
    stale_services,
)

pytestmark = pytest.mark.unit

SETTINGS = EndpointSettings("gateways/global", 8080, "{{ .Name }}.{{ .Namespace }}.global.example.com")


def entry(cluster: str, weight: int, endpoint: str | None = None) -> TrafficMapEntry:
    return TrafficMapEntry(cluster=cluster, weight=weight, endpoint=endpoint or f"http://{cluster}.example:80/prod/chat")


ENTRIES = [entry("worker-a", 2), entry("worker-b", 3), entry("worker-c", 0)]


def test_the_route_carries_one_backend_per_entry_at_its_weight() -> None:
    planned = plan("prod", "chat", ENTRIES, SETTINGS, None)
    assert (planned.reason, planned.message) == ("Published", 'TrafficMap is published by publisher "gatewayapi"')
    assert planned.route is not None
    assert planned.route["metadata"]["name"] == "chat-global"
    spec = planned.route["spec"]
    assert spec["hostnames"] == ["chat.prod.global.example.com"]
    assert spec["parentRefs"][0] | {} == {"group": "gateway.networking.k8s.io", "kind": "Gateway",
                                          "namespace": "gateways", "name": "global"}
    refs = spec["rules"][0]["backendRefs"]
    assert [(r["name"], r["port"], r["weight"]) for r in refs] == [
        (service_name("prod", "chat", c), 8080, w) for c, w in (("worker-a", 2), ("worker-b", 3), ("worker-c", 0))
    ]
    assert all(r["name"].startswith("tmb-") for r in refs)
    service = planned.services[0]
    assert service["spec"] == {"type": "ExternalName", "externalName": "worker-a.example",
                               "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}
    assert service["metadata"]["labels"] == {texts.ENDPOINT_ISVC_LABEL: "chat", texts.CLUSTER_LABEL: "worker-a"}


def test_a_gateway_name_alone_is_in_the_routes_namespace_and_the_annotation_wins() -> None:
    planned = plan("prod", "chat", ENTRIES, EndpointSettings("global", 8080, ""), "chat.example.com")
    assert planned.gateway == ("prod", "global") and planned.hostname == "chat.example.com"


@pytest.mark.parametrize(
    ("settings", "annotation", "reason", "message"),
    [
        pytest.param(EndpointSettings("", 8080, "x.example.com"), None, texts.WITHDRAWN,
                     "no global gateway is configured", id="no gateway"),
        pytest.param(EndpointSettings("gw", 0, "x.example.com"), None, texts.WITHDRAWN,
                     "the backend port must be from 1 to 65535", id="no port"),
        pytest.param(EndpointSettings("gw", 8080, ""), None, texts.WITHDRAWN, "no global hostname", id="no hostname"),
        pytest.param(EndpointSettings("a/b/c", 8080, "x.example.com"), None, texts.INVALID_PLAN,
                     'globalGateway "a/b/c" must be "namespace/name" or "name"', id="bad gateway ref"),
        pytest.param(EndpointSettings("gw", 8080, "{{ .Labels }}.example.com"), None, texts.INVALID_PLAN,
                     "may use only .Name and .Namespace", id="template field"),
        pytest.param(EndpointSettings("gw", 8080, "x.example.com"), "Chat.Example.com", texts.INVALID_PLAN,
                     "must be a lowercase DNS subdomain", id="uppercase host"),
        pytest.param(EndpointSettings("gw", 8080, "x.example.com"), "10.0.0.1", texts.INVALID_PLAN,
                     "not an IP address", id="IP host"),
        pytest.param(EndpointSettings("gw", 8080, "x.example.com"), "*.chat.example.com", texts.REASON_PUBLISHED,
                     "published by", id="a wildcard host is fine"),
    ],
)
def test_outcomes(settings: EndpointSettings, annotation: str | None, reason: str, message: str) -> None:
    planned = plan("prod", "chat", ENTRIES, settings, annotation)
    assert planned.reason == reason and message in planned.message
    assert planned.withdraw is (reason == texts.WITHDRAWN)


def test_at_most_16_backends() -> None:
    many = [entry(f"worker-{i}", 1) for i in range(MAX_BACKENDS + 1)]
    assert plan("prod", "chat", many, SETTINGS, None).reason == texts.INVALID_PLAN
    assert plan("prod", "chat", many[:MAX_BACKENDS], SETTINGS, None).reason == texts.REASON_PUBLISHED


def route(name: str, hostnames: list[str], labels: dict[str, str] | None = None, gateway: str = "global",
          namespace: str = "prod") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
            "spec": {"parentRefs": [{"namespace": "gateways", "name": gateway}], "hostnames": hostnames}}


OURS = route("chat-global", ["chat.prod.global.example.com"], {texts.ENDPOINT_ISVC_LABEL: "chat"})


@pytest.mark.parametrize(
    ("existing", "routes", "problem"),
    [
        pytest.param(None, [], None, id="nothing there"),
        pytest.param(OURS, [OURS], None, id="our own route"),
        pytest.param(route("chat-global", []), [], "exists and was not written for InferenceService chat",
                     id="name taken"),
        pytest.param(None, [route("other", ["chat.prod.global.example.com"])], "already has hostname",
                     id="hostname taken on the gateway"),
        pytest.param(None, [route("other", ["chat.prod.global.example.com"], gateway="internal")], None,
                     id="same hostname on another gateway"),
    ],
)
def test_claims(existing: dict[str, Any] | None, routes: list[dict[str, Any]], problem: str | None) -> None:
    found = claim_problem("chat", existing, routes, plan("prod", "chat", ENTRIES, SETTINGS, None))
    assert (found is None) if problem is None else (found is not None and problem in found)


def test_stale_backends() -> None:
    planned = plan("prod", "chat", ENTRIES[:1], SETTINGS, None)
    listed = [{"metadata": {"name": service_name("prod", "chat", c)}} for c in ("worker-a", "worker-b")]
    assert stale_services(listed, planned) == [service_name("prod", "chat", "worker-b")]
    assert len(stale_services(listed, None)) == 2


@pytest.mark.parametrize(
    ("generation", "observed", "conditions", "trusted"),
    [
        pytest.param(4, 4, {"Accepted": "True", "ResolvedRefs": "True"}, True, id="current"),
        pytest.param(5, 4, {"Accepted": "True", "ResolvedRefs": "True"}, False, id="map moved on"),
        pytest.param(4, 4, {"Accepted": "True", "ResolvedRefs": "False"}, False, id="refs unresolved"),
        pytest.param(4, 4, {}, False, id="no gateway status yet"),
        pytest.param(None, None, {}, False, id="never published"),
    ],
)
def test_staleness_check(generation: int | None, observed: int | None, conditions: dict[str, str],
                         trusted: bool) -> None:
    assert current(generation, observed, conditions)[0] is trusted


def test_route_conditions_for_our_gateway() -> None:
    obj = OURS | {"status": {"parents": [
        {"parentRef": {"namespace": "gateways", "name": "other"}, "conditions": [{"type": "Accepted", "status": "False"}]},
        {"parentRef": {"namespace": "gateways", "name": "global"},
         "conditions": [{"type": "Accepted", "status": "True"}, {"type": "ResolvedRefs", "status": "True"}]},
    ]}}
    assert route_conditions(obj, ("gateways", "global")) == {"Accepted": "True", "ResolvedRefs": "True"}
    assert route_conditions(None, ("gateways", "global")) == {}
