"""Settings: defaults that make `make up` work untouched, environment overrides that reach the
right field, and errors that name the variable to fix."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError
from temporalio.contrib.opentelemetry import TracingInterceptor
from temporalio.service import TLSConfig

from models.migration import MigrationAudit
from workers.client import tls_config, tracing_interceptors
from workers.config import (
    KubeSettings,
    MigrationSettings,
    OtelSettings,
    Settings,
    SettingsError,
    TemporalSettings,
    env_var_names,
    kube_api_client,
)
from workflows.names import TASK_QUEUE


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The developer's own OME_* variables must not decide these tests."""
    for name in env_var_names() | {"KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"}:
        monkeypatch.delenv(name, raising=False)


def test_defaults_point_at_the_local_stack() -> None:
    settings = Settings()
    assert settings.temporal.address == "127.0.0.1:7233"
    assert settings.temporal.namespace == "default"
    assert settings.temporal.task_queue == TASK_QUEUE
    assert not settings.temporal.uses_tls
    assert settings.kube.kubeconfig is None
    assert (settings.stack.frontend_port, settings.stack.ui_port) == (7233, 8233)
    assert settings.stack.data_dir == Path(".data")


def test_nested_variables_reach_their_fields(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OME_TEMPORAL__ADDRESS", "temporal.example:7233")
    monkeypatch.setenv("OME_TEMPORAL__NAMESPACE", "llm-prod")
    monkeypatch.setenv("OME_KUBE__KUBECONFIG", "/etc/kube/config")
    monkeypatch.setenv("OME_KUBE__CONTEXT", "gpu-east")
    monkeypatch.setenv("OME_PROMETHEUS__URL", "http://prometheus:9090")
    monkeypatch.setenv("OME_OTEL__OTLP_ENDPOINT", "http://collector:4317")
    monkeypatch.setenv("OME_STACK__UI_PORT", "18233")
    monkeypatch.setenv("OME_STACK__DEV_SERVER", "false")
    settings = Settings()
    assert settings.temporal.address == "temporal.example:7233"
    assert settings.temporal.namespace == "llm-prod"
    assert settings.kube == KubeSettings(kubeconfig=Path("/etc/kube/config"), context="gpu-east")
    assert settings.prometheus.url == "http://prometheus:9090"
    assert settings.otel.otlp_endpoint == "http://collector:4317"
    assert settings.stack.ui_port == 18233
    assert settings.stack.dev_server is False


def test_a_misspelt_variable_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OME_TEMPORAL__ADRESS", "x:1")
    with pytest.raises(ValidationError, match=r"temporal\.adress"):
        Settings()


def test_a_certificate_without_its_key_names_both_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OME_TEMPORAL__TLS_CERT", "/certs/client.pem")
    with pytest.raises(
        ValidationError, match="OME_TEMPORAL__TLS_CERT is set but OME_TEMPORAL__TLS_KEY is not"
    ):
        Settings()


def test_env_var_names_list_every_field() -> None:
    names = env_var_names()
    assert {
        "OME_TEMPORAL__ADDRESS",
        "OME_TEMPORAL__API_KEY",
        "OME_KUBE__KUBECONFIG",
        "OME_STACK__DATA_DIR",
    } <= names
    assert len(names) == sum(
        len(field.annotation.model_fields)
        for field in Settings.model_fields.values()
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel)
    )


def test_every_setting_says_why_its_default_is_what_it_is() -> None:
    for group_name, group_field in Settings.model_fields.items():
        assert group_field.description, group_name
        group = group_field.annotation
        assert isinstance(group, type) and issubclass(group, BaseModel)
        for name, field in group.model_fields.items():
            assert field.description and len(field.description) > 30, f"{group_name}.{name} is undocumented"


def test_plaintext_without_credentials() -> None:
    assert tls_config(TemporalSettings()) is False


def test_an_api_key_alone_turns_on_tls_with_system_roots() -> None:
    settings = TemporalSettings(address="ns.acct.tmprl.cloud:7233", api_key="secret")  # type: ignore[arg-type]
    assert settings.uses_tls
    assert tls_config(settings) is True
    assert "secret" not in repr(settings)


def test_mtls_files_are_read_into_the_tls_config(tmp_path: Path) -> None:
    cert, key, ca = tmp_path / "client.pem", tmp_path / "client.key", tmp_path / "ca.pem"
    cert.write_bytes(b"CERT")
    key.write_bytes(b"KEY")
    ca.write_bytes(b"CA")
    config = tls_config(
        TemporalSettings(tls_cert=cert, tls_key=key, tls_ca=ca, tls_server_name="temporal.internal")
    )
    assert config == TLSConfig(
        server_root_ca_cert=b"CA", domain="temporal.internal", client_cert=b"CERT", client_private_key=b"KEY"
    )


def test_an_unreadable_tls_file_names_its_variable(tmp_path: Path) -> None:
    missing = tmp_path / "nope.pem"
    with pytest.raises(SettingsError, match=f"OME_TEMPORAL__TLS_CA={missing} cannot be read"):
        tls_config(TemporalSettings(tls_ca=missing))


def test_tracing_only_when_an_otlp_endpoint_is_set() -> None:
    # The watcher: a traced role whose HTTP clients are not instrumented (this test's process
    # must not start tracing every urllib3 and httpx call of the tests after it).
    assert tracing_interceptors(OtelSettings(), "watcher") == []
    interceptors = tracing_interceptors(OtelSettings(otlp_endpoint="http://127.0.0.1:4317"), "watcher")
    assert len(interceptors) == 1 and isinstance(interceptors[0], TracingInterceptor)
    # One process-wide provider: a second client reuses the interceptor.
    assert tracing_interceptors(OtelSettings(otlp_endpoint="http://127.0.0.1:4317"), "watcher") == interceptors
    # omectl is never traced: it would wait on the collector at exit.
    assert tracing_interceptors(OtelSettings(otlp_endpoint="http://127.0.0.1:4317"), "omectl") == []


KUBECONFIG = """
apiVersion: v1
kind: Config
clusters:
- name: sim
  cluster: {server: "http://127.0.0.1:6443"}
- name: east
  cluster: {server: "https://east.example:6443", insecure-skip-tls-verify: true}
contexts:
- name: sim
  context: {cluster: sim, user: dev}
- name: gpu-east
  context: {cluster: east, user: dev}
current-context: sim
users:
- name: dev
  user: {token: abc}
"""


def test_kube_client_follows_the_kubeconfig_and_its_context(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    assert kube_api_client(KubeSettings(kubeconfig=kubeconfig)).configuration.host == "http://127.0.0.1:6443"
    east = kube_api_client(Settings(kube=KubeSettings(kubeconfig=kubeconfig, context="gpu-east")))
    assert east.configuration.host == "https://east.example:6443"


def test_a_missing_kubeconfig_names_the_variable(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="OME_KUBE__KUBECONFIG=.*is not a file"):
        kube_api_client(KubeSettings(kubeconfig=tmp_path / "absent"))


def test_outside_a_pod_without_kubeconfig_the_error_says_what_to_set() -> None:
    with pytest.raises(SettingsError, match="set OME_KUBE__KUBECONFIG to a kubeconfig file"):
        kube_api_client(KubeSettings())


def test_the_readme_documents_every_variable() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    undocumented = sorted(name for name in env_var_names() if f"`{name}`" not in readme)
    assert undocumented == [], f"add these to the README's configuration table: {undocumented}"


# --- migration caps (`lifecycle.audit`, reference §13) ----------------------------------


def test_migration_caps_default_to_the_chart() -> None:
    assert Settings().migration.audit() == MigrationAudit(
        max_in_flight_migrations=3, max_migrations_per_window=10, window_seconds=3600
    )


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        pytest.param({"window": "30m"}, MigrationAudit(window_seconds=1800), id="30m window"),
        pytest.param(
            {"max_migrations_per_window": 1, "window": "1h30m"},
            MigrationAudit(max_migrations_per_window=1, window_seconds=5400),
            id="cap 1 in 1h30m",
        ),
        pytest.param({"max_in_flight_migrations": 0}, None, id="in-flight cap 0"),
        pytest.param({"max_migrations_per_window": 0}, None, id="rate cap 0"),
        pytest.param({"max_migrations_per_window": -1}, None, id="rate cap negative"),
        pytest.param({"max_in_flight_migrations": None}, None, id="in-flight cap unset"),
        pytest.param({"max_migrations_per_window": None}, None, id="rate cap unset"),
        pytest.param({"window": ""}, None, id="window empty"),
        pytest.param({"window": None}, None, id="window unset"),
        pytest.param({"window": "0s"}, None, id="window 0s"),
        pytest.param({"window": "-1h"}, None, id="window negative"),
    ],
)
def test_migration_caps(fields: dict[str, object], expected: MigrationAudit | None) -> None:
    assert MigrationSettings(**fields).audit() == expected  # type: ignore[arg-type]


def test_migration_caps_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OME_MIGRATION__MAX_MIGRATIONS_PER_WINDOW", "2")
    monkeypatch.setenv("OME_MIGRATION__WINDOW", "10m")
    assert Settings().migration.audit() == MigrationAudit(max_migrations_per_window=2, window_seconds=600)
    monkeypatch.setenv("OME_MIGRATION__WINDOW", "")
    assert Settings().migration.audit() is None


@pytest.mark.parametrize("window", ["soon", "60", "1 hour"])
def test_a_bad_migration_window_names_its_variable(monkeypatch: pytest.MonkeyPatch, window: str) -> None:
    expected = f"OME_MIGRATION__WINDOW={window!r} is not a Go duration"
    # Raised as SettingsError inside the model; pydantic reports it as a ValidationError, as
    # the other settings' checks are (both are ValueErrors).
    with pytest.raises(ValueError, match=re.escape(expected)) as direct:
        MigrationSettings(window=window)
    assert "set it like 1h or 30m" in str(direct.value)
    assert isinstance(direct.value, ValidationError)
    assert isinstance(direct.value.errors()[0]["ctx"]["error"], SettingsError)
    monkeypatch.setenv("OME_MIGRATION__WINDOW", window)
    with pytest.raises(ValueError, match=re.escape(expected)):
        Settings()


@pytest.mark.parametrize(
    ("value", "names"),
    [
        ("", []),
        ("0", []),
        ("2", ["worker-a", "worker-b"]),
        ("gpu-east, gpu-west", ["gpu-east", "gpu-west"]),
        ("solo", ["solo"]),
    ],
)
def test_workload_clusters_are_a_count_or_names(
    monkeypatch: pytest.MonkeyPatch, value: str, names: list[str]
) -> None:
    monkeypatch.setenv("OME_STACK__WORKLOAD_CLUSTERS", value)
    assert Settings().stack.workload_cluster_names == names


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("Worker_A", "'Worker_A' is not a DNS label"),
        ("a,,b", "'' is not a DNS label"),
        ("-a", "'-a' is not a DNS label"),
        ("a,a", "names a more than once"),
        ("27", "asks for 27 workload clusters"),
    ],
)
def test_a_bad_workload_cluster_list_names_the_variable_value_and_fix(
    monkeypatch: pytest.MonkeyPatch, value: str, problem: str
) -> None:
    monkeypatch.setenv("OME_STACK__WORKLOAD_CLUSTERS", value)
    with pytest.raises(ValidationError) as raised:
        Settings()
    message = str(raised.value)
    assert f"OME_STACK__WORKLOAD_CLUSTERS={value!r}" in message and problem in message
    assert "use " in message


# --- multi-cluster routing (`OME_ROUTING__*`, reference §18, §21) ------------------------------


def test_routing_defaults_publish_nothing_and_resync_every_minute() -> None:
    result = Settings().routing.result()
    assert (result.global_gateway, result.backend_port, result.global_host_template) == ("", 0, "")
    assert result.resync_interval_seconds == 60 and result.probe is None and result.capacity is None


def test_routing_reads_the_chart_blocks_as_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OME_ROUTING__GLOBAL_GATEWAY", "gateways/global")
    monkeypatch.setenv("OME_ROUTING__BACKEND_PORT", "8080")
    monkeypatch.setenv("OME_ROUTING__CAPACITY", '{"path": "/capacity", "method": "GET", "format": "Report", '
                       '"samples": 3, "quorum": 2, "period": "10s", "timeout": "2s", "maxAge": "1m"}')
    result = Settings().routing.result()
    assert result.global_gateway == "gateways/global" and result.backend_port == 8080
    assert result.capacity is not None and result.capacity["quorum"] == 2


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        pytest.param("OME_ROUTING__CAPACITY",
                     '{"path": "/c", "method": "GET", "format": "Report", "samples": 1, "quorum": 1, '
                     '"period": "10", "timeout": "2s", "maxAge": "1m"}',
                     'invalid multi-cluster configuration: routing.capacity.period: "10" is not a duration '
                     '(use forms like "30s", "5m")', id="capacity period without unit"),
        pytest.param("OME_ROUTING__CAPACITY",
                     '{"path": "/c", "method": "GET", "format": "Report", "samples": 1, "quorum": 1, '
                     '"period": "10s", "timeout": "10s", "maxAge": "1m"}',
                     "invalid multi-cluster configuration: routing.capacity.timeout (10s) must be shorter than "
                     "routing.capacity.period (10s)", id="capacity timeout not shorter"),
        pytest.param("OME_ROUTING__RESYNC_INTERVAL", "soon",
                     'invalid multi-cluster configuration: routing.publisher.resyncInterval: "soon" is not a '
                     "duration", id="resync interval"),
        pytest.param("OME_ROUTING__GLOBAL_GATEWAY", "gateways/global",
                     "OME_ROUTING__BACKEND_PORT must be from 1 to 65535 with OME_ROUTING__GLOBAL_GATEWAY set",
                     id="gateway without port"),
    ],
)
def test_routing_errors_stop_the_worker_with_omes_words(monkeypatch: pytest.MonkeyPatch, variable: str, value: str,
                                                       message: str) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValidationError, match=re.escape(message)):
        Settings()
