"""The analysis sample activity against a real Prometheus (tests/fixtures/prometheus.py).

Every answer Prometheus can give a canary gate, and every way asking can go wrong, ends as a
judged sample: pass and fail on a per-revision error ratio at the workflow's sample time, `no
data` for an empty vector, 0/0 and a ratio over zero requests, a range vector, a rejected query,
a refused connection, a query past the sample's budget, template errors, headers and bearer
tokens read from kubesim Secrets. None of them fails the activity.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from typing import Any

import pytest
from temporalio import activity
from temporalio.testing import ActivityEnvironment

from activities import prometheus
from activities.prometheus import PrometheusActivities
from activities.registry import build_activities
from models.canary_analysis import (
    PROMETHEUS_ANALYSIS_SAMPLE,
    AnalysisSampleInput,
    AnalysisSampleResult,
    BearerTokenRef,
    PrometheusTarget,
    TemplateFields,
)
from models.inferenceservice import AnalysisMetric
from planning.rollout.analysis.judge import Samples, judge_sample
from tests.activities.conftest import (
    CANARY,
    EARLY,
    GHOST,
    IDLE,
    LATE,
    NAMESPACE,
    SLOW_MARKER,
    STABLE,
    TOKEN_NAMESPACE,
    Proxy,
    Tokens,
)
from tests.fixtures.prometheus import free_port
from tests.fixtures.prometheus_blocks import PrometheusServer
from workers.client import DATA_CONVERTER

ERROR_RATIO = (
    'sum by (revision_hash) (rate(ome_requests_total{namespace="{{.Namespace}}",'
    'revision_hash="{{.CanaryRevision}}",code="500"}[5m]))'
    " / "
    'sum by (revision_hash) (rate(ome_requests_total{namespace="{{ .Namespace }}",'
    'revision_hash="{{.CanaryRevision}}"}[5m]))'
)
EVERY_REVISION_ERROR_RATIO = (
    'sum by (revision_hash) (rate(ome_requests_total{namespace="{{.Namespace}}",code="500"}[5m]))'
    ' / sum by (revision_hash) (rate(ome_requests_total{namespace="{{.Namespace}}"}[5m]))'
)
EVERY_REVISION_SUCCESS_RATIO = (
    'sum by (revision_hash) (rate(ome_requests_total{namespace="{{.Namespace}}",code="200"}[5m]))'
    ' / sum by (revision_hash) (rate(ome_requests_total{namespace="{{.Namespace}}"}[5m]))'
)
ERRORS_OVER_REQUESTS = (
    'sum by (revision_hash) (rate(ome_request_errors_total{revision_hash="{{.CanaryRevision}}"}[5m]))'
    ' / sum by (revision_hash) (rate(ome_requests_total{revision_hash="{{.CanaryRevision}}"}[5m]))'
)


def metric(query: str, operator: str = "LT", threshold: str = "0.05", name: str = "error_rate") -> AnalysisMetric:
    return AnalysisMetric.model_validate({"name": name, "query": query, "operator": operator, "threshold": threshold})


def sample_input(
    metrics: list[AnalysisMetric],
    address: str | None,
    *,
    canary: str = CANARY,
    at: datetime = LATE,
    timeout: float = 5.0,
    headers: dict[str, str] | None = None,
    token: BearerTokenRef | None = None,
) -> AnalysisSampleInput:
    return AnalysisSampleInput(
        target=PrometheusTarget(address=address, headers=headers or {}, bearer_token=token),
        metrics=metrics,
        fields=TemplateFields(
            namespace=NAMESPACE, isvc_name="chat", component="engine", canary_revision=canary, stable_revision=STABLE
        ),
        time=at,
        query_timeout_seconds=timeout,
        step_number=2,
        sample_number=3,
    )


async def run_sample(request: AnalysisSampleInput, kube_api_client: Any = None) -> AnalysisSampleResult:
    activities = PrometheusActivities(kube_api_client)
    result: AnalysisSampleResult = await ActivityEnvironment().run(activities.analysis_sample, request)
    return result


def only(result: AnalysisSampleResult) -> Any:
    (entry,) = result.metric_results
    return entry


# --- judging real answers --------------------------------------------------------------------


async def test_a_healthy_canary_passes_at_its_sample_time(prometheus: PrometheusServer) -> None:
    result = await run_sample(sample_input([metric(ERROR_RATIO)], prometheus.url, at=EARLY))
    assert result.verdict == "Pass"
    entry = only(result)
    assert float(entry.value) == pytest.approx(0.01)
    assert (entry.passed, entry.message, entry.threshold, entry.operator, entry.time) == (True, "", "0.05", "LT", EARLY)
    assert result.summary == "step 2 sample 3: Pass (error_rate 0.01 < 0.05)"


async def test_the_same_canary_fails_once_its_errors_jumped(prometheus: PrometheusServer) -> None:
    result = await run_sample(sample_input([metric(ERROR_RATIO)], prometheus.url, at=LATE))
    assert result.verdict == "Fail"
    entry = only(result)
    assert float(entry.value) == pytest.approx(0.2)
    assert (entry.passed, entry.message) == (False, "")
    assert result.summary == "step 2 sample 3: Fail (error_rate 0.2 >= 0.05)"


async def test_the_worst_series_decides_and_series_without_requests_are_left_out(prometheus: PrometheusServer) -> None:
    # Stable 0.01, canary 0.2, idle NaN: LT takes the largest finite value; GT the smallest.
    errors = metric(EVERY_REVISION_ERROR_RATIO, "LT", "0.05", "error_rate")
    successes = metric(EVERY_REVISION_SUCCESS_RATIO, "GT", "0.9", "success_rate")
    result = await run_sample(sample_input([errors, successes], prometheus.url, at=LATE))
    error_entry, success_entry = result.metric_results
    assert float(error_entry.value) == pytest.approx(0.2) and not error_entry.passed
    assert float(success_entry.value) == pytest.approx(0.8) and not success_entry.passed
    assert result.summary == "step 2 sample 3: Fail (error_rate 0.2 >= 0.05; success_rate 0.8 <= 0.9)"


async def test_a_scalar_result_is_judged_as_one_value(prometheus: PrometheusServer) -> None:
    query = 'scalar(sum(rate(ome_requests_total{revision_hash="{{.CanaryRevision}}"}[5m])))'
    result = await run_sample(sample_input([metric(query, "GTE", "5", "requests_per_second")], prometheus.url))
    assert result.verdict == "Pass"
    assert float(only(result).value) == pytest.approx(10.0)


@pytest.mark.parametrize(
    "query, canary",
    [
        (ERROR_RATIO, "0000"),
        (ERROR_RATIO, IDLE),
        (ERRORS_OVER_REQUESTS, GHOST),
    ],
    ids=["empty vector", "NaN (0/0): no requests", "+Inf: errors over zero requests"],
)
async def test_no_usable_value_is_no_data(prometheus: PrometheusServer, query: str, canary: str) -> None:
    result = await run_sample(sample_input([metric(query)], prometheus.url, canary=canary))
    assert result.verdict == "Inconclusive"
    entry = only(result)
    assert (entry.value, entry.passed, entry.message) == ("", False, "no data")
    assert result.summary == "step 2 sample 3: Inconclusive (error_rate: no data)"


async def test_a_range_vector_is_inconclusive_saying_so(prometheus: PrometheusServer) -> None:
    query = 'ome_requests_total{revision_hash="{{.CanaryRevision}}"}[5m]'
    result = await run_sample(sample_input([metric(query)], prometheus.url))
    assert result.verdict == "Inconclusive"
    entry = only(result)
    assert entry.value == ""
    assert "range vector (matrix)" in entry.message


async def test_a_query_prometheus_rejects_is_inconclusive_with_its_error(prometheus: PrometheusServer) -> None:
    result = await run_sample(sample_input([metric("sum(rate(ome_requests_total[5m])")], prometheus.url))
    assert result.verdict == "Inconclusive"
    message = only(result).message
    assert message.startswith(f"query rejected by Prometheus at {prometheus.url} (bad_data): ")
    assert "parse error" in message


async def test_a_template_error_is_one_inconclusive_metric_and_the_others_are_still_judged(
    prometheus: PrometheusServer,
) -> None:
    broken = metric('ome_requests_total{revision_hash="{{.Revision}}"}', name="broken")
    result = await run_sample(sample_input([metric(ERROR_RATIO), broken], prometheus.url, at=EARLY))
    assert result.verdict == "Inconclusive"
    good, bad = result.metric_results
    assert good.passed and float(good.value) == pytest.approx(0.01)
    assert bad.value == "" and bad.message.startswith("template error: unknown field .Revision")
    # A breach still wins over a template error.
    result = await run_sample(sample_input([metric(ERROR_RATIO), broken], prometheus.url, at=LATE))
    assert result.verdict == "Fail"


# --- when asking goes wrong ------------------------------------------------------------------


async def test_a_stopped_prometheus_is_inconclusive_not_a_failure() -> None:
    address = f"http://127.0.0.1:{free_port()}"
    result = await run_sample(sample_input([metric(ERROR_RATIO), metric("up", name="up")], address))
    assert result.verdict == "Inconclusive"
    for entry in result.metric_results:
        assert entry.value == ""
        assert entry.message.startswith(f"Prometheus at {address} is unreachable: ConnectError")


async def test_a_slow_answer_past_the_budget_is_inconclusive_and_the_fast_ones_count(proxied: Proxy) -> None:
    slow = metric(f"{ERROR_RATIO} {SLOW_MARKER}", name="slow_error_rate")
    started = time.monotonic()
    result = await run_sample(sample_input([metric(ERROR_RATIO), slow], proxied.url, at=EARLY, timeout=0.5))
    elapsed = time.monotonic() - started
    assert elapsed < 2.0, f"the sample took {elapsed:.1f}s; its budget was 0.5s"
    assert result.verdict == "Inconclusive"
    fast_entry, slow_entry = result.metric_results
    assert fast_entry.passed
    assert slow_entry.value == ""
    assert slow_entry.message == (
        f"no answer from Prometheus at {proxied.url} within queryTimeout 500ms "
        "(the budget for all queries of one sample)"
    )


async def test_a_running_sample_heartbeats_so_a_dead_worker_is_noticed(
    proxied: Proxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(prometheus, "HEARTBEAT_EVERY", 0.1)
    env = ActivityEnvironment()
    beats: list[tuple[Any, ...]] = []
    env.on_heartbeat = lambda *details: beats.append(details)
    slow = metric(f"{ERROR_RATIO} {SLOW_MARKER}", name="slow")
    result = await env.run(PrometheusActivities(None).analysis_sample, sample_input([slow], proxied.url, timeout=0.5))
    assert result.verdict == "Inconclusive"
    assert len(beats) >= 3, f"{len(beats)} heartbeat(s) during a 0.5 s sample"


async def test_samples_beyond_max_concurrency_wait_without_losing_their_budget(proxied: Proxy) -> None:
    activities = PrometheusActivities(None, max_concurrency=1)
    slow = metric(f"{ERROR_RATIO} {SLOW_MARKER}", name="slow")
    request = sample_input([metric(ERROR_RATIO), slow], proxied.url, at=EARLY, timeout=0.4)
    env = ActivityEnvironment()
    started = time.monotonic()
    first, second = await asyncio.gather(
        env.run(activities.analysis_sample, request), env.run(activities.analysis_sample, request)
    )
    # One after the other: each used its own 0.4 s, and the fast metric was answered in both.
    assert time.monotonic() - started >= 0.8
    for result in (first, second):
        assert [e.passed for e in result.metric_results] == [True, False]


async def test_configured_headers_are_sent_with_every_query(proxied: Proxy) -> None:
    headers = {"X-Scope-OrgID": "team-a", "X-Purpose": "canary-analysis"}
    result = await run_sample(
        sample_input([metric(ERROR_RATIO), metric("up", "GTE", "0", "up")], proxied.url, at=EARLY, headers=headers)
    )
    assert result.metric_results[0].passed
    assert len(proxied.seen) == 2
    for seen in proxied.seen:
        assert seen["X-Scope-OrgID"] == "team-a" and seen["X-Purpose"] == "canary-analysis"
        assert "Authorization" not in seen


@pytest.mark.parametrize(
    "address, detail",
    [
        (None, "no Prometheus to query"),
        ("", "no Prometheus to query"),
        ("prometheus:9090", 'address "prometheus:9090" is not an http(s) URL'),
        ("ftp://prometheus:9090", 'address "ftp://prometheus:9090" is not an http(s) URL'),
    ],
)
async def test_without_a_usable_address_the_single_entry_is_prometheus(address: str | None, detail: str) -> None:
    result = await run_sample(sample_input([metric(ERROR_RATIO)], address))
    assert result.verdict == "Inconclusive"
    entry = only(result)
    assert (entry.name, entry.value, entry.passed) == ("prometheus", "", False)
    assert detail in entry.message


# --- bearer tokens from Secrets --------------------------------------------------------------


def token_ref(name: str, key: str = "token") -> BearerTokenRef:
    return BearerTokenRef(namespace=TOKEN_NAMESPACE, name=name, key=key)


async def test_the_bearer_token_is_read_from_its_secret_on_every_sample(proxied: Proxy, tokens: Tokens) -> None:
    tokens.put("prom-token", {"token": "first-token\n"})
    proxied.required_token = "first-token"
    request = sample_input([metric(ERROR_RATIO)], proxied.url, at=EARLY, token=token_ref("prom-token"),
                           headers={"Authorization": "Basic ignored", "X-Scope-OrgID": "team-a"})
    client = tokens.sim.api_client()
    result = await run_sample(request, client)
    assert result.verdict == "Pass"
    assert proxied.seen[-1]["Authorization"] == "Bearer first-token"
    assert proxied.seen[-1]["X-Scope-OrgID"] == "team-a"
    # Rotated: the next sample sends the new token, no restart needed.
    tokens.put("prom-token", {"token": "second-token"})
    proxied.required_token = "second-token"
    result = await run_sample(request, client)
    assert result.verdict == "Pass"
    assert proxied.seen[-1]["Authorization"] == "Bearer second-token"


async def test_a_refused_token_is_an_inconclusive_query(proxied: Proxy, tokens: Tokens) -> None:
    tokens.put("stale-token", {"token": "stale"})
    proxied.required_token = "fresh"
    result = await run_sample(
        sample_input([metric(ERROR_RATIO)], proxied.url, token=token_ref("stale-token")), tokens.sim.api_client()
    )
    assert result.verdict == "Inconclusive"
    assert only(result).message.startswith(f"auth refused by Prometheus at {proxied.url}: HTTP 401")


@pytest.mark.parametrize(
    "secret, ref, detail",
    [
        (None, token_ref("missing"), f'resolve bearer token: Secret "{TOKEN_NAMESPACE}/missing" not found'),
        ({"other": "x"}, token_ref("wrong-key"), 'has no key "token" (its keys: other)'),
        ({"token": "  \n"}, token_ref("blank"), 'key "token" is empty'),
    ],
    ids=["missing Secret", "missing key", "empty token"],
)
async def test_an_unreadable_token_is_the_single_auth_entry_and_nothing_is_queried(
    proxied: Proxy, tokens: Tokens, secret: dict[str, str] | None, ref: BearerTokenRef, detail: str
) -> None:
    if secret is not None:
        tokens.put(ref.name, secret)
    result = await run_sample(sample_input([metric(ERROR_RATIO)], proxied.url, token=ref), tokens.sim.api_client())
    assert result.verdict == "Inconclusive"
    entry = only(result)
    assert (entry.name, entry.value, entry.passed) == ("auth", "", False)
    assert entry.message.startswith("resolve bearer token: ")
    assert detail in entry.message
    assert proxied.seen == []


async def test_a_token_without_a_kubernetes_client_is_the_auth_entry() -> None:
    result = await run_sample(sample_input([metric(ERROR_RATIO)], "http://127.0.0.1:9", token=token_ref("any")))
    assert only(result).name == "auth"
    assert only(result).message.startswith("resolve bearer token: the worker has no Kubernetes client")


# --- contract --------------------------------------------------------------------------------


def test_the_worker_registers_the_activity_with_its_contract() -> None:
    definitions = [activity._Definition.must_from_callable(fn) for fn in build_activities(None)]
    (sample,) = [d for d in definitions if d.name == PROMETHEUS_ANALYSIS_SAMPLE]
    assert sample.arg_types == [AnalysisSampleInput]
    assert sample.ret_type is AnalysisSampleResult


async def test_input_and_result_survive_the_data_converter() -> None:
    request = sample_input([metric(ERROR_RATIO)], "http://p:9090", token=token_ref("x"), headers={"X-A": "1"})
    (decoded,) = await DATA_CONVERTER.decode(await DATA_CONVERTER.encode([request]), [AnalysisSampleInput])
    assert decoded == request
    result = judge_sample(
        request.metrics, [Samples(("0.2",))], time=request.time, step_number=2, sample_number=3
    )
    (back,) = await DATA_CONVERTER.decode(await DATA_CONVERTER.encode([result]), [AnalysisSampleResult])
    assert back == result
