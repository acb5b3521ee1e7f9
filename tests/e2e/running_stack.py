"""Run the local stack (`python -m workers.stack`, what `make up` runs) for end-to-end tests.

The stack runs as a user runs it: a separate process tree (Temporal dev server, kubesim,
Prometheus when installed, worker, watcher) on free ports with its own data directory, driven
through the venv's `temporal` CLI.

    stack = RunningStack(tmp_path / "data", tmp_path / "stack.log")
    stack.start()
    stack.temporal("workflow", "list")
    stack.stop()
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from temporalio.client import Client

from workers.client import connect
from workers.config import ENV_PREFIX, TemporalSettings
from workers.stack import READY_BANNER

REPO_ROOT = Path(__file__).resolve().parents[2]
TEMPORAL_CLI = Path(sys.prefix) / "bin" / "temporal"

START_WITHIN = 150.0
"""Seconds for the whole stack to come up: four processes on a shared two-core machine."""

STOP_WITHIN = 120.0
"""Seconds for an orderly stop: the worker alone may take its 30 s graceful shutdown."""


EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def ephemeral_range() -> tuple[int, int]:
    """The ports the kernel gives the local end of outgoing connections (Linux: 32768-60999 by
    default), read from `EPHEMERAL_RANGE_FILE`."""
    try:
        low, high = (int(part) for part in EPHEMERAL_RANGE_FILE.read_text().split())
    except (OSError, ValueError):
        return 32768, 60999
    return low, high


def free_ports(count: int) -> list[int]:
    """Distinct ports free on 127.0.0.1 right now (held open together so they differ), outside
    the kernel's ephemeral range. The stack's servers bind theirs seconds later, and an outgoing
    connection may be given such a port meanwhile: once in CI a worker's or a watch's connection
    held the second controller's metrics port, which then crash-looped on `address already in
    use` until the stack stopped. Ports outside that range are never given to a connection."""
    low, high = ephemeral_range()
    outside = [port for port in range(10000, 65536) if not low <= port <= high]
    if len(outside) < 1000:  # a machine that hands out nearly every port: let the kernel choose
        return _kernel_chosen_ports(count)
    sockets: list[socket.socket] = []
    try:
        for port in random.sample(outside, len(outside)):
            probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                probe.close()
                continue
            sockets.append(probe)
            if len(sockets) == count:
                return [held.getsockname()[1] for held in sockets]
    finally:
        for held in sockets:
            held.close()
    raise AssertionError(f"fewer than {count} free ports on 127.0.0.1 outside {low}-{high}")


def _kernel_chosen_ports(count: int) -> list[int]:
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for probe in sockets:
            probe.bind(("127.0.0.1", 0))
        return [probe.getsockname()[1] for probe in sockets]
    finally:
        for probe in sockets:
            probe.close()


def free_port_run(length: int, avoid: frozenset[int] = frozenset()) -> int:
    """The first of `length` consecutive ports all free on 127.0.0.1 right now, none in `avoid`
    nor in the kernel's ephemeral range (`free_ports`)."""
    low, high = ephemeral_range()
    for _ in range(200):
        (first,) = free_ports(1)
        run = set(range(first, first + length))
        if avoid & run or first + length > 65536 or any(low <= port <= high for port in run):
            continue
        probes = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(length - 1)]
        try:
            for offset, probe in enumerate(probes, start=1):
                probe.bind(("127.0.0.1", first + offset))
            return first
        except OSError:
            continue
        finally:
            for probe in probes:
                probe.close()
    raise AssertionError(f"no {length} consecutive free ports on 127.0.0.1 after 200 tries")


class RunningStack:
    """One `python -m workers.stack` process and helpers to talk to what it runs."""

    def __init__(
        self, data_dir: Path, log_file: Path, *, kubeconfig: Path | None = None, env: dict[str, str] | None = None
    ) -> None:
        self.data_dir = data_dir
        self.extra_env = dict(env or {})
        """`OME_*` settings of this stack (`OME_STACK__WORKLOAD_CLUSTERS`, ...)."""
        self.log_file = log_file
        self.kubeconfig_override = kubeconfig
        ports = free_ports(6)
        (
            self.frontend_port,
            self.ui_port,
            self.kubesim_port,
            self.prometheus_port,
            self.worker_metrics_port,
            self.webhook_port,
        ) = ports
        # The stack's second controller replica serves its metrics on the port after the first.
        self.controller_metrics_port = free_port_run(2, avoid=frozenset(ports))
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.frontend_port}"

    @property
    def ui_url(self) -> str:
        return f"http://127.0.0.1:{self.ui_port}"

    @property
    def prometheus_url(self) -> str:
        """Where the stack's Prometheus answers (when `prometheus` is installed)."""
        return f"http://127.0.0.1:{self.prometheus_port}"

    @property
    def kubeconfig(self) -> Path:
        """The kubeconfig the worker and watcher use (kubesim's, unless one was given)."""
        return self.kubeconfig_override or self.data_dir / "kubeconfig"

    def log(self) -> str:
        return self.log_file.read_text(errors="replace") if self.log_file.exists() else ""

    def start(self, within: float = START_WITHIN) -> None:
        """Start the stack and wait for its ready banner; fail with its output otherwise."""
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        # Settings the developer's shell may carry must not leak into the test's stack.
        for name in [name for name in env if name.startswith(ENV_PREFIX)]:
            del env[name]
        if self.kubeconfig_override is not None:
            env[f"{ENV_PREFIX}KUBE__KUBECONFIG"] = str(self.kubeconfig_override)
        env.update(self.extra_env)
        with self.log_file.open("ab") as log:
            log.write(b"\n=== starting the stack\n")
            log.flush()
            self._process = subprocess.Popen(
                [
                    sys.executable, "-m", "workers.stack",
                    "--data-dir", str(self.data_dir),
                    "--frontend-port", str(self.frontend_port),
                    "--ui-port", str(self.ui_port),
                    "--kubesim-port", str(self.kubesim_port),
                    "--prometheus-port", str(self.prometheus_port),
                    "--worker-metrics-port", str(self.worker_metrics_port),
                    "--controller-metrics-port", str(self.controller_metrics_port),
                    "--webhook-port", str(self.webhook_port),
                ],
                cwd=REPO_ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                process_group=0,
            )  # fmt: skip
        started_log = len(self.log())
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if READY_BANNER in self.log()[started_log:]:
                return
            if self._process.poll() is not None:
                raise AssertionError(
                    f"the stack exited with code {self._process.returncode} before it was ready:\n{self.log()}"
                )
            time.sleep(0.2)
        self.stop()
        raise AssertionError(f"the stack was not ready within {within:.0f} s:\n{self.log()}")

    def stop(self, within: float = STOP_WITHIN) -> int:
        """Ctrl-C the stack, as a user does, and wait for its orderly stop; returns its exit code."""
        process = self._process
        if process is None or process.poll() is not None:
            return process.returncode if process is not None else 0
        process.send_signal(signal.SIGINT)
        try:
            return process.wait(timeout=within)
        except subprocess.TimeoutExpired:
            # A second Ctrl-C makes the stack kill its children; then it exits.
            process.send_signal(signal.SIGINT)
            process.wait(timeout=30)
            raise AssertionError(f"the stack did not stop within {within:.0f} s:\n{self.log()}") from None

    def wait_exit(self, within: float = STOP_WITHIN) -> int:
        """Wait for the stack to exit on its own (after a child failed); returns its exit code."""
        assert self._process is not None, "the stack was never started"
        return self._process.wait(timeout=within)

    def temporal(
        self, *args: str, check: bool = True, within: float = 60.0
    ) -> subprocess.CompletedProcess[str]:
        """Run the venv's `temporal` CLI against this stack, as the README shows."""
        result = subprocess.run(
            [str(TEMPORAL_CLI), *args, "--address", self.address],
            capture_output=True,
            text=True,
            timeout=within,
            cwd=REPO_ROOT,
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"`temporal {' '.join(args)}` exited {result.returncode}\nstdout:\n{result.stdout}\n"
                f"stderr:\n{result.stderr}"
            )
        return result

    def temporal_json(self, *args: str) -> Any:
        """`temporal ... --output json`, parsed."""
        return json.loads(self.temporal(*args, "--output", "json").stdout)

    async def client(self) -> Client:
        """A Temporal client built by the product's factory, pointed at this stack."""
        return await connect(TemporalSettings(address=self.address))


@contextlib.contextmanager
def stack_running(root: Path, env: dict[str, str] | None = None) -> Iterator[RunningStack]:
    """A stack on free ports with a fresh data directory under `root`, stopped (Ctrl-C) after,
    which must then exit 0: what the e2e fixtures yield."""
    running = RunningStack(root / "data", root / "stack.log", env=env)
    running.start()
    try:
        yield running
    finally:
        code = running.stop()
    assert code == 0, f"the stack exited with code {code} on Ctrl-C:\n{running.log()}"
