"""Fixtures of the canary analysis activity tests: one real Prometheus per module over an hour of
laid-out request counters, a recording proxy in front of it, and bearer-token Secrets in kubesim.

The hour starts at `T0` (2025-06-01T00:00:00Z), one sample every 15 s, in namespace `team-a`
for InferenceService `chat`, component `engine`, by `revision_hash`:

| revision | requests/s | errors (code 500)/s | error ratio |
| --- | --- | --- | --- |
| `5d2a` (stable) | 10 | 0.1 | 0.01 |
| `7c9e` (canary) | 10 | 0.1, from T0+30m: 2 | 0.01, then 0.2 |
| `1d1e` (idle) | 0 | 0 | NaN (0/0) |
| `9f9f` (ghost) | 0 | 1/15 in `ome_request_errors` | +Inf (errors over zero requests) |
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
import kubernetes
import pytest
import pytest_asyncio
from aiohttp import web
from kubernetes.client.exceptions import ApiException

from kubesim.handle import KubeSim
from tests.fixtures.prometheus_blocks import OpenMetrics, PrometheusServer, require_binaries

T0 = datetime(2025, 6, 1, tzinfo=UTC)
STEP_SECONDS = 15
STEPS = 240
EARLY = T0 + timedelta(minutes=20)
"""The canary still serves like the stable revision."""
LATE = T0 + timedelta(minutes=50)
"""The canary's errors jumped at T0+30m; its whole 5m window lies after that."""
NAMESPACE = "team-a"
STABLE, CANARY, IDLE, GHOST = "5d2a", "7c9e", "1d1e", "9f9f"
SLOW_MARKER = "# slow"
"""A PromQL comment: the proxy holds back queries carrying it."""
TOKEN_NAMESPACE = "analysis-tokens"


def _series() -> str:
    metrics = OpenMetrics()
    start = T0.timestamp()
    jump = 30 * 60 // STEP_SECONDS

    def labels(revision: str, code: str) -> dict[str, str]:
        return {
            "namespace": NAMESPACE, "inferenceservice": "chat", "component": "engine",
            "revision_hash": revision, "code": code,
        }

    per_step = float(STEP_SECONDS)
    for revision in (STABLE, CANARY):
        bad = revision == CANARY
        metrics.counter("ome_requests", labels(revision, "200"), start, STEP_SECONDS,
                        lambda i, bad=bad: (8.0 if bad and i >= jump else 9.9) * per_step, steps=STEPS)
        metrics.counter("ome_requests", labels(revision, "500"), start, STEP_SECONDS,
                        lambda i, bad=bad: (2.0 if bad and i >= jump else 0.1) * per_step, steps=STEPS)
    for revision in (IDLE, GHOST):
        for code in ("200", "500"):
            metrics.counter("ome_requests", labels(revision, code), start, STEP_SECONDS, [0.0] * STEPS)
    metrics.counter("ome_request_errors", labels(GHOST, "500"), start, STEP_SECONDS, [1.0] * STEPS)
    return metrics.text()


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    server = PrometheusServer(tmp_path_factory.mktemp("prometheus"), _series(), require_binaries()).start()
    try:
        yield server
    finally:
        server.stop()


@dataclass
class Proxy:
    """An HTTP server in front of Prometheus that records each request's headers, answers 401
    without `required_token`, and holds back queries carrying `SLOW_MARKER` for `delay` seconds."""

    upstream: str
    url: str = ""
    required_token: str | None = None
    delay: float = 10.0
    seen: list[dict[str, str]] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    """Set at teardown, so held-back queries end and the server stops at once."""

    def reset(self) -> None:
        self.required_token = None
        self.seen.clear()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def proxy(prometheus: PrometheusServer) -> AsyncIterator[Proxy]:
    state = Proxy(upstream=prometheus.url)
    session = aiohttp.ClientSession()

    async def forward(request: web.Request) -> web.Response:
        state.seen.append(dict(request.headers))
        if state.required_token is not None and request.headers.get("Authorization") != (
            f"Bearer {state.required_token}"
        ):
            return web.Response(status=401, text="Unauthorized")
        if SLOW_MARKER in request.query.get("query", ""):
            try:
                await asyncio.wait_for(state.release.wait(), state.delay)
            except TimeoutError:
                pass
        async with session.get(state.upstream + request.path, params=request.query) as answer:
            body = await answer.read()
            return web.Response(status=answer.status, body=body, content_type=answer.content_type)

    app = web.Application()
    app.router.add_get("/{tail:.*}", forward)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    state.url = f"http://127.0.0.1:{port}"
    try:
        yield state
    finally:
        state.release.set()
        await runner.cleanup()
        await session.close()


@pytest.fixture
def proxied(proxy: Proxy) -> Iterator[Proxy]:
    """The module's proxy, reset for one test."""
    proxy.reset()
    yield proxy
    proxy.reset()


@dataclass
class Tokens:
    """Bearer-token Secrets in kubesim's namespace `TOKEN_NAMESPACE`."""

    sim: KubeSim

    def core(self) -> Any:
        return kubernetes.client.CoreV1Api(self.sim.api_client())

    def put(self, name: str, data: dict[str, str]) -> None:
        body = {
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": TOKEN_NAMESPACE},
            "data": {key: base64.b64encode(value.encode()).decode() for key, value in data.items()},
        }
        try:
            self.core().create_namespaced_secret(TOKEN_NAMESPACE, body)
        except ApiException as error:
            if error.status != 409:
                raise
            self.core().replace_namespaced_secret(name, TOKEN_NAMESPACE, body)


@pytest.fixture(scope="module")
def tokens(kubesim_session: KubeSim) -> Tokens:
    store = Tokens(kubesim_session)
    try:
        store.core().create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": TOKEN_NAMESPACE}})
    except ApiException as error:
        if error.status != 409:
            raise
    return store
