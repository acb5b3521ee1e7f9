"""Every query of the Grafana dashboard (`deploy/prometheus/grafana-dashboard.json`) against the
running stack's Prometheus, after an InferenceService was created the way the README does it:
each expression parses (the HTTP API answers `success`), and each returns data, except the
panels whose description says they show an event (`Event metric: ...`: a canary, a repin, a
pod failure, a multi-cluster TrafficMap), whose metrics must then be documented in the README's
metrics table. The stack's Prometheus evaluates the product's alert rules too: they load.
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


def documented_metrics() -> set[str]:
    return set(re.findall(r"^\| `((?:ome|temporal)_[a-z_]+)` \|", README.read_text(), flags=re.MULTILINE))


def apply_isvc(stack: RunningStack, tmp_path: Path) -> None:
    ensure_namespace(stack, NAMESPACE)
    kubectl(stack, "apply", "-f", "deploy/examples/srt-qwen3-0-6b.yaml")
    spec = json.loads((REPO_ROOT / "deploy/examples/qwen3-0-6b.json").read_text())
    spec["metadata"].update(name=NAME, namespace=NAMESPACE)
    spec["spec"]["engine"].update(minReplicas=1, maxReplicas=1)
    path = tmp_path / "isvc.json"
    path.write_text(json.dumps(spec))
    stack.temporal(
        "workflow", "execute-update-with-start", "--update-name", "apply", "--update-input-file", str(path),
        "--type", "InferenceService", "--task-queue", "ome-lifecycle", "--workflow-id", f"isvc/{NAMESPACE}/{NAME}",
        "--id-conflict-policy", "UseExisting", "--input-file", str(path),
    )  # fmt: skip


def wait_for_data(url: str, expression: str, within: float) -> list[Any]:
    deadline = time.monotonic() + within
    while True:
        answer = prometheus_api(url, "/api/v1/query", query=expression)
        result = answer.get("data", {}).get("result", [])
        if result or time.monotonic() > deadline:
            return list(result)
        time.sleep(1.0)


@pytest.mark.timeout(300)
def test_every_dashboard_query_parses_and_returns_data(stack: RunningStack, tmp_path: Path) -> None:
    require_prometheus()
    url = stack.prometheus_url
    apply_isvc(stack, tmp_path)
    try:
        serving = wait_for_data(url, f'ome_instances{{namespace="{NAMESPACE}",phase="Ready"}} == 1', DATA_WITHIN)
        assert serving, f"the Instance of {NAMESPACE}/{NAME} never showed Ready on the worker's /metrics"

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
                continue
            if not wait_for_data(url, sent, 30.0):
                empty.append((panel["title"], sent))
        assert not empty, f"panels without data after an Instance was created: {empty}"

        rules = prometheus_api(url, "/api/v1/rules", type="alert")
        loaded = {rule["name"] for group in rules["data"]["groups"] for rule in group["rules"]}
        assert {"OmeInstanceFailed", "OmeWorkerNotPolling"} <= loaded, loaded
    finally:
        stack.temporal("workflow", "signal", "--workflow-id", f"isvc/{NAMESPACE}/{NAME}", "--name", "delete")
