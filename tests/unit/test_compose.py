"""docker-compose.yml cannot run here (no Docker engine), so its contract is checked as data:
the services a user expects, pinned images, ports on 127.0.0.1 where `make up` puts them, and
worker/watcher settings that `workers/config.py` really reads."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from workers.config import env_var_names
from workflows.names import TASK_QUEUE
from workflows.search_attributes import ALL as SEARCH_ATTRIBUTES

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded = yaml.safe_load((REPO_ROOT / "docker-compose.yml").read_text())
    assert isinstance(loaded, dict)
    return loaded


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found = compose["services"]
    assert isinstance(found, dict)
    return found


def published(service: dict[str, Any]) -> list[tuple[str, int, int]]:
    """(host ip, host port, container port) of each `ports:` entry."""
    entries = []
    for entry in service.get("ports", []):
        match = re.fullmatch(r"(?:([\d.]+):)?(\d+):(\d+)", str(entry))
        assert match, f"unrecognised port entry {entry!r}"
        entries.append((match.group(1) or "0.0.0.0", int(match.group(2)), int(match.group(3))))
    return entries


def test_the_stack_has_every_service(services: dict[str, dict[str, Any]]) -> None:
    assert {
        "postgresql",
        "temporal",
        "temporal-setup",
        "temporal-ui",
        "prometheus",
        "worker",
        "watcher",
    } <= set(services)


def test_third_party_images_are_pinned(services: dict[str, dict[str, Any]]) -> None:
    expected = {
        "postgresql": "postgres",
        "temporal": "temporalio/auto-setup",
        "temporal-ui": "temporalio/ui",
        "prometheus": "prom/prometheus",
    }
    for name, repository in expected.items():
        image = services[name]["image"]
        assert image.startswith(repository + ":"), image
        tag = image.split(":", 1)[1]
        assert tag != "latest" and re.search(r"\d", tag), f"{name} image {image!r} must pin a version"


def test_ports_match_make_up_and_stay_on_loopback(services: dict[str, dict[str, Any]]) -> None:
    assert published(services["temporal"]) == [("127.0.0.1", 7233, 7233)]
    assert published(services["temporal-ui"]) == [("127.0.0.1", 8233, 8080)]
    assert published(services["prometheus"]) == [("127.0.0.1", 9090, 9090)]
    for name, service in services.items():
        for host_ip, _, _ in published(service):
            assert host_ip == "127.0.0.1", f"{name} publishes on {host_ip}"
    assert published(services["postgresql"]) == []


def test_dependencies_name_real_services(services: dict[str, dict[str, Any]]) -> None:
    for name, service in services.items():
        for dependency in service.get("depends_on", {}):
            assert dependency in services, f"{name} depends on unknown service {dependency}"


def test_named_volumes_are_declared(compose: dict[str, Any], services: dict[str, dict[str, Any]]) -> None:
    for service in services.values():
        for volume in service.get("volumes", []):
            source = str(volume).split(":", 1)[0]
            if not source.startswith((".", "/", "$", "~")):
                assert source in compose.get("volumes", {}), f"volume {source} is not declared"


@pytest.mark.parametrize("name", ["worker", "watcher"])
def test_product_processes_use_real_settings(services: dict[str, dict[str, Any]], name: str) -> None:
    service = services[name]
    assert service["build"] == {"context": ".", "dockerfile": "Dockerfile"}
    environment = service["environment"]
    unknown = set(environment) - env_var_names()
    assert unknown == set(), f"{name} sets variables workers/config.py does not read: {unknown}"
    host, port = environment["OME_TEMPORAL__ADDRESS"].split(":")
    assert host in services and port == "7233"
    assert environment["OME_TEMPORAL__TASK_QUEUE"] == TASK_QUEUE
    mounted = [str(volume).split(":")[-2] for volume in service["volumes"]]
    assert environment["OME_KUBE__KUBECONFIG"] in mounted
    assert environment["OME_PROMETHEUS__URL"].startswith("http://prometheus:")


def test_worker_and_watcher_run_their_entry_points(services: dict[str, dict[str, Any]]) -> None:
    assert services["worker"]["command"] == ["python", "-m", "workers"]
    assert services["watcher"]["command"] == ["python", "-m", "workers.watcher"]
    assert (REPO_ROOT / "workers" / "__main__.py").is_file()


def test_setup_registers_every_search_attribute(services: dict[str, dict[str, Any]]) -> None:
    script = " ".join(services["temporal-setup"]["command"])
    for key in SEARCH_ATTRIBUTES:
        assert re.search(rf"\b{key.name}\b", script), f"search attribute {key.name} is not registered"


def test_prometheus_scrapes_services_of_the_stack(services: dict[str, dict[str, Any]]) -> None:
    mount = next(v for v in services["prometheus"]["volumes"] if str(v).endswith("/prometheus.yml:ro"))
    config = yaml.safe_load((REPO_ROOT / mount.split(":")[0]).read_text())
    targets = [
        t for job in config["scrape_configs"] for static in job["static_configs"] for t in static["targets"]
    ]
    hosts = {target.split(":")[0] for target in targets}
    assert "temporal" in hosts
    assert hosts <= set(services) | {"localhost"}
    metrics_port = services["temporal"]["environment"]["PROMETHEUS_ENDPOINT"].split(":")[-1]
    assert f"temporal:{metrics_port}" in targets
    worker_port = services["worker"]["environment"]["OME_PROMETHEUS__WORKER_METRICS_ADDRESS"].split(":")[-1]
    assert f"worker:{worker_port}" in targets
    # The state gauges come from the one controller (alerts and dashboard read them there).
    address = services["controller"]["environment"]["OME_PROMETHEUS__CONTROLLER_METRICS_ADDRESS"]
    assert f"controller:{address.split(':')[-1]}" in targets
    # The alert rules read the worker's job by name, and the container sees the rules file.
    assert any(job["job_name"] == "worker" for job in config["scrape_configs"])
    mounted = {str(v).split(":")[1]: str(v).split(":")[0] for v in services["prometheus"]["volumes"]}
    for rules in config["rule_files"]:
        assert (REPO_ROOT / mounted[rules]).is_file(), f"{rules} is not mounted from the repository"


def test_the_image_holds_every_package_and_runs_the_worker() -> None:
    dockerfile = (REPO_ROOT / "Dockerfile").read_text()
    include = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"][
        "find"
    ]["include"]
    for pattern in include:
        package = pattern.rstrip("*")
        assert f"COPY {package} ./{package}" in dockerfile, f"the image lacks package {package}"
    assert dockerfile.rstrip().endswith('CMD ["python", "-m", "workers"]')
    assert re.search(r"^FROM python:3\.11", dockerfile, flags=re.MULTILINE)


def test_traces_flow_from_the_processes_through_the_collector_to_jaeger(
    services: dict[str, dict[str, Any]],
) -> None:
    for name, repository in {"otel-collector": "otel/opentelemetry-collector", "jaeger": "jaegertracing/all-in-one"}.items():
        image = services[name]["image"]
        assert image.startswith(repository + ":") and re.search(r"\d", image.split(":", 1)[1]), image
    assert published(services["jaeger"]) == [("127.0.0.1", 16686, 16686)]

    mount = next(v for v in services["otel-collector"]["volumes"] if str(v).endswith(":ro"))
    source, target = mount.split(":")[:2]
    assert f"--config={target}" in services["otel-collector"]["command"]
    config = yaml.safe_load((REPO_ROOT / source).read_text())
    pipeline = config["service"]["pipelines"]["traces"]
    received = config["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"].rsplit(":", 1)[1]
    for name in ("worker", "watcher", "controller"):
        endpoint = services[name]["environment"]["OME_OTEL__OTLP_ENDPOINT"]
        assert endpoint == f"http://otel-collector:{received}", f"{name} exports to {endpoint}"
    (exporter,) = pipeline["exporters"]
    host = config["exporters"][exporter]["endpoint"].split(":")[0]
    assert host == "jaeger" and services["jaeger"]["environment"]["COLLECTOR_OTLP_ENABLED"] == "true"
