"""The home gateways' probes and capacity polls (`activities.gateway`), answered by an
`httpx.MockTransport`: every §18 failure text the planning expects, and probes that report a
status or a transport error, never following a redirect."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import pytest
from temporalio.testing import ActivityEnvironment

from activities.gateway import GatewayActivities, parse_report
from models.routing_ops import HttpTarget, ObserveHomesInput, ObserveHomesResult


def target(path: str, method: str = "GET") -> HttpTarget:
    return HttpTarget(cluster="worker-a", url=f"http://gw.example/prod/chat{path}", method=method,  # type: ignore[arg-type]
                      timeout_seconds=1)


def transport(handler: httpx.MockTransport | None = None) -> httpx.MockTransport:
    def answer(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path.endswith("/moved"):
            return httpx.Response(301, headers={"Location": "http://elsewhere.example/"})
        if path.endswith("/down"):
            raise httpx.ConnectError("connection refused", request=request)
        if path.endswith("/slow"):
            raise httpx.ReadTimeout("timed out", request=request)
        if path.endswith("/capacity"):
            assert request.method == "POST" and request.content == b""
            assert "authorization" not in request.headers
            return httpx.Response(200, json={"servable": 3, "observedAt": "2026-12-02T05:00:00Z"})
        if path.endswith("/busy"):
            return httpx.Response(503)
        return httpx.Response(200)

    return handler or httpx.MockTransport(answer)


async def observe(request: ObserveHomesInput) -> ObserveHomesResult:
    result: ObserveHomesResult = await ActivityEnvironment().run(GatewayActivities(transport()).observe_homes, request)
    return result


@pytest.mark.parametrize(
    ("path", "status", "error"),
    [
        pytest.param("/healthz", 200, None, id="passing"),
        pytest.param("/busy", 503, None, id="gate status"),
        pytest.param("/moved", 301, None, id="a redirect is answered, not followed"),
        pytest.param("/down", None, "ConnectError: connection refused", id="connect error"),
        pytest.param("/slow", None, "timeout after 1s: ReadTimeout: timed out", id="timeout"),
    ],
)
async def test_probes(path: str, status: int | None, error: str | None) -> None:
    result = await observe(ObserveHomesInput(probes=[target(path)]))
    assert (result.probes[0].status, result.probes[0].error) == (status, error)


async def test_a_capacity_poll_reads_the_report() -> None:
    result = await observe(ObserveHomesInput(capacity=[target("/capacity", "POST")]))
    answer = result.capacity[0]
    assert (answer.servable, answer.observed_at, answer.failure) == (3, datetime(2026, 12, 2, 5, tzinfo=UTC), None)


@pytest.mark.parametrize(
    ("path", "failure"),
    [
        pytest.param("/busy", "capacity endpoint returned HTTP 503", id="HTTP status"),
        pytest.param("/moved", "capacity endpoint returned HTTP 301", id="redirect"),
        pytest.param("/down", "capacity endpoint unreachable: ConnectError: connection refused", id="unreachable"),
        pytest.param("/slow", "capacity request did not complete: ReadTimeout: timed out", id="timeout"),
    ],
)
async def test_capacity_transport_failures(path: str, failure: str) -> None:
    result = await observe(ObserveHomesInput(capacity=[target(path)]))
    assert result.capacity[0].failure == failure


async def test_an_invalid_url_is_named() -> None:
    bad = HttpTarget(cluster="worker-a", url="ftp://gw.example/capacity", timeout_seconds=1)
    result = await observe(ObserveHomesInput(capacity=[bad]))
    assert result.capacity[0].failure == "capacity request URL is invalid: ftp://gw.example/capacity"


@pytest.mark.parametrize(
    ("body", "failure"),
    [
        pytest.param(b"not json", "capacity response is not a valid report: ", id="not JSON"),
        pytest.param(b"[1]", "capacity response is not a valid report: want a JSON object", id="a list"),
        pytest.param(b'{"observedAt": "2026-12-02T05:00:00Z"}', "capacity report has no servable count",
                     id="no servable"),
        pytest.param(b'{"servable": 2}', "capacity report has no observedAt stamp", id="no stamp"),
        pytest.param(b'{"servable": "2", "observedAt": "2026-12-02T05:00:00Z"}',
                     'capacity response is not a valid report: servable "2" is not a whole number', id="servable text"),
        pytest.param(b'{"servable": 2, "observedAt": "yesterday"}',
                     'capacity response is not a valid report: observedAt "yesterday" is not an RFC 3339 time',
                     id="bad stamp"),
    ],
)
def test_report_bodies(body: bytes, failure: str) -> None:
    answer = parse_report("worker-a", body)
    assert answer.failure is not None and answer.failure.startswith(failure)


def test_a_negative_count_is_passed_on_for_the_planning_to_name() -> None:
    # `planning.trafficmap.capacity.observe` turns it into `capacity report is negative (-1)`.
    assert parse_report("a", b'{"servable": -1, "observedAt": "2026-12-02T05:00:00Z"}').servable == -1


def test_the_routing_activities_are_registered_with_the_wrappers_models() -> None:
    from temporalio import activity

    from activities.registry import build_activities
    from models.routing_ops import ROUTING_OBSERVE_HOMES, ROUTING_SETTINGS, RoutingSettingsResult

    registered = {d.name: d for d in (activity._Definition.must_from_callable(fn) for fn in build_activities(None))}
    assert registered[ROUTING_OBSERVE_HOMES].arg_types == [ObserveHomesInput]
    assert registered[ROUTING_OBSERVE_HOMES].ret_type is ObserveHomesResult
    assert registered[ROUTING_SETTINGS].arg_types == [] and registered[ROUTING_SETTINGS].ret_type is RoutingSettingsResult
