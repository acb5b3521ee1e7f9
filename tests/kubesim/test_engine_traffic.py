"""The simulated request stream, without a server: which pods get traffic, how it is shared, and
how the counters and histograms grow (kubesim.engines). A fake clock makes every figure exact."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubesim.engines.behavior import DEFAULT_ERROR_RATIO, DEFAULT_TTFT_SECONDS, TrafficSettings, untagged
from kubesim.engines.counting import TTFT_BUCKETS, SeriesCounts, ttft_distribution
from kubesim.engines.traffic import SeriesLabels, Traffic
from kubesim.errors import ApiError


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def pod(
    name: str,
    *,
    isvc: str = "chat",
    component: str = "engine",
    revision: str = "r1",
    role: str = "default",
    image: str = "vllm:good",
    serving: str | None = "True",
    ready: bool = True,
    phase: str = "Running",
    terminating: bool = False,
    gated: bool = True,
    namespace: str = "ns",
    extra_images: tuple[str, ...] = (),
) -> dict[str, Any]:
    labels = {"ome.io/inferenceservice": isvc, "ome.io/component": component, "ome.io/revision": revision,
              "ome.io/role": role}
    conditions = [{"type": "Ready", "status": "True" if ready else "False"}]
    if serving is not None:
        conditions.append({"type": "ome.io/serving", "status": serving})
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-{name}", "labels": labels}
    if terminating:
        metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {
        "metadata": metadata,
        "spec": {
            "containers": [{"name": f"c{i}", "image": img} for i, img in enumerate((image, *extra_images))],
            "readinessGates": [{"conditionType": "ome.io/serving"}] if gated else [],
        },
        "status": {"phase": phase, "conditions": conditions},
    }


def counts(traffic: Traffic) -> dict[str, SeriesCounts]:
    return {labels.pod: value for labels, value in traffic.series()}


def requests(traffic: Traffic) -> dict[str, int]:
    return {name: c.requests for name, c in counts(traffic).items()}


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def traffic(clock: Clock) -> Traffic:
    return Traffic(clock=clock)


def test_only_serving_pods_get_traffic(traffic: Traffic, clock: Clock) -> None:
    traffic.sync([
        pod("serving"),
        pod("drained", serving="False"),
        pod("gate-not-set-yet", serving=None),
        pod("unready", ready=False),
        pod("terminating", terminating=True),
        pod("starting", phase="Pending"),
        pod("worker", role="worker"),
        {**pod("not-ours"), "metadata": {"name": "not-ours", "namespace": "ns", "uid": "u", "labels": {"app": "x"}}},
    ])
    clock.now += 10
    # 20 requests per second (the default), all to the one serving pod; engines that run but
    # are out of rotation show zeros; no engine, no series.
    assert requests(traffic) == {"serving": 200, "drained": 0, "gate-not-set-yet": 0, "unready": 0,
                                 "terminating": 0}


def test_a_pod_without_the_gate_serves_when_ready(traffic: Traffic, clock: Clock) -> None:
    # A RawDeployment's pods have no `ome.io/serving` gate: a Service routes to them once Ready.
    traffic.sync([pod("raw", serving=None, gated=False), pod("raw-unready", serving=None, gated=False, ready=False)])
    clock.now += 1
    assert requests(traffic) == {"raw": 20, "raw-unready": 0}


def test_the_stream_is_shared_evenly_per_component_and_each_component_sees_every_request(
    traffic: Traffic, clock: Clock
) -> None:
    traffic.sync([
        pod("engine-a", revision="old"), pod("engine-b", revision="new"),
        pod("router-a", component="router"),
        pod("other-isvc", isvc="embed"),
    ])
    traffic.set_rate(5, namespace="ns", inferenceservice="embed")
    clock.now += 10
    assert requests(traffic) == {"engine-a": 100, "engine-b": 100, "router-a": 200, "other-isvc": 50}
    traffic.set_rate(None, namespace="ns", inferenceservice="embed")  # back to the cluster's 20/s
    traffic.set_rate(40)
    clock.now += 10
    assert requests(traffic) == {"engine-a": 300, "engine-b": 300, "router-a": 600, "other-isvc": 450}


def test_shares_follow_pods_joining_and_leaving(traffic: Traffic, clock: Clock) -> None:
    traffic.observe(pod("a"))
    clock.now += 10  # a alone: 200
    traffic.observe(pod("b"))
    clock.now += 10  # a and b: 100 each
    traffic.observe(pod("a", serving="False"))
    clock.now += 10  # b alone: 200
    assert requests(traffic) == {"a": 300, "b": 300}
    traffic.observe(pod("b", terminating=True))
    clock.now += 10  # nobody serves: the requests fail at the client, no engine counts them
    assert requests(traffic) == {"a": 300, "b": 300}
    traffic.observe(pod("a"))
    clock.now += 1
    assert requests(traffic) == {"a": 320, "b": 300}


def test_a_scrape_at_any_moment_sees_whole_requests_only(traffic: Traffic, clock: Clock) -> None:
    traffic.observe(pod("a"))
    seen = []
    for _ in range(40):
        clock.now += 0.01  # a fifth of a request per step
        seen.append(requests(traffic)["a"])
    assert seen == sorted(seen) and seen[-1] == 8


def test_the_error_ratio_of_an_image_is_exact(traffic: Traffic, clock: Clock) -> None:
    traffic.set_behavior("vllm:bad", error_ratio=0.2)
    traffic.set_rate(200)
    traffic.sync([pod("good", revision="stable"), pod("bad", revision="canary", image="vllm:bad")])
    clock.now += 10
    found = counts(traffic)
    assert (found["good"].requests, found["good"].errors) == (1000, 1000 * DEFAULT_ERROR_RATIO)
    assert (found["bad"].requests, found["bad"].errors) == (1000, 200)


def test_pods_that_start_together_fail_at_different_moments(traffic: Traffic, clock: Clock) -> None:
    # 60 engines of a good image start serving at once and share the default 20 requests a
    # second, about one request each per 3 s. Prometheus samples every 5 s; a canary's analysis
    # reads the share of failed requests over the last 30 s.
    traffic.sync([pod(f"chat-engine-{index}-default-0") for index in range(60)])
    totals = []
    for _ in range(0, 900, 5):  # 15 minutes: three times as long as one pod takes to fail once
        clock.now += 5
        found = counts(traffic).values()
        totals.append((sum(c.requests for c in found), sum(c.errors for c in found)))
    shares = [
        (errors - errors_before) / (requests - requests_before)
        for (requests_before, errors_before), (requests, errors) in zip(totals, totals[6:], strict=False)
    ]
    # Each 30 s window reads close to the 1% the image fails, never 0 for minutes and then a
    # burst of every pod's first error (0.05 and more over 30 s: a good canary failing `LT 0.05`).
    assert max(shares) < 0.03
    assert sum(1 for share in shares if share == 0) < len(shares) / 4
    requests, errors = totals[-1]
    assert abs(errors / requests - DEFAULT_ERROR_RATIO) < 0.002


def test_a_changed_behaviour_applies_to_new_requests_only(traffic: Traffic, clock: Clock) -> None:
    traffic.set_behavior("vllm:good", error_ratio=0.0)
    traffic.set_rate(100)
    traffic.observe(pod("a"))
    clock.now += 10
    traffic.set_behavior("vllm:good", error_ratio=0.5)
    clock.now += 10
    found = counts(traffic)["a"]
    assert (found.requests, found.errors) == (2000, 500)
    traffic.set_behavior("vllm:good")  # back to the defaults
    clock.now += 10
    assert counts(traffic)["a"].errors == 500 + 1000 * DEFAULT_ERROR_RATIO


def test_the_histogram_is_consistent(traffic: Traffic, clock: Clock) -> None:
    traffic.set_rate(1000)
    traffic.observe(pod("a"))
    clock.now += 10
    found = counts(traffic)["a"]
    assert found.successes == 10_000 - 100
    assert found.buckets == sorted(found.buckets) and found.buckets[-1] <= found.successes
    assert found.ttft_sum == pytest.approx(found.successes * DEFAULT_TTFT_SECONDS)
    expected = [round(found.successes * p) for p in ttft_distribution(DEFAULT_TTFT_SECONDS)]
    assert found.buckets == expected
    # The median of a log-normal with mean 0.2 s and sigma 0.5 is 0.2 * exp(-0.125) = 0.176 s.
    assert found.buckets[TTFT_BUCKETS.index(0.1)] < found.successes / 2 < found.buckets[TTFT_BUCKETS.index(0.25)]


def test_a_slow_image_moves_the_histogram(traffic: Traffic, clock: Clock) -> None:
    traffic.set_behavior("vllm:slow", ttft_seconds=2.0)
    traffic.sync([pod("fast"), pod("slow", image="vllm:slow")])
    clock.now += 100
    found = counts(traffic)
    below_half_second = TTFT_BUCKETS.index(0.5)
    assert found["fast"].buckets[below_half_second] > 0.9 * found["fast"].successes
    assert found["slow"].buckets[below_half_second] < 0.01 * found["slow"].successes


def test_series_follow_the_pod_and_its_revision(traffic: Traffic, clock: Clock) -> None:
    traffic.observe(pod("a", revision="r1"))
    clock.now += 1
    assert [labels for labels, _ in traffic.series()] == [SeriesLabels("ns", "chat", "engine", "r1", "a")]
    # An in-place update: same pod, new revision label, a new engine with its own series.
    traffic.observe(pod("a", revision="r2"))
    clock.now += 1
    assert [(labels.revision_hash, c.requests) for labels, c in traffic.series()] == [("r2", 20)]
    traffic.observe(pod("a", revision="r2"), deleted=True)
    assert traffic.series() == []


def test_sync_forgets_pods_that_are_gone(traffic: Traffic, clock: Clock) -> None:
    traffic.sync([pod("a"), pod("b")])
    traffic.sync([pod("b")])
    clock.now += 1
    assert requests(traffic) == {"b": 20}


def test_images_match_exactly_then_by_repository_then_by_longest_prefix() -> None:
    settings = TrafficSettings()
    settings.set_behavior("registry.local/*", error_ratio=0.1)
    settings.set_behavior("registry.local/vllm*", error_ratio=0.2)
    settings.set_behavior("registry.local/vllm", error_ratio=0.3)
    settings.set_behavior("registry.local/vllm:0.7", error_ratio=0.4)
    assert settings.behavior(["registry.local/vllm:0.7"]).error_ratio == 0.4
    assert settings.behavior(["registry.local/vllm:0.6"]).error_ratio == 0.3
    assert settings.behavior(["registry.local/vllm-nightly:1"]).error_ratio == 0.2
    assert settings.behavior(["registry.local/sglang:1"]).error_ratio == 0.1
    assert settings.behavior(["elsewhere/vllm:1"]).error_ratio == DEFAULT_ERROR_RATIO
    # A sidecar nobody configured does not hide the model server's behaviour.
    assert settings.behavior(["envoy:1", "registry.local/vllm:0.7"]).error_ratio == 0.4
    assert untagged("reg:5000/vllm:0.6") == "reg:5000/vllm" and untagged("reg:5000/vllm") == "reg:5000/vllm"
    assert untagged("vllm@sha256:abc") == "vllm"


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda s: s.set_behavior("x", error_ratio=1.5), "error_ratio must be between 0 and 1, got 1.5"),
        (lambda s: s.set_behavior("x", error_ratio="high"), "error_ratio must be a number, got 'high'"),
        (lambda s: s.set_behavior("x", ttft_seconds=0), "ttft_seconds must be above 0"),
        (lambda s: s.set_behavior("", error_ratio=0.1), "image must name an image"),
        (lambda s: s.set_rate(-1), "requests_per_second must be between 0"),
        (lambda s: s.set_rate(None), "requests_per_second must be a number for the cluster-wide rate"),
        (lambda s: s.set_rate(5, namespace="ns"), "give both to set one InferenceService's rate"),
    ],
)
def test_bad_settings_name_the_field_the_value_and_the_fix(call: Any, message: str) -> None:
    with pytest.raises(ApiError) as error:
        call(TrafficSettings())
    assert error.value.code == 400
    assert message in str(error.value)


_events = st.lists(
    st.one_of(
        st.tuples(st.just("wait"), st.floats(0.0, 5.0)),
        st.tuples(st.just("serve"), st.sampled_from(["a", "b", "c"]), st.booleans()),
        st.tuples(st.just("ratio"), st.floats(0.0, 1.0)),
        st.tuples(st.just("ttft"), st.floats(0.01, 5.0)),
        st.tuples(st.just("rate"), st.floats(0.0, 500.0)),
        st.tuples(st.just("scrape")),
    ),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(_events)
def test_every_series_only_grows_and_its_buckets_stay_cumulative(events: list[tuple[Any, ...]]) -> None:
    clock = Clock()
    traffic = Traffic(clock=clock)
    traffic.sync([pod(name) for name in "abc"])
    last: dict[str, tuple[int, ...]] = {}
    for event in [*events, ("scrape",)]:
        kind = event[0]
        if kind == "wait":
            clock.now += event[1]
        elif kind == "serve":
            traffic.observe(pod(event[1], serving="True" if event[2] else "False"))
        elif kind == "ratio":
            traffic.set_behavior("vllm:good", error_ratio=event[1])
        elif kind == "ttft":
            traffic.set_behavior("vllm:good", ttft_seconds=event[1])
        elif kind == "rate":
            traffic.set_rate(event[1])
        for name, found in counts(traffic).items():
            figures = (found.requests, found.errors, found.successes, *found.buckets)
            assert 0 <= found.errors <= found.requests
            assert found.buckets == sorted(found.buckets) and found.buckets[-1] <= found.successes
            assert all(now >= before for now, before in zip(figures, last.get(name, figures), strict=True))
            last[name] = figures
