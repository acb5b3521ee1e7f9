"""Judging a sample: worst values, operators, inconclusive kinds, verdict and summary (§2.5, §2.6)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from models.canary_analysis import MetricResult
from models.inferenceservice import AnalysisMetric
from planning.rollout.analysis.judge import (
    NO_DATA,
    Observation,
    QueryFailed,
    RangeVector,
    Samples,
    TemplateFailed,
    judge_metric,
    judge_sample,
    unmeasured_sample,
    verdict_of,
    worst_value,
)

pytestmark = pytest.mark.unit

AT = datetime(2025, 6, 1, 0, 30, tzinfo=UTC)


def metric(operator: str = "LT", threshold: str = "0.05", name: str = "error_rate") -> AnalysisMetric:
    return AnalysisMetric.model_validate({"name": name, "query": "q", "operator": operator, "threshold": threshold})


@pytest.mark.parametrize(
    "operator, value, passed",
    [
        ("LT", "0.04", True), ("LT", "0.05", False), ("LT", "0.06", False),
        ("LTE", "0.04", True), ("LTE", "0.05", True), ("LTE", "0.06", False),
        ("GT", "0.06", True), ("GT", "0.05", False), ("GT", "0.04", False),
        ("GTE", "0.06", True), ("GTE", "0.05", True), ("GTE", "0.04", False),
    ],
)
def test_each_operator_passes_when_value_op_threshold_holds(operator: str, value: str, passed: bool) -> None:
    result = judge_metric(metric(operator), Samples((value,)), AT)
    assert (result.passed, result.value, result.message) == (passed, value, "")


@pytest.mark.parametrize(
    "operator, values, worst",
    [
        ("LT", ("0.01", "0.2", "0.03"), "0.2"),
        ("LTE", ("0.01", "0.2", "0.03"), "0.2"),
        ("GT", ("0.99", "0.8", "0.95"), "0.8"),
        ("GTE", ("0.99", "0.8", "0.95"), "0.8"),
        ("LT", ("-1", "-3"), "-1"),
        ("GT", ("1e3", "999"), "999"),
    ],
    ids=["LT max", "LTE max", "GT min", "GTE min", "negatives", "exponent"],
)
def test_the_worst_value_is_the_max_for_lt_and_the_min_for_gt(operator: str, values: tuple[str, ...], worst: str) -> None:
    assert worst_value(operator, values) == worst


def test_one_bad_pod_fails_the_metric_even_when_the_others_pass() -> None:
    result = judge_metric(metric("LT", "0.05"), Samples(("0.01", "0.21", "0.02")), AT)
    assert (result.passed, result.value) == (False, "0.21")
    result = judge_metric(metric("GTE", "0.9"), Samples(("0.99", "0.5")), AT)
    assert (result.passed, result.value) == (False, "0.5")


def test_the_value_is_kept_as_prometheus_wrote_it() -> None:
    result = judge_metric(metric(), Samples(("0.010000000000000002",)), AT)
    assert result.value == "0.010000000000000002"


def test_series_without_a_finite_value_are_left_out_of_the_worst_value() -> None:
    # A pod that served no requests has NaN; it neither passes nor fails the others.
    result = judge_metric(metric("LT", "0.05"), Samples(("NaN", "0.01", "+Inf")), AT)
    assert (result.passed, result.value) == (True, "0.01")


@pytest.mark.parametrize(
    "observation",
    [Samples(()), Samples(("NaN",)), Samples(("NaN", "NaN")), Samples(("+Inf",)), Samples(("-Inf",))],
    ids=["empty vector", "NaN (0/0)", "NaN in every series", "+Inf (x/0)", "-Inf"],
)
def test_no_finite_value_is_no_data(observation: Samples) -> None:
    result = judge_metric(metric(), observation, AT)
    assert (result.passed, result.value, result.message) == (False, "", NO_DATA)
    assert result.inconclusive and not result.breached


@pytest.mark.parametrize(
    "observation, message",
    [
        (RangeVector(series=2), "range vector (matrix)"),
        (QueryFailed("Prometheus at http://p:9090 is unreachable: connection refused"), "unreachable"),
        (TemplateFailed("template error: unknown field .Nope at offset 0; use one of ..."), "template error: "),
    ],
    ids=["range vector", "query error", "template error"],
)
def test_each_inconclusive_kind_leaves_the_value_empty_and_says_why(observation: Observation, message: str) -> None:
    result = judge_metric(metric(), observation, AT)
    assert (result.passed, result.value) == (False, "")
    assert message in result.message
    assert result.inconclusive


def test_a_template_error_keeps_its_prefix_first() -> None:
    result = judge_metric(metric(), TemplateFailed("template error: unclosed action at offset 0"), AT)
    assert result.message == "template error: unclosed action at offset 0"


def test_a_non_numeric_threshold_is_inconclusive_naming_it() -> None:
    result = judge_metric(metric("LT", "five"), Samples(("0.01",)), AT)
    assert result.inconclusive
    assert result.message == 'threshold "five" is not numeric; write it like "0.05"'


def test_the_entry_carries_every_status_field_on_the_wire() -> None:
    result = judge_metric(metric("LTE", "0.05", name="error_rate"), Samples(("0.01",)), AT)
    assert result.to_manifest() == {
        "name": "error_rate",
        "value": "0.01",
        "threshold": "0.05",
        "operator": "LTE",
        "passed": True,
        "message": "",
        "time": "2025-06-01T00:30:00Z",
    }


def entry(kind: str) -> MetricResult:
    observation: Observation = {
        "pass": Samples(("0.01",)),
        "fail": Samples(("0.2",)),
        "inconclusive": Samples(()),
    }[kind]
    return judge_metric(metric(name=kind), observation, AT)


@pytest.mark.parametrize(
    "kinds, verdict",
    [
        (["pass"], "Pass"),
        (["pass", "pass"], "Pass"),
        (["inconclusive"], "Inconclusive"),
        (["pass", "inconclusive"], "Inconclusive"),
        (["fail"], "Fail"),
        (["fail", "pass"], "Fail"),
        (["inconclusive", "fail"], "Fail"),
        (["pass", "inconclusive", "fail"], "Fail"),
    ],
)
def test_fail_beats_inconclusive_beats_pass(kinds: list[str], verdict: str) -> None:
    assert verdict_of([entry(k) for k in kinds]) == verdict


def test_a_sample_judges_every_metric_in_order() -> None:
    metrics = [metric("LT", "0.05", "error_rate"), metric("LT", "2", "p99_latency_seconds")]
    sample = judge_sample(metrics, [Samples(("0.21",)), Samples(("1.2",))], time=AT, step_number=2, sample_number=3)
    assert sample.verdict == "Fail"
    assert [r.name for r in sample.metric_results] == ["error_rate", "p99_latency_seconds"]
    assert sample.summary == "step 2 sample 3: Fail (error_rate 0.21 >= 0.05)"


def test_one_observation_per_metric() -> None:
    with pytest.raises(ValueError, match="2 metrics but 1 observations"):
        judge_sample([metric(), metric(name="b")], [Samples(())], time=AT, step_number=1, sample_number=1)


@pytest.mark.parametrize(
    "operator, value, summary",
    [
        ("LT", "0.21", "step 2 sample 3: Fail (error_rate 0.21 >= 0.05)"),
        ("LTE", "0.21", "step 2 sample 3: Fail (error_rate 0.21 > 0.05)"),
        ("GT", "0.01", "step 2 sample 3: Fail (error_rate 0.01 <= 0.05)"),
        ("GTE", "0.01", "step 2 sample 3: Fail (error_rate 0.01 < 0.05)"),
        ("LT", "0.01", "step 2 sample 3: Pass (error_rate 0.01 < 0.05)"),
        ("LTE", "0.05", "step 2 sample 3: Pass (error_rate 0.05 <= 0.05)"),
        ("GT", "0.21", "step 2 sample 3: Pass (error_rate 0.21 > 0.05)"),
        ("GTE", "0.05", "step 2 sample 3: Pass (error_rate 0.05 >= 0.05)"),
    ],
)
def test_the_summary_shows_the_comparison_that_decided(operator: str, value: str, summary: str) -> None:
    sample = judge_sample([metric(operator)], [Samples((value,))], time=AT, step_number=2, sample_number=3)
    assert sample.summary == summary


def test_a_pass_shows_every_metric_against_its_threshold() -> None:
    metrics = [metric("LT", "0.05", "error_rate"), metric("GTE", "10", "tokens_per_second")]
    sample = judge_sample(
        metrics, [Samples(("0.010000000000000002",)), Samples(("12.5",))], time=AT, step_number=1, sample_number=4
    )
    assert sample.summary == "step 1 sample 4: Pass (error_rate 0.01 < 0.05; tokens_per_second 12.5 >= 10)"


def test_a_fail_lists_every_breach_and_names_the_inconclusive_rest() -> None:
    metrics = [metric("LT", "0.05", "error_rate"), metric("LT", "2", "p99"), metric("LT", "1", "queue")]
    sample = judge_sample(
        metrics, [Samples(("0.2",)), Samples(("3.5",)), Samples(())], time=AT, step_number=1, sample_number=1
    )
    assert sample.summary == "step 1 sample 1: Fail (error_rate 0.2 >= 0.05; p99 3.5 >= 2; 1 more inconclusive: queue)"


def test_an_inconclusive_sample_says_which_metric_and_why() -> None:
    metrics = [metric("LT", "0.05", "error_rate"), metric("LT", "2", "p99")]
    sample = judge_sample(
        metrics,
        [Samples(()), QueryFailed("no answer from http://p:9090 within queryTimeout 5s")],
        time=AT,
        step_number=3,
        sample_number=1,
    )
    assert sample.verdict == "Inconclusive"
    assert sample.summary == (
        "step 3 sample 1: Inconclusive (error_rate: no data; p99: no answer from http://p:9090 within queryTimeout 5s)"
    )


def test_long_messages_are_cut_in_the_summary_but_kept_in_the_entry() -> None:
    long = "query rejected by Prometheus (bad_data): " + "x" * 1000
    sample = judge_sample([metric()], [QueryFailed(long)], time=AT, step_number=1, sample_number=1)
    assert sample.metric_results[0].message == long
    assert len(sample.summary) < 250 and sample.summary.endswith("...)")


def test_an_unmeasured_sample_has_a_single_named_entry() -> None:
    sample = unmeasured_sample(
        "auth", 'resolve bearer token: Secret "team-a/prom-token" not found', time=AT, step_number=2, sample_number=1
    )
    assert sample.verdict == "Inconclusive"
    (only,) = sample.metric_results
    assert (only.name, only.value, only.passed, only.time) == ("auth", "", False, AT)
    assert only.message.startswith("resolve bearer token:")
    assert sample.summary == (
        'step 2 sample 1: Inconclusive (auth: resolve bearer token: Secret "team-a/prom-token" not found)'
    )
