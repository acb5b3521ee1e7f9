"""Judge one analysis sample (spec reference §2.5, §2.6).

Per metric, what its query returned (`Observation`) becomes one `metricResults` entry:
- an instant vector (or a scalar) is judged by its worst value: the largest for `LT`/`LTE`,
  the smallest for `GT`/`GTE`, so per-pod series pass only if every pod passes. The metric
  passes when `value <op> threshold` (LT: value < threshold). `value` is the worst sample as
  Prometheus wrote it;
- inconclusive, with an empty `value`: an empty vector, or one whose every value is NaN or
  infinite (a ratio over zero requests: 0/0 is NaN, x/0 is +Inf), both `no data`; a query
  error; a range vector (matrix), which a gate cannot compare with a threshold; a template
  error. Within a vector, series without a finite value (pods that served no requests) are
  left out of the worst value rather than making the whole metric inconclusive.

The sample's verdict: `Fail` if any metric breached its threshold, else `Inconclusive` if any
metric was inconclusive, else `Pass`. A sample that could not be measured at all (no token,
no client) has a single entry named `auth` or `prometheus` and is inconclusive (§2.6).

The summary is one line for the Temporal UI and events, read by someone woken at 3 a.m.: the
verdict and, in brackets, what decided it: the comparisons that failed (`error_rate 0.21 >=
0.05`), else what was inconclusive and why, else every comparison that held, so a pass shows
how close each metric came to its threshold.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from models.admission_rollout import parse_threshold
from models.canary_analysis import AnalysisSampleResult, MetricResult, Verdict
from models.inferenceservice import AnalysisMetric

NO_DATA = "no data"
RANGE_VECTOR_MESSAGE = (
    "the query returned a range vector (matrix), which cannot be compared with a threshold; "
    "make it an instant query, e.g. wrap x[5m] in rate() or drop the range"
)
SUMMARY_LIMIT = 500
"""Characters of a summary; past it the line is cut, saying so."""
DETAIL_LIMIT = 160
"""Characters of one inconclusive metric's message inside a summary."""

# The comparison that passes, and the one a breach shows (its negation).
_PASSES = {"LT": "<", "LTE": "<=", "GT": ">", "GTE": ">="}
_BREACHES = {"LT": ">=", "LTE": ">", "GT": "<=", "GTE": "<"}


@dataclass(frozen=True)
class Samples:
    """An instant vector's values (one per series), or a scalar's single value, as Prometheus
    wrote them (`"0.01"`, `"NaN"`, `"+Inf"`)."""

    values: tuple[str, ...]


@dataclass(frozen=True)
class RangeVector:
    """The query returned a matrix (`x[5m]`)."""

    series: int = 0


@dataclass(frozen=True)
class QueryFailed:
    """The query could not be answered: unreachable, refused, rejected, too slow."""

    message: str


@dataclass(frozen=True)
class TemplateFailed:
    """The query template did not render; `message` starts with `template error:`."""

    message: str


Observation = Samples | RangeVector | QueryFailed | TemplateFailed


def passes(operator: str, value: float, threshold: float) -> bool:
    """`value <operator> threshold`."""
    if operator == "LT":
        return value < threshold
    if operator == "LTE":
        return value <= threshold
    if operator == "GT":
        return value > threshold
    if operator == "GTE":
        return value >= threshold
    raise ValueError(f"operator {operator!r} is not one of LT, LTE, GT, GTE")


def worst_value(operator: str, values: Sequence[str]) -> str | None:
    """The worst of `values` for `operator` (max for LT/LTE, min for GT/GTE) as written, or
    None when none of them is a finite number."""
    measured: list[tuple[float, str]] = []
    for text in values:
        try:
            number = float(text)
        except ValueError:
            continue
        if math.isfinite(number):
            measured.append((number, text))
    if not measured:
        return None
    pick = max if operator in ("LT", "LTE") else min
    # Ties keep the first series; `key` keeps the text out of the comparison.
    return pick(measured, key=lambda pair: pair[0])[1]


def _inconclusive(metric: AnalysisMetric, message: str, time: datetime) -> MetricResult:
    return MetricResult(
        name=metric.name,
        value="",
        threshold=metric.threshold,
        operator=metric.operator,
        passed=False,
        message=message,
        time=time,
    )


def judge_metric(metric: AnalysisMetric, observation: Observation, time: datetime) -> MetricResult:
    """The `metricResults` entry of one metric."""
    if isinstance(observation, TemplateFailed | QueryFailed):
        return _inconclusive(metric, observation.message, time)
    if isinstance(observation, RangeVector):
        return _inconclusive(metric, RANGE_VECTOR_MESSAGE, time)
    threshold = parse_threshold(metric.threshold)
    if threshold is None:
        # Admission refuses such a threshold; a pinned one from before that rule still gets a reason.
        return _inconclusive(
            metric, f'threshold "{metric.threshold}" is not numeric; write it like "0.05"', time
        )
    worst = worst_value(metric.operator, observation.values)
    if worst is None:
        return _inconclusive(metric, NO_DATA, time)
    return MetricResult(
        name=metric.name,
        value=worst,
        threshold=metric.threshold,
        operator=metric.operator,
        passed=passes(metric.operator, float(worst), threshold),
        message="",
        time=time,
    )


def verdict_of(results: Sequence[MetricResult]) -> Verdict:
    """Fail if any metric breached, else Inconclusive if any was inconclusive, else Pass."""
    if any(result.breached for result in results):
        return "Fail"
    if any(result.inconclusive for result in results):
        return "Inconclusive"
    return "Pass"


def judge_sample(
    metrics: Sequence[AnalysisMetric],
    observations: Sequence[Observation],
    *,
    time: datetime,
    step_number: int,
    sample_number: int,
) -> AnalysisSampleResult:
    """The judged sample: one entry per metric, in the step's order."""
    if len(metrics) != len(observations):
        raise ValueError(f"{len(metrics)} metrics but {len(observations)} observations; pass one per metric")
    results = [judge_metric(m, o, time) for m, o in zip(metrics, observations, strict=True)]
    verdict = verdict_of(results)
    return AnalysisSampleResult(
        verdict=verdict,
        metric_results=results,
        summary=summary_line(step_number, sample_number, verdict, results),
    )


def unmeasured_sample(
    entry: str, message: str, *, time: datetime, step_number: int, sample_number: int
) -> AnalysisSampleResult:
    """An inconclusive sample whose single entry (`auth` or `prometheus`) says why nothing was measured."""
    result = MetricResult(
        name=entry, value="", threshold="", operator="", passed=False, message=message, time=time
    )
    return AnalysisSampleResult(
        verdict="Inconclusive",
        metric_results=[result],
        summary=summary_line(step_number, sample_number, "Inconclusive", [result]),
    )


def _short_number(text: str) -> str:
    """A value for people: `0.21000000000000002` -> `0.21`; other texts unchanged."""
    try:
        return f"{float(text):.6g}"
    except ValueError:
        return text


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _comparison(result: MetricResult, table: dict[str, str]) -> str:
    return f"{result.name} {_short_number(result.value)} {table[result.operator]} {result.threshold}"


def summary_line(step_number: int, sample_number: int, verdict: Verdict, results: Sequence[MetricResult]) -> str:
    """`step 2 sample 3: Fail (error_rate 0.21 >= 0.05)`, and likewise for Pass and Inconclusive."""
    inconclusive = [r for r in results if r.inconclusive]
    if verdict == "Fail":
        details = [_comparison(r, _BREACHES) for r in results if r.breached]
        if inconclusive:
            details.append(f"{len(inconclusive)} more inconclusive: {', '.join(r.name for r in inconclusive)}")
    elif verdict == "Inconclusive":
        details = [f"{r.name}: {_cut(r.message, DETAIL_LIMIT)}" for r in inconclusive]
    else:
        details = [_comparison(r, _PASSES) for r in results]
    line = f"step {step_number} sample {sample_number}: {verdict} ({'; '.join(details)})"
    return _cut(line, SUMMARY_LIMIT)
