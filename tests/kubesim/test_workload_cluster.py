"""kubesim as a remote workload cluster: HTTPS with its own CA written inline into the
kubeconfig, a bearer token every request needs (401 Status otherwise, as an API server with
anonymous requests disabled answers), and the official client, kubectl and the command line
working from that kubeconfig unchanged."""

from __future__ import annotations

import base64
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import kubernetes
import pytest
import yaml

from kubesim.handle import KubeSim
from tests.kubesim.workload_cluster import TOKEN, request

ROOT = Path(__file__).resolve().parents[2]
UNAUTHORIZED = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "Unauthorized", "reason": "Unauthorized", "code": 401}


@pytest.fixture
def remote(workload_kubesim: KubeSim) -> KubeSim:
    return workload_kubesim


def test_the_kubeconfig_is_https_with_the_ca_and_the_token_inline(remote: KubeSim) -> None:
    config = yaml.safe_load(Path(remote.kubeconfig_path).read_text())
    cluster = config["clusters"][0]["cluster"]
    assert cluster["server"] == remote.url and remote.url.startswith("https://127.0.0.1:")
    assert base64.b64decode(cluster["certificate-authority-data"]).startswith(b"-----BEGIN CERTIFICATE-----")
    assert config["users"][0]["user"] == {"token": TOKEN}
    assert Path(remote.kubeconfig_path).stat().st_mode & 0o077 == 0


def test_the_official_client_discovers_and_writes_through_the_kubeconfig(remote: KubeSim) -> None:
    client = kubernetes.config.new_client_from_config(config_file=remote.kubeconfig_path)
    try:
        assert kubernetes.client.VersionApi(client).get_code().git_version.endswith("-kubesim")
        assert "v1" in kubernetes.client.CoreApi(client).get_api_versions().versions
        groups = {g.name for g in kubernetes.client.ApisApi(client).get_api_versions().groups}
        assert {"gateway.networking.k8s.io", "inference.networking.k8s.io", "ome.io"} <= groups
        core = kubernetes.client.CoreV1Api(client)
        assert len(core.list_node().items) == 4
        core.create_namespaced_config_map("default", {"metadata": {"name": "over-tls"}})
        assert core.read_namespaced_config_map("over-tls", "default").metadata.name == "over-tls"
    finally:
        client.close()


@pytest.mark.parametrize("path", ["/version", "/api", "/apis", "/api/v1/nodes", "/kubesim/counters", "/metrics"])
@pytest.mark.parametrize("token", [None, "wrong"])
def test_without_the_token_every_path_answers_401_unauthorized(remote: KubeSim, path: str, token: str | None) -> None:
    assert request(remote, "GET", path, token=token) == (401, UNAUTHORIZED)


def test_the_official_client_without_the_token_gets_401(remote: KubeSim) -> None:
    config = yaml.safe_load(Path(remote.kubeconfig_path).read_text())
    del config["users"][0]["user"]["token"]
    client = kubernetes.config.new_client_from_config_dict(config)
    try:
        with pytest.raises(kubernetes.client.ApiException) as raised:
            kubernetes.client.CoreV1Api(client).list_namespace()
        assert raised.value.status == 401 and '"reason":"Unauthorized"' in raised.value.body
    finally:
        client.close()


def test_the_control_api_answers_under_kubesim_with_the_token(remote: KubeSim) -> None:
    status, counters = request(remote, "GET", "/kubesim/counters")
    assert status == 200 and "requests" in counters
    assert request(remote, "GET", "/sim/counters")[0] == 200


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_works_from_the_kubeconfig(remote: KubeSim) -> None:
    run = subprocess.run(["kubectl", "--kubeconfig", remote.kubeconfig_path, "get", "nodes", "-o", "name"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "node/gpu-node-1" in run.stdout.split()


def test_command_line_serves_https_with_a_token_and_a_gateway(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    proc = subprocess.Popen(
        [sys.executable, "-m", "kubesim", "--port", "0", "--kubeconfig", str(kubeconfig), "--topology",
         "zones=1,nodes-per-zone=1,gpus=8", "--tls", "--token", "cli-token", "--gateway-port", "0"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line.startswith("kubesim listening on https://127.0.0.1:"), line
        assert f"(kubeconfig: {kubeconfig}, gateway: http://127.0.0.1:" in line
        client = kubernetes.config.new_client_from_config(config_file=str(kubeconfig))
        try:
            gateway = kubernetes.client.CustomObjectsApi(client).get_namespaced_custom_object(
                "gateway.networking.k8s.io", "v1", "ome", "gateways", "inference-gateway")
        finally:
            client.close()
        port = int(line.rsplit(":", 1)[1].rstrip(")"))
        assert gateway["spec"]["listeners"][0]["port"] == port
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
