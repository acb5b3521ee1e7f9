"""The canary analysis sample activity: query Prometheus once per metric and judge the answers.

`PrometheusActivities(kube_api_client)` is what the worker registers (`activities/registry.py`).
Its one activity, `analysis_sample` (`PROMETHEUS_ANALYSIS_SAMPLE`), takes an
`AnalysisSampleInput` and returns an `AnalysisSampleResult` (models/canary_analysis.py):

1. the target must have an http(s) address, else the sample's single entry is `prometheus`;
2. a bearer token Secret, when the source names one, is read through the Kubernetes API on
   every sample (a rotated token is picked up at once); a Secret that cannot be read gives
   the single entry `auth`, message `resolve bearer token: ...`;
3. each metric's template is rendered (`template error: ...` on failure), then every query
   runs at once as an instant query at the sample's `time` (`/api/v1/query?time=`), all of
   them within one `queryTimeout` budget;
4. `planning/rollout/analysis/judge.py` judges the answers.

Nothing Prometheus does fails the activity: unreachable, refused, rejected (`bad_data`) or too
slow, each becomes an inconclusive metric result saying so, and the workflow takes the next
sample at the next interval. One activity is one sample, at its `time`: the workflow asks again
only for an attempt that did not complete (its worker died), which queries the same instant.
The activity heartbeats every `HEARTBEAT_EVERY` seconds while it runs, so such an attempt is
noticed within the workflow's heartbeat timeout. At most `max_concurrency` samples run at once
per worker (the `canaryAnalysis.maxConcurrency` limit); waiting for a slot does not eat into a
sample's query budget.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import time
from datetime import UTC, datetime
from typing import Any

import httpx
import urllib3.exceptions
from kubernetes.client.exceptions import ApiException
from temporalio import activity

from activities.kube_errors import cap
from activities.kube_rest import KubeRest, collection_path
from models.canary_analysis import (
    AUTH_ENTRY,
    PROMETHEUS_ANALYSIS_SAMPLE,
    PROMETHEUS_ENTRY,
    AnalysisSampleInput,
    AnalysisSampleResult,
    BearerTokenRef,
    PrometheusTarget,
)
from models.duration import format_duration
from planning.rollout.analysis.judge import (
    Observation,
    QueryFailed,
    RangeVector,
    Samples,
    TemplateFailed,
    judge_sample,
    unmeasured_sample,
)
from planning.rollout.analysis.source import DEFAULT_MAX_CONCURRENCY
from planning.rollout.analysis.templating import TemplateError, render_query

QUERY_PATH = "/api/v1/query"
HEARTBEAT_EVERY = 2.0
"""Seconds between heartbeats of a running sample (the SDK throttles them to its timeout)."""
MESSAGE_LIMIT = 500
"""Characters of a metric result's message: it lands in the InferenceService's status."""
TOKEN_PREFIX = "resolve bearer token:"


class TokenUnavailable(Exception):
    """The bearer token Secret could not be read; the message starts with `resolve bearer token:`."""


def address_problem(target: PrometheusTarget) -> str | None:
    """Why no client can be built for `target`, or None when its address is usable."""
    if not target.address:
        return (
            "no Prometheus to query: the canary names no providerRef or serverAddress, the cluster has no "
            "bound defaultProvider and the worker has no Prometheus URL (OME_PROMETHEUS__URL); configure one"
        )
    where = f' of metric provider "{target.provider}"' if target.provider else ""
    try:
        url = httpx.URL(target.address)
    except httpx.InvalidURL as error:
        return f'cannot build a Prometheus client: address "{target.address}"{where} is not a URL ({error})'
    if url.scheme not in ("http", "https") or not url.host:
        return (
            f'cannot build a Prometheus client: address "{target.address}"{where} is not an http(s) URL; '
            "write it like http://prometheus.monitoring.svc:9090"
        )
    return None


def observation_of(response: httpx.Response, address: str) -> Observation:
    """What one `/api/v1/query` answer says about the metric."""
    try:
        body: Any = response.json()
    except ValueError:
        body = None
    status = response.status_code
    if status == 200 and isinstance(body, dict) and body.get("status") == "success":
        data: dict[str, Any] = body.get("data") or {}
        kind: Any = data.get("resultType")
        result: Any = data.get("result")
        try:
            if kind == "vector":
                return Samples(tuple(str(series["value"][1]) for series in result))
            if kind == "scalar":
                return Samples((str(result[1]),))
        except (KeyError, IndexError, TypeError):
            return QueryFailed(cap(f"Prometheus at {address} answered a {kind} of unexpected shape: {body}", MESSAGE_LIMIT))
        if kind == "matrix":
            return RangeVector(series=len(result or ()))
        return QueryFailed(
            f"the query returned a {kind} result, not a number; make it an instant vector or a scalar"
        )
    error_type = body.get("errorType") if isinstance(body, dict) else None
    detail = body.get("error") if isinstance(body, dict) else response.text.strip()
    if status in (401, 403):
        return QueryFailed(cap(
            f"auth refused by Prometheus at {address}: HTTP {status}"
            + (f": {detail}" if detail else "")
            + "; check the bearer token Secret and the headers",
            MESSAGE_LIMIT,
        ))
    if error_type:
        return QueryFailed(cap(f"query rejected by Prometheus at {address} ({error_type}): {detail}", MESSAGE_LIMIT))
    return QueryFailed(cap(f"Prometheus at {address} answered HTTP {status}: {detail or response.reason_phrase}",
                           MESSAGE_LIMIT))


def _describe(error: httpx.HTTPError) -> str:
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


async def _heartbeat_every(seconds: float) -> None:
    """Tell the server the sample's worker is alive until cancelled."""
    while True:
        activity.heartbeat()
        await asyncio.sleep(seconds)


class PrometheusActivities:
    """The analysis sample activity; the Kubernetes client reads bearer-token Secrets."""

    def __init__(
        self, kube_api_client: Any, max_concurrency: int = DEFAULT_MAX_CONCURRENCY, cache_ttl_seconds: float = 120.0
    ) -> None:
        self.rest = KubeRest(kube_api_client, keep_alive=False) if kube_api_client is not None else None
        self._slots = asyncio.Semaphore(max(1, max_concurrency))
        self._inflight = 0
        self._queued = 0
        self.cache_ttl_seconds = cache_ttl_seconds
        self._finished: dict[str, tuple[float, AnalysisSampleResult]] = {}
        """A finished sample by its request, reused until `cacheTTL` (§2.2): a sample asked
        again (an activity retried after a lost completion) answers the same."""

    def activities(self) -> list[Any]:
        """The bound activity methods, for `Worker(activities=...)`."""
        return [self.analysis_sample]

    @activity.defn(name=PROMETHEUS_ANALYSIS_SAMPLE)
    async def analysis_sample(self, request: AnalysisSampleInput) -> AnalysisSampleResult:
        beating = asyncio.create_task(_heartbeat_every(HEARTBEAT_EVERY))
        try:
            return await self._answer(request)
        finally:
            beating.cancel()
            await asyncio.gather(beating, return_exceptions=True)

    async def _answer(self, request: AnalysisSampleInput) -> AnalysisSampleResult:
        key = request.model_dump_json()
        now = time.monotonic()
        self._finished = {k: v for k, v in self._finished.items() if v[0] > now}
        if key in self._finished:
            return self._finished[key][1]
        meter = activity.metric_meter()
        inflight = meter.create_gauge("ome_canary_sampler_inflight", "canary samples running in this worker")
        queued = meter.create_gauge("ome_canary_sampler_queue_depth", "canary samples waiting for a slot")
        starved = meter.create_counter(
            "ome_canary_sampler_starved_total", "samples that waited longer than their query budget for a slot"
        )
        self._queued += 1
        queued.set(self._queued)
        waiting = True
        try:
            async with self._slots:
                waiting = False
                self._queued -= 1
                queued.set(self._queued)
                if time.monotonic() - now > request.query_timeout_seconds:
                    starved.add(1)
                self._inflight += 1
                inflight.set(self._inflight)
                try:
                    result = await self._sample(request)
                finally:
                    self._inflight -= 1
                    inflight.set(self._inflight)
        finally:
            if waiting:  # cancelled before a slot freed up
                self._queued -= 1
                queued.set(self._queued)
        self._finished[key] = (time.monotonic() + self.cache_ttl_seconds, result)
        return result

    async def _sample(self, request: AnalysisSampleInput) -> AnalysisSampleResult:
        at = request.time if request.time.tzinfo is not None else request.time.replace(tzinfo=UTC)
        labels: dict[str, Any] = {
            "time": at, "step_number": request.step_number, "sample_number": request.sample_number,
        }
        target = request.target
        problem = address_problem(target)
        if problem is not None:
            return unmeasured_sample(PROMETHEUS_ENTRY, problem, **labels)
        assert target.address is not None
        headers = dict(target.headers)
        if target.bearer_token is not None:
            try:
                token = await asyncio.to_thread(self.read_token, target.bearer_token)
            except TokenUnavailable as error:
                return unmeasured_sample(AUTH_ENTRY, cap(str(error), MESSAGE_LIMIT), **labels)
            # The Secret's token wins over an Authorization header written in `headers`.
            headers = {k: v for k, v in headers.items() if k.lower() != "authorization"}
            headers["Authorization"] = f"Bearer {token}"
        queries: list[str | TemplateFailed] = []
        for metric in request.metrics:
            try:
                queries.append(render_query(metric.query, request.fields))
            except TemplateError as error:
                queries.append(TemplateFailed(cap(str(error), MESSAGE_LIMIT)))
        try:
            client = httpx.AsyncClient(headers=headers, timeout=request.query_timeout_seconds)
        except (ValueError, TypeError) as error:
            return unmeasured_sample(
                PROMETHEUS_ENTRY, cap(f"cannot build a Prometheus client: {error}; fix the headers", MESSAGE_LIMIT),
                **labels,
            )
        async with client:
            observations = await self._query_all(client, target.address, queries, at, request.query_timeout_seconds)
        return judge_sample(request.metrics, observations, **labels)

    async def _query_all(
        self,
        client: httpx.AsyncClient,
        address: str,
        queries: list[str | TemplateFailed],
        at: datetime,
        budget: float,
    ) -> list[Observation]:
        """Every query at once; those without an answer when the budget runs out are inconclusive."""
        url = address.rstrip("/") + QUERY_PATH
        tasks: dict[int, asyncio.Task[Observation]] = {
            position: asyncio.create_task(self._query(client, url, address, query, at, budget))
            for position, query in enumerate(queries)
            if isinstance(query, str)
        }
        try:
            if tasks:
                await asyncio.wait(tasks.values(), timeout=budget)
        finally:
            # Past the budget, or the activity itself cancelled: no query outlives the sample.
            for task in tasks.values():
                task.cancel()
            await asyncio.gather(*tasks.values(), return_exceptions=True)
        too_slow = QueryFailed(
            f"no answer from Prometheus at {address} within queryTimeout {format_duration(budget)} "
            "(the budget for all queries of one sample)"
        )
        observations: list[Observation] = []
        for position, query in enumerate(queries):
            if isinstance(query, TemplateFailed):
                observations.append(query)
                continue
            task = tasks[position]
            observations.append(task.result() if task.done() and not task.cancelled() else too_slow)
        return observations

    async def _query(
        self, client: httpx.AsyncClient, url: str, address: str, query: str, at: datetime, budget: float
    ) -> Observation:
        # `timeout` lets Prometheus give up evaluating as soon as we stop waiting.
        params = {"query": query, "time": f"{at.timestamp():.3f}", "timeout": f"{budget:g}"}
        try:
            response = await client.get(url, params=params)
        except httpx.TimeoutException:
            return QueryFailed(
                f"no answer from Prometheus at {address} within queryTimeout {format_duration(budget)} "
                "(the budget for all queries of one sample)"
            )
        except httpx.ConnectError as error:
            return QueryFailed(cap(f"Prometheus at {address} is unreachable: {_describe(error)}", MESSAGE_LIMIT))
        except httpx.HTTPError as error:
            return QueryFailed(cap(f"query to Prometheus at {address} failed: {_describe(error)}", MESSAGE_LIMIT))
        return observation_of(response, address)

    def read_token(self, ref: BearerTokenRef) -> str:
        """The bearer token in the Secret's key; `TokenUnavailable` saying what to fix."""
        where = f'Secret "{ref.namespace}/{ref.name}"'
        if self.rest is None:
            raise TokenUnavailable(f"{TOKEN_PREFIX} the worker has no Kubernetes client to read {where}")
        path = f"{collection_path('v1', 'secrets', ref.namespace)}/{ref.name}"
        try:
            secret = self.rest.get(path)
        except ApiException as error:
            if error.status == 404:
                raise TokenUnavailable(
                    f'{TOKEN_PREFIX} {where} not found; create it with key "{ref.key}" holding the token, '
                    f"or fix {ref.declared_by}"
                ) from error
            if error.status in (401, 403):
                raise TokenUnavailable(
                    f"{TOKEN_PREFIX} reading {where} was refused (HTTP {error.status}); grant the worker's "
                    f"service account get on secrets in namespace {ref.namespace}"
                ) from error
            raise TokenUnavailable(
                f"{TOKEN_PREFIX} reading {where} failed: HTTP {error.status} {error.reason}"
            ) from error
        except (urllib3.exceptions.HTTPError, OSError) as error:
            raise TokenUnavailable(
                f"{TOKEN_PREFIX} reading {where} failed: the Kubernetes API is unreachable ({error})"
            ) from error
        data = secret.get("data") or {}
        if ref.key not in data:
            keys = ", ".join(sorted(data)) or "none"
            raise TokenUnavailable(
                f'{TOKEN_PREFIX} {where} has no key "{ref.key}" (its keys: {keys}); add it, or fix {ref.declared_by}'
            )
        try:
            token = base64.b64decode(str(data[ref.key]), validate=True).decode("utf-8").strip()
        except (binascii.Error, UnicodeDecodeError) as error:
            raise TokenUnavailable(f'{TOKEN_PREFIX} {where} key "{ref.key}" is not base64 text ({error})') from error
        if not token:
            raise TokenUnavailable(f'{TOKEN_PREFIX} {where} key "{ref.key}" is empty; put the token in it')
        if not (token.isascii() and token.isprintable()):
            raise TokenUnavailable(
                f'{TOKEN_PREFIX} {where} key "{ref.key}" holds characters an Authorization header cannot carry'
            )
        return token
