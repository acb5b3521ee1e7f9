"""The `make up` runner's checks before it starts anything, and the banner it prints after."""

from __future__ import annotations

import asyncio
import base64
import re
import socket
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml

from tests.e2e.running_stack import free_port_run, free_ports
from workers.config import KubeSettings, Settings, StackSettings, kube_api_client
from workers.feature_config import PrometheusSettings
from workers.prometheus import ALERT_RULES
from workers.stack import EXAMPLE_RUNTIME, EXAMPLE_SPEC, Stack, _scrape_address, run_stack

REPO_ROOT = Path(__file__).resolve().parents[2]


async def test_the_stack_refuses_a_busy_port_and_names_the_setting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        settings = Settings(stack=StackSettings(data_dir=tmp_path, frontend_port=port))
        assert await run_stack(settings) == 1
    output = capsys.readouterr().out
    assert f"127.0.0.1:{port} is already in use" in output
    assert "OME_STACK__FRONTEND_PORT" in output


def test_the_banner_walks_through_the_shipped_example() -> None:
    banner = Stack(Settings()).banner()
    assert banner.startswith("Local stack is up.")
    assert "http://127.0.0.1:8233" in banner
    assert (REPO_ROOT / EXAMPLE_RUNTIME).is_file() and (REPO_ROOT / EXAMPLE_SPEC).is_file()
    assert f"--update-input-file {EXAMPLE_SPEC}" in banner
    # The CLI's default address is the stack's, so the commands carry no --address.
    assert "--address" not in banner


def test_on_other_ports_every_cli_command_names_the_address(tmp_path: Path) -> None:
    banner = Stack(
        Settings(stack=StackSettings(data_dir=tmp_path, frontend_port=17233, ui_port=18233))
    ).banner()
    assert "http://127.0.0.1:18233" in banner
    commands = [line for line in banner.splitlines() if re.search(r"bin/temporal .*workflow ", line)]
    assert len(commands) == 3
    assert all("--address 127.0.0.1:17233" in command for command in commands)


def test_make_up_runs_this_runner_and_ci_runs_make_test() -> None:
    makefile = (REPO_ROOT / "Makefile").read_text()
    recipe = re.search(r"^up: .*\n((?:\t.*\n)+)", makefile, flags=re.MULTILINE)
    assert recipe and recipe.group(1).strip() == "$(BIN)/python -m workers.stack"
    ci = (REPO_ROOT / ".ci" / "run").read_text()
    assert [line for line in ci.splitlines() if line and not line.startswith(("#", "set ", "cd "))] == [
        "make test"
    ]
    readme = (REPO_ROOT / "README.md").read_text()
    assert readme.index("make up") < readme.index("make test") < readme.index("## What runs")


def test_without_prometheus_the_banner_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("workers.stack.prometheus_binary", lambda: None)
    banner = Stack(Settings()).banner()
    assert "Prometheus:         not installed" in banner
    assert "apt-get install -y --no-install-recommends prometheus" in banner


def test_a_configured_prometheus_is_used_as_it_is(tmp_path: Path) -> None:
    settings = Settings(
        stack=StackSettings(data_dir=tmp_path), prometheus=PrometheusSettings(url="http://prom.example:9090")
    )
    stack = Stack(settings)
    assert "Prometheus:         http://prom.example:9090 (OME_PROMETHEUS__URL)" in stack.banner()
    assert stack._child_env()["OME_PROMETHEUS__URL"] == "http://prom.example:9090"


def fake_prometheus(tmp_path: Path) -> Path:
    """A stand-in binary that records its command line and logs Prometheus's ready line."""
    script = tmp_path / "prometheus"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$@" > {tmp_path / "argv"}\n'
        "echo 'ts=2026-01-01T00:00:00Z level=info msg=\"Server is ready to receive web requests.\"'\n"
        "exec sleep 60\n"
    )
    script.chmod(0o755)
    return script


async def test_the_stack_runs_prometheus_on_kubesim_the_worker_and_the_controller_and_tells_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    binary = fake_prometheus(tmp_path)
    monkeypatch.setattr("workers.stack.prometheus_binary", lambda: binary)
    prometheus_port, worker_port = free_ports(2)
    controller_port = free_port_run(2)  # the second controller replica takes the port after
    stack = Stack(
        Settings(
            stack=StackSettings(
                data_dir=tmp_path / "data",
                prometheus_port=prometheus_port,
                worker_metrics_port=worker_port,
                controller_metrics_port=controller_port,
            )
        )
    )
    stack.kubesim_url = "http://127.0.0.1:16443"  # as if kubesim had started
    try:
        await stack._start_prometheus()
    finally:
        await stack.stop_all()
    config = yaml.safe_load((tmp_path / "data" / "prometheus" / "prometheus.yml").read_text())
    assert config["global"]["scrape_interval"] == "5s"
    targets = {job["job_name"]: job["static_configs"][0]["targets"] for job in config["scrape_configs"]}
    assert targets == {
        "prometheus": [f"127.0.0.1:{prometheus_port}"],
        "worker": [f"127.0.0.1:{worker_port}"],
        "controller": [f"127.0.0.1:{controller_port}", f"127.0.0.1:{controller_port + 1}"],
        "kubesim": ["127.0.0.1:16443"],
    }
    # The product's alert rules are evaluated (deploy/prometheus/alerts.yml, by absolute path).
    assert config["rule_files"] == [str(ALERT_RULES)] and ALERT_RULES.is_file()
    argv = (tmp_path / "argv").read_text().split()
    assert f"--web.listen-address=127.0.0.1:{prometheus_port}" in argv
    assert f"--storage.tsdb.path={(tmp_path / 'data' / 'prometheus' / 'data').resolve()}" in argv
    env = stack._child_env()
    assert env["OME_PROMETHEUS__URL"] == f"http://127.0.0.1:{prometheus_port}"
    assert env["OME_PROMETHEUS__WORKER_METRICS_ADDRESS"] == f"127.0.0.1:{worker_port}"
    # The controller serves the state gauges; the stack's Prometheus scrapes it.
    assert env["OME_PROMETHEUS__CONTROLLER_METRICS_ADDRESS"] == f"127.0.0.1:{controller_port}"
    assert (
        f"Prometheus:         http://127.0.0.1:{prometheus_port} (scrapes kubesim's engines, the worker and the controller"
        in (stack.banner())
    )


async def test_the_stack_refuses_a_busy_prometheus_port_and_names_the_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("workers.stack.prometheus_binary", lambda: fake_prometheus(tmp_path))
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("{}")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        # No dev server and a configured cluster: Prometheus is the first process to start.
        settings = Settings(
            stack=StackSettings(data_dir=tmp_path, dev_server=False, prometheus_port=port),
            kube=KubeSettings(kubeconfig=kubeconfig),
        )
        assert await run_stack(settings) == 1
    output = capsys.readouterr().out
    assert f"127.0.0.1:{port} is already in use" in output
    assert "OME_STACK__PROMETHEUS_PORT" in output


def test_a_worker_bound_to_every_interface_is_scraped_on_loopback() -> None:
    assert _scrape_address("0.0.0.0:9464") == "127.0.0.1:9464"
    assert _scrape_address("10.0.0.5:9464") == "10.0.0.5:9464"


async def start_clusters(tmp_path: Path, port: int) -> Stack:
    """The stack's kubesims alone: the control plane and two workload clusters, registered."""
    stack = Stack(
        Settings(
            stack=StackSettings(data_dir=tmp_path, kubesim_port=port, workload_clusters="2", dev_server=False)
        )
    )
    try:
        await stack._start_kubesim()
        await stack._start_workload_clusters()
    except BaseException:
        await stack.stop_all()
        raise
    return stack


def registered(kubeconfig: Path) -> tuple[dict[str, Any], dict[str, str], list[str]]:
    """WorkloadClusters by name, the kubeconfig in each Secret, and the Gateways in `ome`."""
    client = kube_api_client(KubeSettings(kubeconfig=kubeconfig))
    try:
        custom = kubernetes.client.CustomObjectsApi(client)
        clusters = {
            c["metadata"]["name"]: c
            for c in custom.list_cluster_custom_object("ome.io", "v1beta1", "workloadclusters")["items"]
        }
        core = kubernetes.client.CoreV1Api(client)
        secrets = {
            name: base64.b64decode(
                core.read_namespaced_secret(f"wlc-{name}-kubeconfig", "ome").data["kubeconfig"]
            ).decode()
            for name in clusters
        }
        gateways = custom.list_namespaced_custom_object("gateway.networking.k8s.io", "v1", "ome", "gateways")
        return clusters, secrets, [g["metadata"]["name"] for g in gateways["items"]]
    finally:
        client.close()


async def test_workload_clusters_run_as_kubesims_registered_on_the_control_plane(tmp_path: Path) -> None:
    (port,) = free_ports(1)
    stack = await start_clusters(tmp_path, port)
    try:
        assert [c.name for c in stack.workload_clusters] == ["worker-a", "worker-b"]
        clusters, secrets, gateways = await asyncio.to_thread(registered, stack.kubeconfig)
        assert gateways == ["global-gateway"]
        first = {}
        for cluster in stack.workload_clusters:
            assert cluster.url.startswith("https://127.0.0.1:") and cluster.gateway_url.startswith(
                "http://127.0.0.1:"
            )
            assert cluster.kubeconfig == tmp_path / "clusters" / cluster.name / "kubeconfig"
            wlc = clusters[cluster.name]
            assert wlc["metadata"]["labels"]["ome.io/cluster-name"] == cluster.name
            assert wlc["spec"]["clusterSource"]["kubeConfig"]["secretRef"] == {
                "name": f"wlc-{cluster.name}-kubeconfig",
                "namespace": "ome",
            }
            config = yaml.safe_load(secrets[cluster.name])
            assert config["clusters"][0]["cluster"]["server"] == cluster.url
            assert (
                config["users"][0]["user"]["token"]
                and config["clusters"][0]["cluster"]["certificate-authority-data"]
            )
            first[cluster.name] = cluster.url
            banner_line = (
                f"Workload cluster:   {cluster.name} at {cluster.url} (kubeconfig {cluster.kubeconfig}, "
            )
            assert banner_line + f"gateway {cluster.gateway_url}" in stack.banner()
        assert "Global gateway:     ome/global-gateway" in stack.banner()
        client = kubernetes.config.new_client_from_config_dict(yaml.safe_load(secrets["worker-a"]))
        try:
            gateway = kubernetes.client.CustomObjectsApi(client).get_namespaced_custom_object(
                "gateway.networking.k8s.io", "v1", "ome", "gateways", "inference-gateway"
            )
        finally:
            client.close()
        assert (
            f"http://127.0.0.1:{gateway['spec']['listeners'][0]['port']}"
            == stack.workload_clusters[0].gateway_url
        )
    finally:
        await stack.stop_all()
    assert (tmp_path / "clusters" / "worker-a" / "kubesim.json").is_file()
    # A restart reuses the state files and brings the Secrets up to date: new ports, new tokens.
    again = await start_clusters(tmp_path, port)
    try:
        clusters, secrets, _ = await asyncio.to_thread(registered, again.kubeconfig)
        assert sorted(clusters) == ["worker-a", "worker-b"]
        for cluster in again.workload_clusters:
            assert yaml.safe_load(secrets[cluster.name])["clusters"][0]["cluster"]["server"] == cluster.url
    finally:
        await again.stop_all()
