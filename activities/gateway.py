"""HTTP observations of the home gateways for the TrafficMap (spec reference §18, §19).

`GatewayActivities.observe_homes` sends one period's due requests at once: each routing health
probe answers an HTTP status or the transport error; each capacity poll answers a report
`{"servable": N, "observedAt": "<RFC 3339>"}` or the §18 `fallbackReason` text that says why
not. Requests carry no body and no credentials, follow no redirects and ignore proxy
environment variables: they go to the endpoint the home reported, nowhere else.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

import httpx
from temporalio import activity

from models.routing_ops import (
    ROUTING_OBSERVE_HOMES,
    CapacityAnswer,
    HttpTarget,
    ObserveHomesInput,
    ObserveHomesResult,
    ProbeAnswer,
)

MAX_TEXT = 300
"""Error texts are cut: they land in the TrafficMap's entries and the workflow's history."""
MAX_REPORT_BYTES = 64 * 1024


def _cut(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 3] + "..."


def _describe(error: Exception) -> str:
    return _cut(f"{type(error).__name__}: {error}" if str(error) else type(error).__name__)


class GatewayActivities:
    """`transport` is injected so a test can answer without sockets; None: real HTTP."""

    def __init__(self, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.transport = transport

    def activities(self) -> list[Callable[..., Any]]:
        return [self.observe_homes]

    def _client(self, timeout: float) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=self.transport, timeout=timeout, follow_redirects=False, trust_env=False)

    @activity.defn(name=ROUTING_OBSERVE_HOMES)
    async def observe_homes(self, request: ObserveHomesInput) -> ObserveHomesResult:
        probes = await asyncio.gather(*(self.probe(target) for target in request.probes))
        capacity = await asyncio.gather(*(self.poll(target) for target in request.capacity))
        return ObserveHomesResult(probes=list(probes), capacity=list(capacity))

    async def probe(self, target: HttpTarget) -> ProbeAnswer:
        """One probe attempt: the status, or the transport error (`Failing` in §19)."""
        try:
            async with self._client(target.timeout_seconds) as client:
                response = await client.request(target.method, target.url)
        except httpx.TimeoutException as error:
            return ProbeAnswer(cluster=target.cluster, error=_cut(f"timeout after {target.timeout_seconds:g}s: "
                                                                  f"{_describe(error)}"))
        except (httpx.HTTPError, ValueError) as error:
            return ProbeAnswer(cluster=target.cluster, error=_describe(error))
        return ProbeAnswer(cluster=target.cluster, status=response.status_code)

    async def poll(self, target: HttpTarget) -> CapacityAnswer:
        """One capacity poll: the report, or the §18 text of what went wrong."""
        cluster = target.cluster
        try:
            url = httpx.URL(target.url)
            if url.scheme not in ("http", "https") or not url.host:
                return CapacityAnswer(cluster=cluster, failure=f"capacity request URL is invalid: {target.url}")
        except httpx.InvalidURL as error:
            return CapacityAnswer(cluster=cluster, failure=f"capacity request URL is invalid: {_describe(error)}")
        try:
            async with self._client(target.timeout_seconds) as client:
                async with client.stream(target.method, url) as response:
                    if not 200 <= response.status_code < 300:
                        return CapacityAnswer(
                            cluster=cluster, failure=f"capacity endpoint returned HTTP {response.status_code}"
                        )
                    try:
                        body = await response.aread()
                    except httpx.TimeoutException as error:
                        return CapacityAnswer(cluster=cluster,
                                              failure=f"capacity request did not complete: {_describe(error)}")
                    except httpx.HTTPError as error:
                        return CapacityAnswer(cluster=cluster, failure=f"reading capacity response: {_describe(error)}")
        except httpx.TimeoutException as error:
            return CapacityAnswer(cluster=cluster, failure=f"capacity request did not complete: {_describe(error)}")
        except httpx.HTTPError as error:
            return CapacityAnswer(cluster=cluster, failure=f"capacity endpoint unreachable: {_describe(error)}")
        return parse_report(cluster, body)


def parse_report(cluster: str, body: bytes) -> CapacityAnswer:
    """A report body as §18 reads it."""
    if len(body) > MAX_REPORT_BYTES:
        return CapacityAnswer(cluster=cluster, failure=f"capacity response is not a valid report: larger than "
                              f"{MAX_REPORT_BYTES} bytes")
    try:
        report = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        return CapacityAnswer(cluster=cluster, failure=f"capacity response is not a valid report: {_describe(error)}")
    if not isinstance(report, dict):
        return CapacityAnswer(cluster=cluster,
                              failure="capacity response is not a valid report: want a JSON object")
    servable = report.get("servable")
    if servable is None:
        return CapacityAnswer(cluster=cluster, failure="capacity report has no servable count")
    if isinstance(servable, bool) or not isinstance(servable, int):
        return CapacityAnswer(cluster=cluster, failure=f"capacity response is not a valid report: servable "
                              f"{_cut(json.dumps(servable))} is not a whole number")
    stamp = report.get("observedAt")
    if not stamp:
        return CapacityAnswer(cluster=cluster, failure="capacity report has no observedAt stamp")
    try:
        observed_at = datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
    except ValueError:
        return CapacityAnswer(cluster=cluster, failure=f"capacity response is not a valid report: observedAt "
                              f"{_cut(json.dumps(stamp))} is not an RFC 3339 time")
    if observed_at.tzinfo is None:
        return CapacityAnswer(cluster=cluster, failure=f"capacity response is not a valid report: observedAt "
                              f"{_cut(json.dumps(stamp))} has no time zone")
    return CapacityAnswer(cluster=cluster, servable=servable, observed_at=observed_at)
