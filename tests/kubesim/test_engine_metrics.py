"""kubesim's simulated engines over the wire: `GET /metrics` in the Prometheus text format, the
`/sim/traffic` control API and the handle's helpers, on a running cluster whose pods are put
into rotation the way the product does it."""

from __future__ import annotations

import math
import shutil
import subprocess
import time
from pathlib import Path

import kubernetes
import pytest

from kubesim.engines.counting import error_phase
from kubesim.engines.exposition import REQUESTS, TTFT
from kubesim.handle import KubeSim
from kubesim.timing import Timing
from tests.fixtures.kubesim import TEST_TOPOLOGY
from tests.kubesim.engine_pods import engine_pod, sample, scrape, set_serving, start_serving
from tests.kubesim.helpers import raw_request, wait_for

NS = "traffic"


@pytest.fixture
def core(kubesim: KubeSim) -> kubernetes.client.CoreV1Api:
    api = kubernetes.client.CoreV1Api(kubesim.api_client())
    api.create_namespace({"metadata": {"name": NS}})
    return api


def answered(text: str, pod: str) -> float:
    ok = sample(text, REQUESTS, pod=pod, code="200")
    failed = sample(text, REQUESTS, pod=pod, code="500")
    assert ok is not None and failed is not None, f"no request series for {pod}:\n{text}"
    return ok + failed


def test_metrics_are_served_in_the_text_format_with_the_analysis_labels(
    kubesim: KubeSim, core: kubernetes.client.CoreV1Api
) -> None:
    start_serving(core, NS, [engine_pod("chat-engine-0-default-0", "5d8f7c", "vllm:0.6")])
    core.create_namespaced_pod(NS, engine_pod("chat-engine-1-default-0", "5d8f7c", "vllm:0.6"))
    wait_for(lambda: sample(scrape(kubesim)[1], REQUESTS, pod="chat-engine-0-default-0", code="200"),
             what="the first answered request")
    content_type, text = scrape(kubesim)
    assert content_type == "text/plain; version=0.0.4; charset=utf-8"
    labels = ('namespace="traffic",inferenceservice="chat",component="engine",revision_hash="5d8f7c",'
              'pod="chat-engine-0-default-0"')
    assert f"{REQUESTS}{{{labels},code=\"200\"}}" in text
    assert f"{REQUESTS}{{{labels},code=\"500\"}}" in text
    assert f'{TTFT}_bucket{{{labels},le="+Inf"}}' in text
    assert f"# TYPE {REQUESTS} counter" in text and f"# TYPE {TTFT} histogram" in text
    # The pod whose serving gate was never set runs an engine, but no request reaches it.
    wait_for(lambda: sample(scrape(kubesim)[1], REQUESTS, pod="chat-engine-1-default-0", code="200") == 0,
             what="the not-yet-serving pod's series")
    if shutil.which("promtool"):
        linted = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
        assert linted.returncode == 0, linted.stdout + linted.stderr


def test_a_drained_pod_stops_counting_and_a_deleted_one_leaves_no_series(
    kubesim: KubeSim, core: kubernetes.client.CoreV1Api
) -> None:
    kubesim.set_request_rate(200)
    start_serving(core, NS, [engine_pod("a", "r1", "vllm:0.6"), engine_pod("b", "r1", "vllm:0.6")])
    time.sleep(0.3)
    set_serving(core, NS, "a", False)
    drained = answered(kubesim.metrics_text(), "a")
    before_b = answered(kubesim.metrics_text(), "b")
    time.sleep(0.3)
    text = kubesim.metrics_text()
    assert answered(text, "a") == drained > 0
    # b now takes the whole 200/s: about 60 in 0.3 s.
    assert answered(text, "b") - before_b >= 40
    core.delete_namespaced_pod("a", NS, grace_period_seconds=0)
    wait_for(lambda: sample(kubesim.metrics_text(), REQUESTS, pod="a", code="200") is None,
             what="pod a's series to go with it")


def test_the_control_api_sets_rates_and_image_behaviour_over_http(
    kubesim: KubeSim, core: kubernetes.client.CoreV1Api
) -> None:
    code, body = raw_request(kubesim, "POST", "/sim/traffic/images", {"image": "vllm:bad", "error_ratio": 0.5})
    assert code == 200, body
    code, body = raw_request(kubesim, "POST", "/sim/traffic/rate", {"requests_per_second": 400})
    assert code == 200, body
    code, body = raw_request(kubesim, "POST", "/sim/traffic/rate",
                             {"requests_per_second": 100, "namespace": NS, "inferenceservice": "slow"})
    assert code == 200, body
    start_serving(core, NS, [engine_pod("bad", "canary", "vllm:bad"), engine_pod("good", "stable", "vllm:0.6"),
                             engine_pod("slow", "s1", "vllm:0.6", isvc="slow")])
    code, state = raw_request(kubesim, "GET", "/sim/traffic")
    assert code == 200
    assert state["requests_per_second"] == 400
    assert state["inferenceservices"] == [{"namespace": NS, "inferenceservice": "slow", "requests_per_second": 100}]
    assert state["images"] == [{"image": "vllm:bad", "error_ratio": 0.5, "ttft_seconds": 0.2}]
    assert state["defaults"] == {"requests_per_second": 20.0, "error_ratio": 0.01, "ttft_seconds": 0.2}
    assert {"namespace": NS, "inferenceservice": "chat", "component": "engine", "requests_per_second": 400,
            "pods": ["bad", "good"]} in state["serving"]
    wait_for(lambda: answered(kubesim.metrics_text(), "bad") >= 100, what="100 requests to the bad pod")
    text = kubesim.metrics_text()
    bad_total = answered(text, "bad")
    # The behaviour was set before the pod served: exactly floor(n x 0.5 + phase) of its n
    # requests failed, the phase fixed by the pod's name.
    assert sample(text, REQUESTS, pod="bad", code="500") == math.floor(bad_total * 0.5 + error_phase("bad") + 1e-9)
    good_total = answered(text, "good")
    good_errors = math.floor(good_total * 0.01 + error_phase("good") + 1e-9)
    assert sample(text, REQUESTS, pod="good", code="500") == good_errors


@pytest.mark.parametrize(
    ("path", "body", "code", "message"),
    [
        ("/sim/traffic/images", {"image": "vllm:bad", "error_ratio": 2}, 400, "error_ratio must be between 0 and 1"),
        ("/sim/traffic/images", {"image": "vllm:bad", "errors": 0.1}, 400, "takes image, error_ratio, ttft_seconds"),
        ("/sim/traffic/images", {"error_ratio": 0.1}, 400, "(image required)"),
        ("/sim/traffic/rate", {"requests_per_second": "fast"}, 400, "requests_per_second must be a number"),
        ("/sim/traffic/rate", {"requests_per_second": 5, "namespace": "ns"}, 400, "give both"),
        ("/sim/traffic/rate", {}, 400, "(requests_per_second required)"),
        ("/sim/traffic/speed", {}, 404, "use GET /sim/traffic, POST /sim/traffic/rate or POST /sim/traffic/images"),
    ],
)
def test_a_bad_traffic_request_says_what_to_send(
    kubesim_session: KubeSim, path: str, body: dict[str, object], code: int, message: str
) -> None:
    status, answer = raw_request(kubesim_session, "POST", path, body)
    assert status == code and message in answer["message"], answer


def test_the_handle_drives_the_same_settings(kubesim: KubeSim, core: kubernetes.client.CoreV1Api) -> None:
    kubesim.set_engine_behavior("registry.local/vllm*", error_ratio=1.0, ttft_seconds=1.5)
    kubesim.set_request_rate(50, namespace=NS, inferenceservice="chat")
    state = kubesim.traffic()
    assert state["images"] == [{"image": "registry.local/vllm*", "error_ratio": 1.0, "ttft_seconds": 1.5}]
    assert state["inferenceservices"][0]["requests_per_second"] == 50
    start_serving(core, NS, [engine_pod("p", "r1", "registry.local/vllm:nightly")])
    wait_for(lambda: (sample(kubesim.metrics_text(), REQUESTS, pod="p", code="500") or 0) >= 5,
             what="failed requests")
    assert sample(kubesim.metrics_text(), REQUESTS, pod="p", code="200") == 0
    kubesim.set_engine_behavior("registry.local/vllm*")
    kubesim.set_request_rate(None, namespace=NS, inferenceservice="chat")
    assert kubesim.traffic()["images"] == [] and kubesim.traffic()["inferenceservices"] == []


def test_after_a_restart_the_restored_serving_pods_count_again_from_zero(tmp_path: Path) -> None:
    state = tmp_path / "kubesim.json"
    with KubeSim(topology=TEST_TOPOLOGY, timing=Timing.fast(), state_file=state) as first:
        core = kubernetes.client.CoreV1Api(first.api_client())
        core.create_namespace({"metadata": {"name": NS}})
        start_serving(core, NS, [engine_pod("p", "r1", "vllm:0.6")])
        wait_for(lambda: answered(first.metrics_text(), "p") >= 3, what="requests before the restart")
    with KubeSim(topology=TEST_TOPOLOGY, timing=Timing.fast(), state_file=state) as second:
        # Like a restarted engine process: the series come back and count from zero, which
        # Prometheus's rate() reads as a counter reset, not as a drop in traffic.
        wait_for(lambda: sample(second.metrics_text(), REQUESTS, pod="p", code="200") is not None,
                 what="the restored pod's series")
        first_scrape = answered(second.metrics_text(), "p")
        wait_for(lambda: answered(second.metrics_text(), "p") > first_scrape, what="requests after the restart")
