"""A real Prometheus (Debian's `prometheus`) scrapes kubesim's simulated engines every second, and
the canary analysis's kind of query, the error ratio per revision, reads back what the control
API set: 0.2 for the revision on a bad image, the 0.01 default for the stable one.

Skipped without the binary (failed under CI=true): see tests/fixtures/prometheus.py.
"""

from __future__ import annotations

from pathlib import Path

import kubernetes
import pytest

from kubesim.handle import KubeSim
from tests.fixtures.prometheus import RunningPrometheus, by_label
from tests.kubesim.engine_pods import engine_pod, start_serving

ERROR_RATIO = (
    'sum by (revision_hash) (rate(ome_inference_requests_total{{namespace="{ns}",inferenceservice="chat",'
    'code="500"}}[5s]))'
    ' / sum by (revision_hash) (rate(ome_inference_requests_total{{namespace="{ns}",inferenceservice="chat"}}[5s]))'
)
TTFT_P50 = (
    'histogram_quantile(0.5, sum by (revision_hash, le) '
    '(rate(ome_inference_time_to_first_token_seconds_bucket{{namespace="{ns}"}}[5s])))'
)


def test_prometheus_reads_each_revisions_error_ratio_from_kubesim(
    prometheus_bin: Path, kubesim: KubeSim, tmp_path: Path
) -> None:
    namespace = "canary"
    core = kubernetes.client.CoreV1Api(kubesim.api_client())
    core.create_namespace({"metadata": {"name": namespace}})
    # "This image is bad": a fifth of its requests fail and it is slow to first token.
    kubesim.set_engine_behavior("vllm:bad", error_ratio=0.2, ttft_seconds=1.0)
    # 4000 requests per second over 4 pods: ~1000 per pod between two scrapes a second apart, so
    # the floor(n x ratio) counting is within 0.001 of the ratio over any window.
    kubesim.set_request_rate(4000, namespace=namespace, inferenceservice="chat")
    start_serving(core, namespace, [
        engine_pod("chat-engine-0-default-0", "stable1", "vllm:0.6"),
        engine_pod("chat-engine-1-default-0", "stable1", "vllm:0.6"),
        engine_pod("chat-engine-2-default-0", "canary2", "vllm:bad"),
        engine_pod("chat-engine-3-default-0", "canary2", "vllm:bad"),
    ])
    with RunningPrometheus(tmp_path, {"kubesim": f"127.0.0.1:{kubesim.port}"}, interval_seconds=1) as prometheus:
        query = ERROR_RATIO.format(ns=namespace)
        ratios = by_label(prometheus.wait_for(query, lambda result: len(result) == 2, within=60,
                                              what="an error ratio for both revisions"), "revision_hash")
        assert ratios["canary2"] == pytest.approx(0.2, abs=0.005)
        assert ratios["stable1"] == pytest.approx(0.01, abs=0.005)
        medians = by_label(prometheus.query(TTFT_P50.format(ns=namespace)), "revision_hash")
        # Log-normal medians: mean x exp(-0.125), read back by interpolation within a bucket.
        assert 0.1 < medians["stable1"] < 0.25
        assert 0.5 < medians["canary2"] < 1.0
        up = prometheus.query('up{job="kubesim"}')
        assert [item["value"][1] for item in up] == ["1"]
