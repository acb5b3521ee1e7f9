"""The control API (/sim/), fault injection, request counters, persistence across restarts and
the `python -m kubesim` command line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import kubernetes
import pytest
import yaml
from kubernetes.client.rest import ApiException

from kubesim import cluster, persist
from kubesim.handle import KubeSim
from kubesim.timing import Timing
from tests.kubesim.helpers import Clients, is_ready, pod_body, raw_request, wait_for

ROOT = Path(__file__).resolve().parents[2]


def test_counters_count_requests_by_verb_and_resource(k8s: Clients) -> None:
    k8s.sim.reset_counters()
    k8s.core.create_namespaced_config_map(k8s.namespace, {"metadata": {"name": "c"}})
    k8s.core.read_namespaced_config_map("c", k8s.namespace)
    k8s.core.read_namespaced_config_map("c", k8s.namespace)
    k8s.core.list_namespaced_pod(k8s.namespace)
    requests = k8s.sim.counters()["requests"]
    assert requests[("create", "configmaps")] == 1
    assert requests[("get", "configmaps")] == 2
    assert requests[("list", "pods")] == 1
    # The create (its body names the object) and both reads, per object; a list names none.
    by_object = k8s.sim.counters()["by_object"]
    assert by_object == {("create", "configmaps", f"{k8s.namespace}/c"): 1, ("get", "configmaps", f"{k8s.namespace}/c"): 2}
    code, body = raw_request(k8s.sim, "GET", "/sim/counters")
    assert code == 200
    assert {"verb": "get", "resource": "configmaps", "count": 2} in body["requests"]
    assert {"verb": "get", "resource": "configmaps", "object": f"{k8s.namespace}/c", "count": 2} in body["by_object"]
    json.dumps(body)  # the HTTP form is plain JSON


def test_injected_faults_and_latency(k8s: Clients) -> None:
    k8s.sim.inject_faults(error_rate=1.0, codes=(429,))
    try:
        with pytest.raises(ApiException) as err:
            k8s.core.read_namespace(k8s.namespace)
        assert err.value.status == 429 and err.value.headers["Retry-After"] == "1"
        assert json.loads(err.value.body)["reason"] == "TooManyRequests"
        # 409 is only injected into writes: reads with codes=(409,) pass.
        k8s.sim.inject_faults(error_rate=1.0, codes=(409,))
        k8s.core.read_namespace(k8s.namespace)
        with pytest.raises(ApiException) as err:
            k8s.core.create_namespaced_config_map(k8s.namespace, {"metadata": {"name": "x"}})
        assert err.value.status == 409
    finally:
        k8s.sim.clear_faults()
    assert k8s.sim.counters()["faults_injected"]["429"] >= 1
    code, _ = raw_request(k8s.sim, "POST", "/sim/faults", {"error_rate": 2})
    assert code == 400


def test_control_http_api_mirrors_the_handle(k8s: Clients) -> None:
    sim = k8s.sim
    code, _ = raw_request(sim, "POST", "/sim/images", {"image": "http-crash:1", "crash": True})
    assert code == 200
    k8s.core.create_namespaced_pod(k8s.namespace, pod_body("p", image="http-crash:1"))
    wait_for(
        lambda: (
            (s := k8s.core.read_namespaced_pod("p", k8s.namespace).status.container_statuses)
            and s[0].restart_count >= 1
        ),
        what="crash through the HTTP control API",
    )
    code, body = raw_request(sim, "POST", "/sim/images", {"image": "x", "explode": True})
    assert code == 400 and "explode" in body["message"]
    code, body = raw_request(sim, "POST", "/sim/nodes/no-such-node/fail")
    assert code == 404


def test_state_survives_a_restart(tmp_path: Path) -> None:
    state = tmp_path / "kubesim.json"
    sim = KubeSim(topology="zones=1,nodes-per-zone=2,gpus=8", state_file=state, timing=Timing.fast()).start()
    core = kubernetes.client.CoreV1Api(sim.api_client())
    core.create_namespaced_pod("default", pod_body("keep"))
    wait_for(lambda: is_ready(core.read_namespaced_pod("keep", "default")), what="ready before restart")
    before = core.read_namespaced_pod("keep", "default")
    core.create_namespaced_config_map("default", {"metadata": {"name": "cm"}, "data": {"a": "1"}})
    last_rv = int(core.list_namespaced_config_map("default").metadata.resource_version)
    sim.stop()
    again = KubeSim(
        topology="zones=1,nodes-per-zone=2,gpus=8", state_file=state, timing=Timing.fast()
    ).start()
    try:
        core = kubernetes.client.CoreV1Api(again.api_client())
        pod = core.read_namespaced_pod("keep", "default")
        assert pod.metadata.uid == before.metadata.uid and pod.status.phase == "Running" and is_ready(pod)
        assert pod.spec.node_name == before.spec.node_name
        assert pod.status.container_statuses[0].restart_count == 0
        assert core.read_namespaced_config_map("cm", "default").data == {"a": "1"}
        created = core.create_namespaced_config_map("default", {"metadata": {"name": "new"}})
        assert int(created.metadata.resource_version) > last_rv
        assert [n.metadata.name for n in core.list_node().items] == ["gpu-node-1", "gpu-node-2"]
    finally:
        again.stop()


def test_the_autosave_writes_off_the_loop_and_stopping_keeps_the_newest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The state file is written in a thread, so requests are answered meanwhile; a stop during
    that write lets it land first and then saves, so the older document never replaces the newer."""
    monkeypatch.setattr(cluster, "AUTOSAVE_SECONDS", 0.05)
    started, landed = threading.Event(), threading.Event()
    write = persist.write

    def slow_write(document: bytes, path: str | Path) -> None:
        if not threading.current_thread().name.startswith("asyncio_"):
            write(document, path)  # the final save, on the loop's own thread
            return
        if b'"early"' not in document:
            write(document, path)
            return
        started.set()
        time.sleep(1.5)  # a large file on a slow disk: still writing when the stop comes
        write(document, path)
        landed.set()

    monkeypatch.setattr(persist, "write", slow_write)
    state = tmp_path / "kubesim.json"
    sim = KubeSim(topology="zones=1,nodes-per-zone=1,gpus=8", state_file=state, timing=Timing.fast()).start()
    core = kubernetes.client.CoreV1Api(sim.api_client())
    core.create_namespaced_config_map("default", {"metadata": {"name": "early"}})
    assert started.wait(5), "no autosave began after the change"
    core.create_namespaced_config_map("default", {"metadata": {"name": "late"}})
    assert not landed.is_set(), "the API answered only once the file was written: the write held the loop"
    sim.stop()
    assert landed.wait(5), "the write in flight never landed"
    names = {entry["object"]["metadata"]["name"] for entry in persist.load(state)["objects"]}
    assert {"early", "late"} <= names


def test_command_line_serves_saves_on_sigterm_and_restores(tmp_path: Path) -> None:
    kubeconfig, state = tmp_path / "kubeconfig", tmp_path / "state.json"
    args = [
        sys.executable,
        "-m",
        "kubesim",
        "--port",
        "0",
        "--kubeconfig",
        str(kubeconfig),
        "--state-file",
        str(state),
        "--topology",
        "zones=1,nodes-per-zone=1,gpus=8",
        "--crds",
        "product",
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def launch() -> tuple[subprocess.Popen[str], str]:
        proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert (
            line.startswith("kubesim listening on http://127.0.0.1:")
            and f"(kubeconfig: {kubeconfig})" in line
        )
        return proc, line.split()[3]

    proc, url = launch()
    try:
        server = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
        assert server == url
        client = kubernetes.config.new_client_from_config(str(kubeconfig))
        kubernetes.client.CoreV1Api(client).create_namespaced_config_map(
            "default", {"metadata": {"name": "cli"}}
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    assert "cli" in state.read_text()
    proc, url = launch()
    try:
        with urllib.request.urlopen(f"{url}/api/v1/namespaces/default/configmaps/cli") as resp:
            assert json.load(resp)["metadata"]["name"] == "cli"
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 0


def test_added_latency_slows_every_request(k8s: Clients) -> None:
    import time

    k8s.sim.inject_faults(latency_seconds=0.3)
    try:
        started = time.monotonic()
        k8s.core.read_namespace(k8s.namespace)
        assert time.monotonic() - started >= 0.3
    finally:
        k8s.sim.clear_faults()


def test_two_clusters_run_side_by_side(kubesim: KubeSim, kubesim_session: KubeSim) -> None:
    assert kubesim.url != kubesim_session.url
    one = kubernetes.client.CoreV1Api(kubesim.api_client())
    other = kubernetes.client.CoreV1Api(kubesim_session.api_client())
    one.create_namespace({"metadata": {"name": "only-in-one"}})
    assert "only-in-one" not in {n.metadata.name for n in other.list_namespace().items}


def test_restored_cluster_hands_out_fresh_addresses(tmp_path: Path) -> None:
    state = tmp_path / "kubesim.json"
    topology = "zones=1,nodes-per-zone=1,gpus=8"
    sim = KubeSim(topology=topology, state_file=state).start()
    core = kubernetes.client.CoreV1Api(sim.api_client())
    core.create_namespaced_service("default", {"metadata": {"name": "a"}, "spec": {"ports": [{"port": 80}]}})
    core.create_namespaced_pod("default", pod_body("a"))
    wait_for(lambda: core.read_namespaced_pod("a", "default").status.pod_ip, what="pod IP")
    sim.stop()
    again = KubeSim(topology=topology, state_file=state).start()
    try:
        core = kubernetes.client.CoreV1Api(again.api_client())
        core.create_namespaced_service("default", {"metadata": {"name": "b"}, "spec": {"ports": [{"port": 80}]}})
        core.create_namespaced_pod("default", pod_body("b"))
        wait_for(lambda: core.read_namespaced_pod("b", "default").status.pod_ip, what="pod IP")
        services = core.list_namespaced_service("default").items
        assert len({s.spec.cluster_ip for s in services}) == len(services) == 2
        pods = core.list_namespaced_pod("default").items
        assert len({p.status.pod_ip for p in pods}) == 2
    finally:
        again.stop()
