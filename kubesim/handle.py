"""`KubeSim`, the Python handle tests and benchmarks drive a cluster with: it runs the server and
controllers on their own thread and event loop, writes a kubeconfig, hands out configured
`kubernetes` clients, and forwards control operations into the loop.

    sim = KubeSim(topology="zones=3,nodes-per-zone=4,gpus=8", crds="product", timing=Timing.fast())
    sim.start()
    core = kubernetes.client.CoreV1Api(sim.api_client())
    ...
    sim.stop()
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import yaml

from kubesim.cluster import Cluster
from kubesim.timing import Timing
from kubesim.topology import Topology

T = TypeVar("T")


def write_kubeconfig(path: str | Path, url: str, name: str = "kubesim", token: str | None = None,
                     ca_pem: bytes | None = None) -> Path:
    """A kubeconfig for the cluster at `url`: the bearer `token` (kubesim's placeholder when the
    cluster checks none) and, for HTTPS, the CA inline as `certificate-authority-data`."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    cluster: dict[str, str] = {"server": url}
    if ca_pem is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": name, "user": {"token": token or "kubesim"}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name, "namespace": "default"}}],
        "current-context": name,
        "preferences": {},
    }
    target.write_text(yaml.safe_dump(config, sort_keys=False))
    if token is not None:
        target.chmod(0o600)  # it holds a credential
    return target


class KubeSim:
    """A running kubesim cluster, controlled from ordinary (synchronous) test code."""

    def __init__(self, topology: str | Topology | None = "zones=3,nodes-per-zone=4,gpus=8",
                 state_file: str | Path | None = None, port: int = 0, timing: Timing | None = None,
                 crds: str | None = None, kubeconfig_path: str | Path | None = None, tls: bool = False,
                 token: str | None = None, gateway_port: int | None = None) -> None:
        """`tls`, `token`, `gateway_port`: a workload cluster's HTTPS, bearer token and inference
        gateway endpoint (`kubesim.cluster.Cluster`)."""
        self.cluster = Cluster(topology=topology, timing=timing or Timing.fast(), crds=crds, state_file=state_file,
                               tls=tls, token=token, gateway_port=gateway_port)
        self._port = port
        self._kubeconfig = Path(kubeconfig_path) if kubeconfig_path else None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self.url = ""
        self.port = 0

    @property
    def kubeconfig_path(self) -> str:
        return str(self._kubeconfig)

    @property
    def thread_id(self) -> int | None:
        """The OS id of the thread serving the cluster (what its CPU time is read by); None before `start`."""
        return self._thread.native_id if self._thread is not None else None

    # ---- lifecycle -------------------------------------------------------------------------

    def start(self) -> KubeSim:
        ready: concurrent.futures.Future[int] = concurrent.futures.Future()
        self._loop = asyncio.new_event_loop()

        def run() -> None:
            assert self._loop is not None
            asyncio.set_event_loop(self._loop)
            try:
                port = self._loop.run_until_complete(self.cluster.start("127.0.0.1", self._port))
            except BaseException as exc:
                ready.set_exception(exc)
                return
            ready.set_result(port)
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name="kubesim", daemon=True)
        self._thread.start()
        self.port = ready.result(timeout=60)
        self.url = self.cluster.url
        if self._kubeconfig is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="kubesim-")
            self._kubeconfig = Path(self._tmp.name) / "kubeconfig"
        credentials = self.cluster.credentials
        write_kubeconfig(self._kubeconfig, self.url, token=self.cluster.token,
                         ca_pem=credentials.ca_pem if credentials else None)
        return self

    def stop(self) -> None:
        if self._loop is None or self._thread is None:
            return
        asyncio.run_coroutine_threadsafe(self.cluster.stop(), self._loop).result(timeout=30)
        asyncio.run_coroutine_threadsafe(self._cancel_leftovers(), self._loop).result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        self._loop.close()
        self._loop = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    @staticmethod
    async def _cancel_leftovers() -> None:
        """Cancel tasks still running (client connections the server did not close itself)."""
        current = asyncio.current_task()
        tasks = [t for t in asyncio.all_tasks() if t is not current]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=5)

    def __enter__(self) -> KubeSim:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- clients ---------------------------------------------------------------------------

    def api_client(self) -> Any:
        """A new `kubernetes.client.ApiClient` pointed at this cluster (from its kubeconfig when
        it serves HTTPS, as a remote cluster's client is built)."""
        import kubernetes

        if self.cluster.credentials is not None:
            return kubernetes.config.new_client_from_config(  # type: ignore[no-untyped-call]
                config_file=self.kubeconfig_path)
        configuration = kubernetes.client.Configuration()
        configuration.host = self.url
        configuration.api_key = {"authorization": f"Bearer {self.cluster.token or 'kubesim'}"}
        return kubernetes.client.ApiClient(configuration)

    def call(self, fn: Callable[[], T]) -> T:
        """Run `fn` on the cluster's event loop (where all state lives) and return its result."""
        if self._loop is None:
            raise RuntimeError("KubeSim is not running: call start() first")

        async def invoke() -> T:
            return fn()

        return asyncio.run_coroutine_threadsafe(invoke(), self._loop).result(timeout=30)

    # ---- control ---------------------------------------------------------------------------

    def fail_node(self, name: str) -> None:
        self.call(lambda: self.cluster.fail_node(name))

    def restore_node(self, name: str) -> None:
        self.call(lambda: self.cluster.restore_node(name))

    def stall_node(self, name: str) -> None:
        """The node stays Ready, but new pods there wait in ContainerCreating forever."""
        self.call(lambda: self.cluster.stall_node(name))

    def unstall_node(self, name: str) -> None:
        self.call(lambda: self.cluster.stall_node(name, stalled=False))

    def cordon_node(self, name: str) -> None:
        self.call(lambda: self.cluster.cordon_node(name))

    def uncordon_node(self, name: str) -> None:
        self.call(lambda: self.cluster.cordon_node(name, unschedulable=False))

    def drain_node(self, name: str) -> dict[str, list[str]]:
        return self.call(lambda: self.cluster.drain_node(name))

    def kill_pod(self, namespace: str, name: str) -> None:
        self.call(lambda: self.cluster.kill_pod(namespace, name))

    def set_image_behavior(self, image: str, pull_seconds: float | None = None, start_seconds: float | None = None,
                           ready_seconds: float | None = None, fail_pull: bool = False, crash: bool = False,
                           unready_after_seconds: float | None = None, stop_seconds: float | None = None) -> None:
        """`stop_seconds`: time from SIGTERM to exit (scaled by the factor); None keeps the
        cluster default, a negative value makes the image ignore SIGTERM until SIGKILL."""
        self.call(lambda: self.cluster.set_image_behavior(
            image, pull_seconds=pull_seconds, start_seconds=start_seconds, ready_seconds=ready_seconds,
            fail_pull=fail_pull, crash=crash, unready_after_seconds=unready_after_seconds,
            stop_seconds=stop_seconds))

    def set_default_timing(self, pull_seconds: float | None = None, start_seconds: float | None = None,
                           ready_seconds: float | None = None, factor: float | None = None,
                           stop_seconds: float | None = None) -> None:
        """None leaves a setting as it is; `stop_seconds` < 0 makes every image ignore SIGTERM."""
        self.call(lambda: self.cluster.set_default_timing(
            pull_seconds=pull_seconds, start_seconds=start_seconds, ready_seconds=ready_seconds, factor=factor,
            stop_seconds=stop_seconds))

    def inject_faults(self, error_rate: float = 0.0, codes: tuple[int, ...] = (500, 429, 409),
                      latency_seconds: float = 0.0, watch_cut_seconds: float | None = None) -> None:
        self.call(lambda: self.cluster.faults.configure(error_rate, codes, latency_seconds, watch_cut_seconds))

    def clear_faults(self) -> None:
        self.inject_faults()

    def counters(self) -> dict[str, Any]:
        """{"requests": {(verb, resource): n}, "by_object": {(verb, resource, "ns/name"): n},
        "total": n, "faults_injected": {code: n}, "watches_open": n}; `by_object` counts only the
        requests that name one object (in the path, or the body of a create)."""
        return self.call(self.cluster.faults.counters)

    def reset_counters(self) -> None:
        self.call(self.cluster.faults.reset_counters)

    # ---- simulated inference traffic (kubesim.engines) ---------------------------------------

    @property
    def metrics_url(self) -> str:
        """Where Prometheus scrapes the simulated engines' series."""
        return f"{self.url}/metrics"

    def set_request_rate(self, requests_per_second: float | None, namespace: str | None = None,
                         inferenceservice: str | None = None) -> None:
        """Requests per second every InferenceService receives (default 20), or with both names
        the rate of one InferenceService (None: back to the cluster-wide rate)."""
        self.call(lambda: self.cluster.traffic.set_rate(requests_per_second, namespace, inferenceservice))

    def set_engine_behavior(self, image: str, error_ratio: float | None = None,
                            ttft_seconds: float | None = None) -> None:
        """How the engine of `image` (exact, its repository, or a prefix ending in `*`) answers:
        the share of requests failed with 500 (default 0.01) and the mean time to first token
        (default 0.2 s). A setting left None takes its default; with neither, the image is back
        to the defaults."""
        self.call(lambda: self.cluster.traffic.set_behavior(image, error_ratio, ttft_seconds))

    def traffic(self) -> dict[str, Any]:
        """What `GET /sim/traffic` answers: the settings and, per component, the serving pods."""
        return self.call(self.cluster.traffic.describe)

    def metrics_text(self) -> str:
        """What `GET /metrics` answers, read without HTTP."""
        from kubesim.engines.exposition import render

        return self.call(lambda: render(self.cluster.traffic.series()))

    # ---- the inference gateway (kubesim.gateway) ---------------------------------------------

    @property
    def gateway_url(self) -> str | None:
        """`http://127.0.0.1:<gateway port>` when the gateway runs; an InferenceService's endpoint
        is `<gateway_url>/<namespace>/<name>`."""
        return self.cluster.gateway_url

    def set_gateway_fault(self, namespace: str, name: str, target: str, **settings: Any) -> None:
        """Bend `target`'s ("probe" or "capacity") answers for one InferenceService: status, body,
        delaySeconds, close, servable, observedAt."""
        self.call(lambda: self.cluster.set_gateway_fault(namespace, name, target, **settings))

    def clear_gateway_fault(self, namespace: str, name: str, target: str) -> bool:
        return self.call(lambda: self.cluster.clear_gateway_fault(namespace, name, target))

    def compact(self) -> None:
        """Drop the watch history, so watches resuming from an older resourceVersion get 410 Gone."""
        self.call(self.cluster.store.compact)

    def save(self) -> None:
        self.call(self.cluster.save)

    def objects(self, group: str, plural: str, namespace: str | None = None) -> list[dict[str, Any]]:
        """A snapshot of stored objects, read without going through the API (no counters)."""
        import json

        return self.call(lambda: json.loads(json.dumps(self.cluster.store.list((group, plural), namespace))))
