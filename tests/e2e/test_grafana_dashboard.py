"""Every query of the Grafana dashboard (`deploy/prometheus/grafana-dashboard.json`) against the
running stack's Prometheus, after an InferenceService was created the way the README does it
(and scaled from one Instance to two, so the rates of the create histogram move): each
expression parses (the HTTP API answers `success`), and each returns data, that is at least one
value that is not NaN (a `histogram_quantile` over a quiet window is NaN everywhere), and not
thanks to a trailing `or vector(0)` (checked without it; `QUIET_WHEN_HEALTHY` panels, empty when
all is well, are exempt by name). Panels whose description says they show an event (`Event
metric: ...`: a canary, a repin, a pod failure, a multi-cluster TrafficMap) are only parsed;
their metrics must be documented in the README's metrics table, and every label their matchers
and `by (...)` use must be one the README documents for the metric and the emitters set
(`tests.unit.test_product_metrics.emitter_labels`). The stack's Prometheus evaluates the
product's alert rules too: they load.
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.running_stack import REPO_ROOT, RunningStack
from tests.e2e.test_walkthrough_kubectl import ensure_namespace, kubectl
from tests.fixtures.prometheus import require_prometheus
from tests.unit.test_product_metrics import COMMON_LABELS, documented_labels, emitter_labels

pytestmark = pytest.mark.e2e

DASHBOARD = REPO_ROOT / "deploy" / "prometheus" / "grafana-dashboard.json"
README = REPO_ROOT / "README.md"
EVENT = "Event metric: "
NAMESPACE = "metrics-demo"
NAME = "qwen3-metrics"
GRAFANA_VARIABLES = {"$namespace": ".*", "$__rate_interval": "1m"}
"""What Grafana substitutes: the namespace variable's "All", and a rate window of at least
four scrapes of the stack's 5 s interval."""
DATA_WITHIN = 90.0
ZERO_FILL = re.compile(r"\s+or\s+vector\(0\)\s*$")
QUIET_WHEN_HEALTHY = {"Alerts firing"}
"""Panels that read 0 through `or vector(0)` exactly when nothing is wrong (no alert fires)."""


def panel_queries() -> list[tuple[dict[str, Any], str]]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [
        (panel, target["expr"])
        for panel in dashboard["panels"]
        if panel["type"] != "row"
        for target in panel["targets"]
    ]


def as_sent(expression: str) -> str:
    for variable, value in GRAFANA_VARIABLES.items():
        expression = expression.replace(variable, value)
    assert "$" not in expression, f"a Grafana variable this test does not know: {expression}"
    return expression


def prometheus_api(url: str, path: str, **params: str) -> dict[str, Any]:
    """The API's JSON answer, also for a 400 (a query that does not parse)."""
    try:
        with urllib.request.urlopen(f"{url}{path}?{urllib.parse.urlencode(params)}", timeout=10) as answer:
            return dict(json.load(answer))
    except urllib.error.HTTPError as error:
        return dict(json.loads(error.read().decode() or "{}"))


def metric_names(expression: str) -> set[str]:
    """The product's and the SDK's metric names an expression reads (histogram suffixes off)."""
    names = set(re.findall(r"\b((?:ome|temporal)_[a-z_]+)", expression))
    return {re.sub(r"_(bucket|count|sum)$", "", name) for name in names}


def labels_used(expression: str) -> set[str]:
    """Label names in the expression's matchers and `by (...)` / `without (...)` clauses."""
    used: set[str] = set()
    for matchers in re.findall(r"\{([^}]*)\}", expression):
        used |= set(re.findall(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)", matchers))
    for grouping in re.findall(r"\b(?:by|without)\s*\(([^)]*)\)", expression):
        used |= {label.strip() for label in grouping.split(",") if label.strip()}
    return used


def check_event_labels(title: str, expression: str) -> None:
    """Every label the expression uses is one its metrics carry (README and emitters agree)."""
    documented, emitted = documented_labels(), emitter_labels()
    for metric in metric_names(expression):
        if not metric.startswith("ome_"):
            continue
        allowed = (documented.get(metric, set()) & emitted) | COMMON_LABELS
        unknown = labels_used(expression) - allowed
        assert not unknown, f"{title}: {metric} carries no label {sorted(unknown)} (it has {sorted(allowed)})"


def has_values(result: list[Any]) -> bool:
    """At least one sample whose value is a number (instant vectors: `value`; ranges: `values`)."""
    for series in result:
        points = [series["value"]] if "value" in series else series.get("values", [])
        if any(str(point[1]).lower() != "nan" for point in points):
            return True
    return False


def documented_metrics() -> set[str]:
    return set(re.findall(r"^\| `((?:ome|temporal)_[a-z_]+)` \|", README.read_text(), flags=re.MULTILINE))


def apply_isvc(stack: RunningStack, tmp_path: Path, replicas: int = 1) -> None:
    ensure_namespace(stack, NAMESPACE)
    kubectl(stack, "apply", "-f", "deploy/examples/srt-qwen3-0-6b.yaml")
    spec = json.loads((REPO_ROOT / "deploy/examples/qwen3-0-6b.json").read_text())
    spec["metadata"].update(name=NAME, namespace=NAMESPACE)
    spec["spec"]["engine"].update(minReplicas=replicas, maxReplicas=replicas)
    path = tmp_path / "isvc.json"
    path.write_text(json.dumps(spec))
    stack.temporal(
        "workflow", "execute-update-with-start", "--update-name", "apply", "--update-input-file", str(path),
        "--type", "InferenceService", "--task-queue", "ome-lifecycle", "--workflow-id", f"isvc/{NAMESPACE}/{NAME}",
        "--id-conflict-policy", "UseExisting", "--input-file", str(path),
    )  # fmt: skip


def wait_for_data(url: str, expression: str, within: float) -> list[Any]:
    """The query's result once it has a value that is not NaN; empty if none came in time."""
    deadline = time.monotonic() + within
    while True:
        answer = prometheus_api(url, "/api/v1/query", query=expression)
        result = answer.get("data", {}).get("result", [])
        if has_values(result):
            return list(result)
        if time.monotonic() > deadline:
            return []
        time.sleep(1.0)


@pytest.mark.timeout(300)
def test_every_dashboard_query_parses_and_returns_data(stack: RunningStack, tmp_path: Path) -> None:
    require_prometheus()
    url = stack.prometheus_url
    apply_isvc(stack, tmp_path)
    try:
        serving = wait_for_data(url, f'ome_instances{{namespace="{NAMESPACE}",phase="Ready"}} == 1', DATA_WITHIN)
        assert serving, f"the Instance of {NAMESPACE}/{NAME} never showed Ready on the controller's /metrics"
        assert {s["metric"]["job"] for s in serving} == {"controller"}, "one series, from the controller"
        # A second Instance while the first one's series are scraped: rates over the last
        # minute move (a counter born at 1 shows no increase), so quantiles are not NaN.
        apply_isvc(stack, tmp_path, replicas=2)
        serving = wait_for_data(url, f'ome_instances{{namespace="{NAMESPACE}",phase="Ready"}} == 2', DATA_WITHIN)
        assert serving, f"the second Instance of {NAMESPACE}/{NAME} never showed Ready"

        queries = panel_queries()
        assert len(queries) >= 20, "the dashboard lost its panels"
        documented = documented_metrics()
        empty = []
        for panel, expression in queries:
            sent = as_sent(expression)
            answer = prometheus_api(url, "/api/v1/query", query=sent)
            assert answer.get("status") == "success", (panel["title"], sent, answer)
            if panel["description"].startswith(EVENT):
                undocumented = metric_names(sent) - documented
                assert not undocumented, f"{panel['title']}: {undocumented} missing from the README's metrics table"
                check_event_labels(panel["title"], sent)
                continue
            base = ZERO_FILL.sub("", sent)
            if base != sent:
                answer = prometheus_api(url, "/api/v1/query", query=base)
                assert answer.get("status") == "success", (panel["title"], base, answer)
                if panel["title"] in QUIET_WHEN_HEALTHY:
                    continue
            if not wait_for_data(url, base, 30.0):
                empty.append((panel["title"], base))
        assert not empty, f"panels without data after an Instance was created: {empty}"

        rules = prometheus_api(url, "/api/v1/rules", type="alert")
        loaded = {rule["name"] for group in rules["data"]["groups"] for rule in group["rules"]}
        assert {"OmeInstanceFailed", "OmeWorkerNotPolling"} <= loaded, loaded
    finally:
        stack.temporal("workflow", "signal", "--workflow-id", f"isvc/{NAMESPACE}/{NAME}", "--name", "delete")
