"""The product's metrics as a user meets them: Kubernetes requests named by verb and resource
the way the API server's own metrics name them, every metric the code emits documented in the
README's table (and nothing documented that is not emitted), and the dashboard showing each."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from activities.kube_metrics import verb_and_resource
from workers.client import product_histogram_buckets

REPO_ROOT = Path(__file__).resolve().parents[2]
EMITTERS = [
    "workflows/metrics.py",
    "workflows/rollout/canary_metrics.py",
    "activities/kube_metrics.py",
    "activities/prometheus.py",
    "planning/controller/state_metrics.py",
]


@pytest.mark.parametrize(
    ("method", "path", "query", "expected"),
    [
        ("GET", "/api/v1/namespaces/demo/pods/chat-engine-0-default-0", [], ("get", "pods")),
        ("GET", "/api/v1/namespaces/demo/pods", [("labelSelector", "a=b")], ("list", "pods")),
        ("GET", "/api/v1/pods", [("watch", True)], ("watch", "pods")),
        ("GET", "/api/v1/namespaces/demo/pods", [("watch", "true")], ("watch", "pods")),
        ("GET", "/api/v1/namespaces/demo/pods", [("watch", "false")], ("list", "pods")),
        ("POST", "/api/v1/namespaces/demo/pods", [], ("create", "pods")),
        ("PATCH", "/api/v1/namespaces/demo/pods/p/status", [], ("patch", "pods/status")),
        ("PUT", "/apis/ome.io/v1beta1/namespaces/demo/inferencereplicas/chat-engine/status", [],
         ("update", "inferencereplicas/status")),
        ("DELETE", "/api/v1/namespaces/demo/pods/p", [], ("delete", "pods")),
        ("DELETE", "/api/v1/namespaces/demo/pods", [], ("deletecollection", "pods")),
        ("GET", "/api/v1/namespaces/demo", [], ("get", "namespaces")),
        ("GET", "/api/v1/namespaces", [], ("list", "namespaces")),
        ("POST", "/api/v1/namespaces/demo/pods/p/eviction", [], ("create", "pods/eviction")),
        ("GET", "/apis/ome.io/v1beta1/clusterservingruntimes/srt", [], ("get", "clusterservingruntimes")),
        ("PATCH", "/api/v1/nodes/node-1", [], ("patch", "nodes")),
        ("GET", "/version", [], ("get", "/version")),
    ],
)
def test_requests_are_named_by_verb_and_resource(
    method: str, path: str, query: list[tuple[str, object]], expected: tuple[str, str]
) -> None:
    assert verb_and_resource(method, path, query) == expected


COMMON_LABELS = frozenset({"job", "instance", "le", "task_queue", "workflow_type", "activity_type", "service_name"})
"""Labels every series may carry: Prometheus's target labels, histogram buckets, and what the
SDK's meter adds."""


def emitter_labels() -> set[str]:
    """Every label name the emitters set: the workflow meter's keyword labels
    (`meter(namespace, isvc=..., component=...)`) and attribute keys (`{"cause": ...}`)."""
    labels = {"namespace"}
    for module in EMITTERS:
        text = (REPO_ROOT / module).read_text()
        for arguments in re.findall(r"meter\(namespace((?:, \w+=[\w.]+)*)\)", text):
            labels |= set(re.findall(r"(\w+)=", arguments))
        labels |= set(re.findall(r'"([a-z_]+)": ', text))
    return labels


def documented_labels() -> dict[str, set[str]]:
    """The README table's labels column, per metric (`outcome=applied|rejected` -> outcome)."""
    section = (REPO_ROOT / "README.md").read_text().split("\n## Metrics and alerts\n", 1)[1].split("\n## ", 1)[0]
    found: dict[str, set[str]] = {}
    for line in section.splitlines():
        match = re.match(r"^\| `(ome_[a-z_]+)` \|", line)
        if match is None:
            continue
        cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]]
        found[match.group(1)] = {
            label.split("=", 1)[0].strip() for label in cells[3].split(",") if not label.strip().startswith("(")
        }
    return found


def test_the_readme_documents_only_labels_the_emitters_set() -> None:
    """The labels column is what dashboards may group by (the dashboard test checks its event
    panels against it): every label in it is one some emitter sets."""
    emitted_labels = emitter_labels()
    for metric, labels in documented_labels().items():
        assert labels <= emitted_labels | COMMON_LABELS, (metric, sorted(labels - emitted_labels - COMMON_LABELS))
    assert documented_labels()["ome_canary_complete_total"] == {"namespace", "isvc"}, "reference §2.7"


def emitted() -> set[str]:
    names: set[str] = set()
    for module in EMITTERS:
        names |= set(re.findall(r'"(ome_[a-z_]+)"', (REPO_ROOT / module).read_text()))
    return names


def documented() -> set[str]:
    section = (REPO_ROOT / "README.md").read_text().split("\n## Metrics and alerts\n", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `(ome_[a-z_]+)` \|", section, flags=re.MULTILINE))


def test_every_emitted_metric_is_in_the_readme_and_nothing_else() -> None:
    assert emitted() == documented()


def test_the_spec_names_are_used_as_written() -> None:
    """Reference §2.7, §4, §14 and §18 name these; a rename would break users' dashboards."""
    spec = {
        "ome_canary_current_step", "ome_canary_traffic_weight", "ome_canary_step_total",
        "ome_canary_complete_total", "ome_canary_analysis_evaluations_total", "ome_canary_analysis_metric_value",
        "ome_canary_analysis_failed_checks", "ome_canary_rollback_total", "ome_canary_sampler_inflight",
        "ome_canary_sampler_queue_depth", "ome_canary_sampler_starved_total", "ome_rollout_repin_total",
        "ome_omenative_scale_down_active_pods", "ome_omenative_scale_down_deferred_instances",
        "ome_omenative_scale_down_batch_pods", "ome_omenative_scale_down_oversized_batch_total",
        "ome_trafficmap_capacity_fallback_homes",
    }  # fmt: skip
    assert spec <= emitted()


def test_the_dashboard_shows_every_metric() -> None:
    dashboard = json.loads((REPO_ROOT / "deploy/prometheus/grafana-dashboard.json").read_text())
    expressions = " ".join(t["expr"] for p in dashboard["panels"] for t in p.get("targets", []))
    shown = {re.sub(r"_(bucket|count|sum)$", "", name) for name in re.findall(r"\b(ome_[a-z_]+)", expressions)}
    assert documented() - shown == set()


def test_every_product_histogram_has_its_own_buckets() -> None:
    """The SDK's default buckets are milliseconds; ours are seconds and pods."""
    histograms = {n for n in emitted() if n.endswith(("_seconds", "_batch_pods")) and not n.endswith("_timestamp_seconds")}
    assert set(product_histogram_buckets()) == histograms
    for buckets in product_histogram_buckets().values():
        assert list(buckets) == sorted(buckets) and buckets[0] > 0
