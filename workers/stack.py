"""The local stack behind `make up`: Temporal dev server, kubesim and its admission webhook,
Prometheus, worker, watcher and controller.

    python -m workers.stack [--data-dir DIR] [--frontend-port N] [--ui-port N] [--kubesim-port N]
                            [--prometheus-port N] [--worker-metrics-port N]
                            [--controller-metrics-port N] [--webhook-port N]

Starts each process in its own process group and waits until it is ready, prints where the UI
is and what to try with the `temporal` CLI, then runs until Ctrl-C (or SIGTERM) and stops them
in reverse order: controllers, watchers (two of each, one leading: `workers.leader`), worker (in-flight activities finish), Prometheus, webhook,
kubesim (saves its objects), Temporal (flushes its database). All state lives in the data directory, so the next
run resumes it: running workflows keep running and kubesim's objects are still there.

kubesim starts only when no kubeconfig is configured (`OME_KUBE__KUBECONFIG`), and with it
the validating admission webhook (`workers.webhook`: its certificate under `<data dir>/webhook/`,
its ValidatingWebhookConfiguration pointing at 127.0.0.1; a real API server could not reach it); and the dev
server only while `OME_STACK__DEV_SERVER` is true; otherwise the worker and watcher reach the
configured cluster and Temporal service. Prometheus starts when the `prometheus` binary is
installed and no `OME_PROMETHEUS__URL` is configured: it scrapes kubesim's simulated engines,
the worker's SDK and product metrics and the controller's state gauges, and the worker gets its URL for canary analysis. Without it the
banner says how to install it, and the rest of the stack runs as before.

With `OME_STACK__WORKLOAD_CLUSTERS` (`2`, or names), one more kubesim runs per workload cluster,
as a remote cluster would: HTTPS with its own CA, a bearer token made at each start, and an
inference gateway port, each with its state file and kubeconfig under `<data dir>/clusters/<name>/`.
The stack registers each on the control plane (kubeconfig Secret `ome/wlc-<name>-kubeconfig`,
WorkloadCluster `<name>`; `workers.workload_clusters`), creates the global Gateway
`ome/global-gateway` for the publisher, and prints where each cluster and its gateway are. The
stack's Prometheus scrapes the control plane's kubesim only.

This module imports no workflow or activity code: a broken one shows up as the worker's failed
start, with its output, rather than as a traceback of the runner.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import secrets
import signal
import socket
import sys
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from workers.client import exit_process
from workers.config import (
    ENV_PREFIX,
    KubeSettings,
    Settings,
    StackSettings,
    TemporalSettings,
    kube_api_client,
)
from workers.devserver import dev_server_argv, ensure_search_attributes, temporal_binary, wait_until_serving
from workers.leader import CONTROLLER_LEASE, WATCHER_LEASE
from workers.processes import (
    RESTART_WINDOW_SECONDS,
    RESTARTS_WITHIN_WINDOW,
    Child,
    ChildFailed,
    first_exit,
    restart_delay,
)
from workers.prometheus import (
    ALERT_RULES,
    INSTALL_HINT,
    READY_PATTERN,
    SCRAPE_INTERVAL_SECONDS,
    prometheus_argv,
    prometheus_binary,
    write_config,
)
from workflows.names import INFERENCE_SERVICE, isvc_workflow_id

ROUTING_DEFAULTS = {
    "GLOBAL_GATEWAY": "ome/global-gateway",
    "BACKEND_PORT": "80",
    "GLOBAL_HOST_TEMPLATE": "{{ .Name }}.{{ .Namespace }}.global.example.com",
}
"""With workload clusters, what the worker publishes to (`OME_ROUTING__*`, unless set): the
global Gateway `workers.workload_clusters` creates, whose listener takes `*.global.example.com`."""

READY_BANNER = "Local stack is up."
"""First line of the banner; tests and scripts wait for it."""

STARTUP_TIMEOUT = 90.0
"""Seconds each process gets to become ready. A cold dev server on a busy two-core machine
takes ~10 s; the margin absorbs CI load without hiding a real hang for long."""

# The example the banner and the README walk through (deploy/examples/README.md).
EXAMPLE_RUNTIME = "deploy/examples/srt-qwen3-0-6b.yaml"
EXAMPLE_SPEC = "deploy/examples/qwen3-0-6b.json"
KUBECTL_EXAMPLE = "deploy/examples/qwen3-chat.yaml"
EXAMPLE_NAMESPACE = "spread-demo"
EXAMPLE_NAME = "qwen3-0-6b"

KUBECONFIG_FILENAME = "kubeconfig"
KUBESIM_STATE_FILENAME = "kubesim.json"
PROMETHEUS_DIRNAME = "prometheus"
CLUSTERS_DIRNAME = "clusters"
WEBHOOK_DIRNAME = "webhook"
KUBESIM_READY = re.compile(r"kubesim listening on (\S+) \(kubeconfig: .*?(?:, gateway: (\S+))?\)$")
"""The line kubesim prints once serving: its URL and, with a gateway port, the gateway's URL."""


@dataclass(frozen=True)
class WorkloadCluster:
    """One simulated workload cluster the stack runs: where it and its gateway are."""

    name: str
    url: str
    gateway_url: str
    kubeconfig: Path


def _check_port_free(port: int, field: str) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # As servers do: connections of the previous run lingering in TIME_WAIT do not count,
        # only a process listening now does.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as error:
            raise ChildFailed(
                f"127.0.0.1:{port} is already in use ({error.strerror}): another `make up` or Temporal "
                f"server may be running; stop it, or set {ENV_PREFIX}STACK__{field.upper()} to a free port"
            ) from error


class Stack:
    """The stack's children, started in order and stopped in reverse."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.stack: StackSettings = settings.stack
        self.children: list[Child] = []
        self.stop_requested = asyncio.Event()
        self._signals = 0
        self.temporal_address = (
            f"127.0.0.1:{self.stack.frontend_port}" if self.stack.dev_server else settings.temporal.address
        )
        self.kubeconfig = settings.kube.kubeconfig or self.stack.data_dir / KUBECONFIG_FILENAME
        self.kubesim_url: str | None = None
        self.workload_clusters: list[WorkloadCluster] = []
        self.global_gateway: str | None = None
        # A configured Prometheus is used as it is; otherwise the stack's own, once it runs.
        self.prometheus_url: str | None = settings.prometheus.url
        self.worker_metrics_address: str | None = settings.prometheus.worker_metrics_address
        self.controller_metrics_address: str | None = settings.prometheus.controller_metrics_address
        self.webhook_url: str | None = None
        self.webhook_cert_dir: Path | None = None

    def on_signal(self) -> None:
        """First Ctrl-C stops in order; a second one kills whatever is still running."""
        self._signals += 1
        if self._signals == 1:
            print("\nstopping the stack (Ctrl-C again to kill it at once)", flush=True)
            self.stop_requested.set()
            return
        for child in self.children:
            child.signal(signal.SIGKILL)

    def _child_env(self, replica: int = 0) -> dict[str, str]:
        """The environment of a product process; `replica` numbers the watchers and controllers
        from 0 (the Nth controller serves its gauges N - 1 ports up)."""
        env = dict(os.environ)
        env["PYTHONUNBUFFERED"] = "1"
        env[f"{ENV_PREFIX}TEMPORAL__ADDRESS"] = self.temporal_address
        env[f"{ENV_PREFIX}KUBE__KUBECONFIG"] = str(self.kubeconfig.resolve())
        if self.prometheus_url:
            env[f"{ENV_PREFIX}PROMETHEUS__URL"] = self.prometheus_url
        if self.worker_metrics_address:
            env[f"{ENV_PREFIX}PROMETHEUS__WORKER_METRICS_ADDRESS"] = self.worker_metrics_address
        if self.controller_metrics_address:
            env[f"{ENV_PREFIX}PROMETHEUS__CONTROLLER_METRICS_ADDRESS"] = _shifted(self.controller_metrics_address, replica)
        if self.workload_clusters:
            # The TrafficMaps publish to the global Gateway this stack created, unless told otherwise.
            for name, value in ROUTING_DEFAULTS.items():
                env.setdefault(f"{ENV_PREFIX}ROUTING__{name}", value)
        return env

    async def _launch(self, child: Child) -> Child:
        self.children.append(child)
        await child.start()
        return child

    async def start_all(self) -> None:
        """Start each process once the one it needs is ready."""
        self.stack.data_dir.mkdir(parents=True, exist_ok=True)
        if self.stack.dev_server:
            await self._start_temporal()
        if self.settings.kube.kubeconfig is None:
            await self._start_kubesim()
            # Early: its configuration persists in kubesim's state, and refuses InferenceService
            # writes (failurePolicy Fail) until the webhook answers again.
            await self._start_webhook()
        if self.stack.workload_cluster_names:
            await self._start_workload_clusters()
        if self.settings.prometheus.url is None and prometheus_binary() is not None:
            await self._start_prometheus()
        await self._start_worker_and_watcher()

    async def _start_temporal(self) -> None:
        _check_port_free(self.stack.frontend_port, "frontend_port")
        _check_port_free(self.stack.ui_port, "ui_port")
        namespace = self.settings.temporal.namespace
        temporal = await self._launch(
            Child(
                "temporal",
                dev_server_argv(self.stack.data_dir, self.stack.frontend_port, self.stack.ui_port, namespace),
                stop_hint="flushes its database",
            )
        )
        client = await wait_until_serving(
            temporal, TemporalSettings(address=self.temporal_address, namespace=namespace), STARTUP_TIMEOUT
        )
        added = await ensure_search_attributes(client)
        if added:
            print(f"registered search attributes missing from the database: {', '.join(added)}", flush=True)

    async def _kubesim(
        self, name: str, port: int, kubeconfig: Path, state_file: Path, *extra: str
    ) -> re.Match[str]:
        """Start one kubesim and wait until it serves; the match of its `KUBESIM_READY` line."""
        kubesim = await self._launch(
            Child(
                name,
                [
                    sys.executable,
                    "-m",
                    "kubesim",
                    "--port",
                    str(port),
                    "--kubeconfig",
                    str(kubeconfig),
                    "--state-file",
                    str(state_file),
                    "--topology",
                    self.stack.kubesim_topology,
                    "--crds",
                    "product",
                    *extra,
                ],  # fmt: skip
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                ready_pattern=KUBESIM_READY.pattern,
                stop_hint=f"saves its objects to {state_file}",
            )
        )
        await kubesim.wait_ready(STARTUP_TIMEOUT, "its API server to listen")
        assert kubesim.ready_match is not None
        return kubesim.ready_match

    async def _start_kubesim(self) -> None:
        _check_port_free(self.stack.kubesim_port, "kubesim_port")
        state_file = self.stack.data_dir / KUBESIM_STATE_FILENAME
        ready = await self._kubesim("kubesim", self.stack.kubesim_port, self.kubeconfig, state_file)
        self.kubesim_url = ready.group(1)

    async def _start_workload_cluster(self, name: str) -> WorkloadCluster:
        home = self.stack.data_dir / CLUSTERS_DIRNAME / name
        kubeconfig = home / KUBECONFIG_FILENAME
        # A fresh token each start: the kubeconfig Secret the stack writes next carries it.
        ready = await self._kubesim(
            f"kubesim-{name}",
            0,
            kubeconfig,
            home / KUBESIM_STATE_FILENAME,
            "--tls",
            # `--token=...`: a URL-safe token may start with "-", which argparse would take for a flag.
            f"--token={secrets.token_urlsafe(32)}",
            "--gateway-port",
            "0",
        )
        return WorkloadCluster(name, ready.group(1), ready.group(2), kubeconfig)

    async def _start_workload_clusters(self) -> None:
        """Start a kubesim per workload cluster, then register them all on the control plane."""
        self.workload_clusters = list(
            await asyncio.gather(
                *(self._start_workload_cluster(n) for n in self.stack.workload_cluster_names)
            )
        )
        await asyncio.to_thread(self._register_workload_clusters)

    def _register_workload_clusters(self) -> None:
        from workers import workload_clusters

        api_client = kube_api_client(
            KubeSettings(kubeconfig=self.kubeconfig, context=self.settings.kube.context)
        )
        try:
            for cluster in self.workload_clusters:
                workload_clusters.register(api_client, cluster.name, cluster.kubeconfig.read_text())
            gateway = workload_clusters.ensure_global_gateway(api_client)
            self.global_gateway = f"{gateway} (listener {workload_clusters.GLOBAL_HOSTNAME}:80)"
        finally:
            api_client.close()  # type: ignore[no-untyped-call]

    async def _start_prometheus(self) -> None:
        binary = prometheus_binary()
        assert binary is not None
        port = self.stack.prometheus_port
        _check_port_free(port, "prometheus_port")
        if self.worker_metrics_address is None:
            _check_port_free(self.stack.worker_metrics_port, "worker_metrics_port")
            self.worker_metrics_address = f"127.0.0.1:{self.stack.worker_metrics_port}"
        if self.controller_metrics_address is None:
            _check_port_free(self.stack.controller_metrics_port, "controller_metrics_port")
            self.controller_metrics_address = f"127.0.0.1:{self.stack.controller_metrics_port}"
        # The state gauges (Instances by phase, holds, overdue drains): every controller is
        # scraped, one job with an instance each, and only the one leading serves samples.
        controllers = [_scrape_address(self.controller_metrics_address)]
        for replica in range(1, self.stack.replicas):
            address = _shifted(self.controller_metrics_address, replica)
            _check_port_free(int(address.rpartition(":")[2]), "controller_metrics_port")
            controllers.append(_scrape_address(address))
        targets: dict[str, str | list[str]] = {
            "prometheus": f"127.0.0.1:{port}",
            "worker": _scrape_address(self.worker_metrics_address),
            "controller": controllers,
        }
        if self.kubesim_url:
            targets["kubesim"] = urllib.parse.urlsplit(self.kubesim_url).netloc
        home = self.stack.data_dir / PROMETHEUS_DIRNAME
        rules = [ALERT_RULES] if ALERT_RULES.is_file() else []
        config = write_config(home / "prometheus.yml", targets, rule_files=rules)
        prometheus = await self._launch(
            Child(
                "prometheus",
                prometheus_argv(binary, config.resolve(), (home / "data").resolve(), port),
                env=dict(os.environ),
                ready_pattern=READY_PATTERN,
                stop_hint="flushes its database",
            )
        )
        await prometheus.wait_ready(STARTUP_TIMEOUT, "it to answer queries")
        self.prometheus_url = f"http://127.0.0.1:{port}"

    async def _start_worker_and_watcher(self) -> None:
        worker = await self._launch(
            Child(
                "worker",
                [sys.executable, "-m", "workers"],
                env=self._child_env(),
                ready_pattern=r"polling task queue",
                stop_hint="in-flight activities finish first",
            )
        )
        await worker.wait_ready(STARTUP_TIMEOUT, "it to poll the task queue")
        # The watcher signals workflows, so it starts once a worker is there to run them. So does
        # the controller: `kubectl apply` / `annotate` / `delete` become Updates and signals. Two
        # of each (`OME_STACK__REPLICAS`): one leads, the other stands by on its Lease.
        for kind, lease in (("watcher", WATCHER_LEASE), ("controller", CONTROLLER_LEASE)):
            for replica in range(self.stack.replicas):
                name = kind if replica == 0 else f"{kind}-{replica + 1}"
                argv = [sys.executable, "-m", f"workers.{kind}"]
                standby_of = lease if self.stack.replicas > 1 else None
                await self._launch(Child(name, argv, env=self._child_env(replica), standby_of=standby_of))

    async def _start_webhook(self) -> None:
        """The validating admission webhook beside kubesim, with its certificate under the data dir."""
        port = self.stack.webhook_port
        _check_port_free(port, "webhook_port")
        self.webhook_cert_dir = self.stack.data_dir / WEBHOOK_DIRNAME
        webhook = await self._launch(
            Child(
                "webhook",
                [
                    sys.executable, "-m", "workers.webhook",
                    "--port", str(port),
                    "--cert-dir", str(self.webhook_cert_dir),
                ],  # fmt: skip
                env=self._child_env(),
                ready_pattern=r"webhook serving (\S+)",
            )
        )
        await webhook.wait_ready(STARTUP_TIMEOUT, "it to serve HTTPS and register its ValidatingWebhookConfiguration")
        assert webhook.ready_match is not None
        self.webhook_url = webhook.ready_match.group(1)

    async def stop_all(self) -> None:
        for child in reversed(self.children):
            await child.stop(self.stack.stop_timeout_seconds)

    def banner(self) -> str:
        binary = temporal_binary()
        temporal = os.path.relpath(binary) if self._under_cwd(binary) else str(binary)
        if self.temporal_address != "127.0.0.1:7233":
            temporal += f" --address {self.temporal_address}"
        queue = self.settings.temporal.task_queue
        workflow_id = isvc_workflow_id(EXAMPLE_NAMESPACE, EXAMPLE_NAME)
        kube = f"kubesim at {self.kubesim_url} " if self.kubesim_url else ""
        kubectl = f"KUBECONFIG={self.kubeconfig} kubectl"
        lines = [
            READY_BANNER,
            f"  Temporal UI:        http://127.0.0.1:{self.stack.ui_port}" if self.stack.dev_server else "",
            f"  Temporal frontend:  {self.temporal_address} (namespace {self.settings.temporal.namespace}, "
            f"task queue {queue})",
            f"  Kubernetes:         {kube}(kubeconfig {self.kubeconfig})",
            f"  Admission webhook:  {self.webhook_url} (CA in {self.webhook_cert_dir}/ca.crt)"
            if self.webhook_url
            else "",
            "  Controller:         kubectl apply / annotate / delete of InferenceServices drive their workflows",
            *self._workload_cluster_lines(),
            f"  Prometheus:         {self._prometheus_line()}",
            f"  State:              {self.stack.data_dir}/ (kept across runs)",
            "Try the example (README: Driving workflows with the temporal CLI):",
            f"  {kubectl} apply -f {EXAMPLE_RUNTIME}",
            f"  {kubectl} create namespace {EXAMPLE_NAMESPACE}",
            f"  {temporal} workflow execute-update-with-start --update-name apply --update-input-file {EXAMPLE_SPEC} "
            f"--type {INFERENCE_SERVICE} --task-queue {queue} --workflow-id {workflow_id} "
            f"--id-conflict-policy UseExisting --input-file {EXAMPLE_SPEC}",
            f"  {temporal} workflow query --workflow-id {workflow_id} --name status",
            f"  or the kubectl way in (README: Driving it with kubectl): {kubectl} apply -f {KUBECTL_EXAMPLE}",
            f"  {temporal} workflow list",
            "Ctrl-C stops everything; the next `make up` resumes the same state.",
        ]
        return "\n".join(line for line in lines if line)

    def _workload_cluster_lines(self) -> list[str]:
        lines = [
            f"  Workload cluster:   {c.name} at {c.url} (kubeconfig {c.kubeconfig}, gateway {c.gateway_url}, "
            f"WorkloadCluster {c.name})"
            for c in self.workload_clusters
        ]
        if self.global_gateway:
            lines.append(f"  Global gateway:     {self.global_gateway} on the control plane")
        if self.workload_clusters:
            lines.append("  Multi-cluster:      README, Walkthrough: one InferenceService across two workload clusters")
        return lines

    def _prometheus_line(self) -> str:
        if self.settings.prometheus.url:
            return f"{self.settings.prometheus.url} ({ENV_PREFIX}PROMETHEUS__URL)"
        if self.prometheus_url:
            scraped = "kubesim's engines, the worker and the controller" if self.kubesim_url else "the worker and the controller"
            return f"{self.prometheus_url} (scrapes {scraped} every {SCRAPE_INTERVAL_SECONDS:g} s)"
        if prometheus_binary() is None:
            return f"not installed, so canary analysis has no metrics: `{INSTALL_HINT}`, then `make up` again"
        return "not started"

    @staticmethod
    def _under_cwd(path: Path) -> bool:
        return path.resolve().is_relative_to(Path.cwd().resolve())


async def _serve(stack: Stack, stop: asyncio.Task[bool]) -> int:
    """Start the stack, then wait for a stop request or a child's unexpected exit."""
    startup = asyncio.create_task(stack.start_all())
    await asyncio.wait({startup, stop}, return_when=asyncio.FIRST_COMPLETED)
    if not startup.done():
        # Ctrl-C during start-up: abandon the waits; stop_all stops what did start.
        startup.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await startup
        return 0
    startup.result()
    print(stack.banner(), flush=True)
    while True:
        exited = asyncio.create_task(first_exit(stack.children))
        await asyncio.wait({exited, stop}, return_when=asyncio.FIRST_COMPLETED)
        if not exited.done():
            exited.cancel()
            return 0
        child = exited.result()
        delay = restart_delay(child.restarts, time.monotonic()) if child.standby_of else None
        if delay is None:
            crash_loop = f" ({RESTARTS_WITHIN_WINDOW} restarts within {RESTART_WINDOW_SECONDS / 60:g} min: it crash-loops)"
            print(
                f"{child.name} exited unexpectedly with code {child.returncode}"
                f"{crash_loop if child.restarts else ''}; stopping the stack. Its last output:\n{child.tail()}",
                flush=True,
            )
            return 1
        # Another replica takes the Lease over meanwhile, as in a cluster, where the Deployment
        # would restart the pod too.
        others = [c for c in stack.children if c is not child and c.standby_of == child.standby_of]
        meanwhile = (
            "another replica takes over"
            if any(other.returncode is None for other in others)
            else "no other replica runs: it waits for this one to take"
        )
        print(
            f"{child.name} exited unexpectedly with code {child.returncode}; {meanwhile} Lease "
            f"{child.standby_of}; restarting {child.name} in {delay:g} s. Its last output:\n{child.tail()}",
            flush=True,
        )
        # The delay watches the other children too: one that dies meanwhile is handled first.
        running = [c for c in stack.children if c is not child and c.returncode is None]
        other_exit = asyncio.create_task(first_exit(running)) if running else None
        await asyncio.wait({stop} | ({other_exit} if other_exit else set()), timeout=delay, return_when=asyncio.FIRST_COMPLETED)
        if other_exit is not None and not other_exit.done():
            other_exit.cancel()
        if stop.done():
            return 0
        if other_exit is not None and other_exit.done() and not other_exit.cancelled():
            continue  # the next pass takes the other exit first (and this replica after it)
        child.restarts.append(time.monotonic())
        await child.start()
        print(f"{child.name} restarted (pid {child.pid})", flush=True)


async def run_stack(settings: Settings) -> int:
    """Run the stack until a stop signal or a child's unexpected exit; returns the exit code."""
    stack = Stack(settings)
    loop = asyncio.get_running_loop()
    # SIGHUP too: closing the terminal that runs `make up` must stop the stack, not orphan it.
    signals = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    for signum in signals:
        loop.add_signal_handler(signum, stack.on_signal)
    stop = asyncio.create_task(stack.stop_requested.wait())
    try:
        code = await _serve(stack, stop)
    except ChildFailed as error:
        print(f"the stack could not start: {error}", flush=True)
        code = 1
    finally:
        stop.cancel()
        await stack.stop_all()
        for signum in signals:
            loop.remove_signal_handler(signum)
    print(f"stack stopped; state kept in {stack.stack.data_dir}/, `make up` resumes it", flush=True)
    return code


def _shifted(bind_address: str, by: int) -> str:
    """`bind_address` with its port `by` higher: the Nth controller's metrics address."""
    host, _, port = bind_address.rpartition(":")
    return f"{host}:{int(port) + by}"


def _scrape_address(bind_address: str) -> str:
    """Where to reach a server bound to `bind_address` from this machine (0.0.0.0 -> 127.0.0.1)."""
    host, _, port = bind_address.rpartition(":")
    return f"127.0.0.1:{port}" if host in ("", "0.0.0.0", "[::]", "::") else bind_address


def parse_args(argv: list[str] | None, defaults: StackSettings) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m workers.stack", description=__doc__.split("\n\n")[0])
    # Flags override the OME_STACK__* settings, so tests can run stacks side by side.
    for flag, kind, default, meaning in (
        ("--data-dir", Path, defaults.data_dir, "state directory"),
        ("--frontend-port", int, defaults.frontend_port, "Temporal gRPC port on 127.0.0.1"),
        ("--ui-port", int, defaults.ui_port, "Temporal Web UI port on 127.0.0.1"),
        ("--kubesim-port", int, defaults.kubesim_port, "kubesim API port on 127.0.0.1"),
        ("--prometheus-port", int, defaults.prometheus_port, "Prometheus port on 127.0.0.1"),
        ("--worker-metrics-port", int, defaults.worker_metrics_port, "worker SDK metrics port on 127.0.0.1"),
        (
            "--controller-metrics-port", int, defaults.controller_metrics_port,
            "controller state metrics port on 127.0.0.1",
        ),
        ("--webhook-port", int, defaults.webhook_port, "admission webhook port on 127.0.0.1"),
    ):
        variable = f"{ENV_PREFIX}STACK__{flag.removeprefix('--').replace('-', '_').upper()}"
        parser.add_argument(
            flag, type=kind, default=default, help=f"{meaning} (default {default}, {variable})"
        )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    settings = Settings()
    args = parse_args(argv, settings.stack)
    stack_settings = settings.stack.model_copy(
        update={
            "data_dir": args.data_dir,
            "frontend_port": args.frontend_port,
            "ui_port": args.ui_port,
            "kubesim_port": args.kubesim_port,
            "prometheus_port": args.prometheus_port,
            "worker_metrics_port": args.worker_metrics_port,
            "controller_metrics_port": args.controller_metrics_port,
            "webhook_port": args.webhook_port,
        }
    )
    # The runner used a Temporal client while starting the dev server: exit like the worker does.
    exit_process(asyncio.run(run_stack(settings.model_copy(update={"stack": stack_settings}))))


if __name__ == "__main__":
    main()
