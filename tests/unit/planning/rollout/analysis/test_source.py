"""Where a canary's metrics live and the sampling limits (§2.2): each resolution path, parking."""

from __future__ import annotations

from typing import Any

import pytest

from models.canary_analysis import BearerTokenRef, CanaryAnalysisConfig, PrometheusTarget
from models.inferenceservice import PrometheusSource
from planning.rollout.analysis.source import (
    AnalysisLimits,
    analysis_limits,
    check_source,
    resolve_source,
)
from planning.rollout.plan import Parked

pytestmark = pytest.mark.unit

BUNDLED = "http://prometheus.ome-system.svc:9090"
THANOS = "https://thanos.example.com/prometheus"
NS = "team-a"

CONFIG = CanaryAnalysisConfig(
    bundled_prometheus_address=BUNDLED,
    metric_providers={
        "thanos": {
            "server_address": THANOS,
            "auth_secret_ref": {"name": "thanos-token", "key": "token"},
            "headers": {"X-Scope-OrgID": "fleet", "X-Source": "binding"},
        },
        "plain": {"server_address": "http://plain:9090"},
    },
)


def source(**fields: Any) -> PrometheusSource:
    return PrometheusSource.model_validate(fields)


def token(name: str, key: str = "token", declared_by: str = "prometheus.authRef") -> BearerTokenRef:
    return BearerTokenRef(namespace=NS, name=name, key=key, declared_by=declared_by)


BINDING_TOKEN = token("thanos-token", declared_by='metricProviders["thanos"].authSecretRef')
CANARY_AUTH = {"authRef": {"name": "my-token", "key": "bearer"}}


@pytest.mark.parametrize(
    "block, config, expected",
    [
        (None, CONFIG, PrometheusTarget(address=BUNDLED)),
        ({}, CONFIG, PrometheusTarget(address=BUNDLED)),
        ({"serverAddress": ""}, CONFIG, PrometheusTarget(address=BUNDLED)),
        (
            {**CANARY_AUTH, "headers": {"X-A": "1"}},
            CONFIG,
            PrometheusTarget(address=BUNDLED, headers={"X-A": "1"}, bearer_token=token("my-token", "bearer")),
        ),
        (
            None,
            CONFIG.model_copy(update={"default_provider": "thanos"}),
            PrometheusTarget(
                address=THANOS,
                headers={"X-Scope-OrgID": "fleet", "X-Source": "binding"},
                bearer_token=BINDING_TOKEN,
                provider="thanos",
            ),
        ),
        (
            {**CANARY_AUTH, "headers": {"X-Scope-OrgID": "team-a"}},
            CONFIG.model_copy(update={"default_provider": "thanos"}),
            PrometheusTarget(
                address=THANOS,
                headers={"X-Scope-OrgID": "team-a", "X-Source": "binding"},
                bearer_token=token("my-token", "bearer"),
                provider="thanos",
            ),
        ),
        (
            {**CANARY_AUTH, "headers": {"X-A": "1"}},
            CONFIG.model_copy(update={"default_provider": "gone"}),
            PrometheusTarget(address=BUNDLED, headers={"X-A": "1"}, bearer_token=token("my-token", "bearer")),
        ),
        (
            None,
            CanaryAnalysisConfig(),
            PrometheusTarget(address=None),
        ),
    ],
    ids=[
        "unset: bundled",
        "empty block: bundled",
        "empty serverAddress: bundled",
        "unset with authRef and headers: bundled with them",
        "unset: bound default provider with its token and headers",
        "unset: default provider, canary authRef replaces its token, headers override per key",
        "unset: unbound default provider: bundled with the canary's authRef and headers, silently",
        "nothing configured: no address",
    ],
)
def test_an_unnamed_source_resolves_to_the_default_provider_else_the_bundled_address(
    block: dict[str, Any] | None, config: CanaryAnalysisConfig, expected: PrometheusTarget
) -> None:
    assert resolve_source(None if block is None else source(**block), config, NS) == expected


@pytest.mark.parametrize(
    "block, expected",
    [
        (
            {"providerRef": {"name": "thanos"}},
            PrometheusTarget(
                address=THANOS,
                headers={"X-Scope-OrgID": "fleet", "X-Source": "binding"},
                bearer_token=BINDING_TOKEN,
                provider="thanos",
            ),
        ),
        (
            {"providerRef": {"name": "thanos"}, **CANARY_AUTH},
            PrometheusTarget(
                address=THANOS,
                headers={"X-Scope-OrgID": "fleet", "X-Source": "binding"},
                bearer_token=token("my-token", "bearer"),
                provider="thanos",
            ),
        ),
        (
            {"providerRef": {"name": "thanos"}, "headers": {"X-Scope-OrgID": "team-a", "X-Extra": "1"}},
            PrometheusTarget(
                address=THANOS,
                headers={"X-Scope-OrgID": "team-a", "X-Source": "binding", "X-Extra": "1"},
                bearer_token=BINDING_TOKEN,
                provider="thanos",
            ),
        ),
        (
            {"providerRef": {"name": "plain"}},
            PrometheusTarget(address="http://plain:9090", provider="plain"),
        ),
        (
            {"providerRef": {"name": "gone"}, **CANARY_AUTH, "headers": {"X-A": "1"}},
            PrometheusTarget(address=BUNDLED),
        ),
    ],
    ids=[
        "bound: the binding's address, token and headers",
        "authRef replaces the binding's token",
        "headers override the binding's per key",
        "bound without token or headers",
        "unbound mid-run: bundled, without token or headers",
    ],
)
def test_a_provider_ref_resolves_to_its_binding(block: dict[str, Any], expected: PrometheusTarget) -> None:
    assert resolve_source(source(**block), CONFIG, NS) == expected


def test_a_server_address_is_used_with_the_canarys_auth_and_headers() -> None:
    block = source(serverAddress="http://mine:9090", headers={"X-A": "1"}, **CANARY_AUTH)
    config = CONFIG.model_copy(update={"default_provider": "thanos"})
    assert resolve_source(block, config, NS) == PrometheusTarget(
        address="http://mine:9090", headers={"X-A": "1"}, bearer_token=token("my-token", "bearer")
    )


def test_a_server_address_without_auth_sends_nothing_extra() -> None:
    assert resolve_source(source(serverAddress="http://mine:9090"), CONFIG, NS) == PrometheusTarget(
        address="http://mine:9090"
    )


def test_an_unbound_provider_parks_the_run_at_start_with_the_reference_message() -> None:
    parked = check_source(1, source(providerRef={"name": "gone"}), CONFIG)
    assert parked == Parked(
        "ProviderUnbound",
        "groups[1]: metric provider \"gone\" is not bound in this cluster's metricProviders configuration",
    )


@pytest.mark.parametrize(
    "block",
    [None, {}, {"providerRef": {"name": "thanos"}}, {"serverAddress": "http://mine:9090"}, CANARY_AUTH],
    ids=["unset", "empty", "bound provider", "serverAddress", "authRef only"],
)
def test_other_sources_start_without_parking(block: dict[str, Any] | None) -> None:
    assert check_source(0, None if block is None else source(**block), CONFIG) is None


def test_an_unbound_default_provider_never_parks() -> None:
    assert check_source(0, None, CONFIG.model_copy(update={"default_provider": "gone"})) is None


def test_both_provider_ref_and_server_address_park_as_an_invalid_plan() -> None:
    parked = check_source(0, source(providerRef={"name": "thanos"}, serverAddress="http://mine:9090"), CONFIG)
    assert parked == Parked(
        "PlanInvalid", "groups[0]: prometheus: at most one of providerRef and serverAddress may be set"
    )


def test_limits_default_to_the_reference_values() -> None:
    assert analysis_limits(CanaryAnalysisConfig()) == AnalysisLimits(
        query_timeout_seconds=5.0, max_concurrency=8, cache_ttl_seconds=120.0
    )


def test_configured_limits_are_used() -> None:
    config = CanaryAnalysisConfig(query_timeout="1500ms", max_concurrency=2, cache_ttl="30s")
    assert analysis_limits(config) == AnalysisLimits(query_timeout_seconds=1.5, max_concurrency=2, cache_ttl_seconds=30.0)


@pytest.mark.parametrize(
    "config",
    [
        CanaryAnalysisConfig(query_timeout="0s", max_concurrency=0, cache_ttl="0"),
        CanaryAnalysisConfig(query_timeout="-5s", max_concurrency=-3, cache_ttl="-1m"),
        CanaryAnalysisConfig(query_timeout="five seconds", cache_ttl="2 minutes"),
        CanaryAnalysisConfig(query_timeout="", cache_ttl=""),
    ],
    ids=["zero", "negative", "not a duration", "empty"],
)
def test_invalid_limits_fall_back_to_their_defaults(config: CanaryAnalysisConfig) -> None:
    assert analysis_limits(config) == AnalysisLimits()
