"""The local stack's Prometheus: the real server (Debian's `prometheus` package), run as one more
child of `make up` on 127.0.0.1, scraping kubesim's simulated engines and the worker's metrics
(the SDK's and the product's), evaluating the product's alert rules (`ALERT_RULES`), with its
database under the stack's data directory.

This module only finds the binary and writes what it runs with (configuration file and
command line); `workers/stack.py` supervises it. Tests start their own Prometheus with the
same two functions.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

import yaml

INSTALL_HINT = "apt-get install -y --no-install-recommends prometheus"
"""How to get the binary on Debian and Ubuntu; the package's service need not run."""

READY_PATTERN = r"Server is ready to receive web requests"
"""The line Prometheus logs once it answers queries."""

SCRAPE_INTERVAL_SECONDS = 5.0
"""Often enough that `rate(...[30s])` has samples a few seconds after a rollout step starts,
and rare enough that a two-core machine does not notice."""

RETENTION = "1d"
"""The stack keeps a day: canary analysis looks minutes back (OME's bundled Prometheus keeps
about 30 minutes), and `.data/` should not grow without bound across runs."""


ALERT_RULES = Path(__file__).resolve().parents[1] / "deploy" / "prometheus" / "alerts.yml"
"""The product's alert rules (unit-tested with `promtool test rules`), evaluated by the stack's
Prometheus; docker-compose.yml mounts the same file."""


def prometheus_binary() -> Path | None:
    """The `prometheus` on PATH, or None when it is not installed."""
    found = shutil.which("prometheus")
    return Path(found) if found else None


def scrape_config(
    targets: Mapping[str, str | Sequence[str]],
    interval_seconds: float = SCRAPE_INTERVAL_SECONDS,
    rule_files: Sequence[Path] = (),
) -> dict[str, object]:
    """A Prometheus configuration scraping `/metrics` of each target, job name -> host:port (or
    several, the replicas of one job), and evaluating the alert rules of `rule_files` (absolute
    paths)."""
    interval = f"{interval_seconds:g}s"
    config: dict[str, object] = {"global": {"scrape_interval": interval, "evaluation_interval": interval}}
    if rule_files:
        config["rule_files"] = [str(path) for path in rule_files]
    config["scrape_configs"] = [
        {
            "job_name": job,
            "metrics_path": "/metrics",
            "static_configs": [{"targets": [address] if isinstance(address, str) else list(address)}],
        }
        for job, address in targets.items()
    ]
    return config


def write_config(
    path: Path,
    targets: Mapping[str, str | Sequence[str]],
    interval_seconds: float = SCRAPE_INTERVAL_SECONDS,
    rule_files: Sequence[Path] = (),
) -> Path:
    """Write the configuration (rewritten on every start, so it follows the ports in use)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    header = "# Written by omeflow's `make up` on every start (workers/prometheus.py); edits are lost.\n"
    path.write_text(header + yaml.safe_dump(scrape_config(targets, interval_seconds, rule_files), sort_keys=False))
    return path


def prometheus_argv(
    binary: Path, config_file: Path, data_dir: Path, port: int, retention: str = RETENTION
) -> list[str]:
    """The command line of a Prometheus answering on 127.0.0.1:`port` only."""
    return [
        str(binary),
        f"--config.file={config_file}",
        f"--storage.tsdb.path={data_dir}",
        f"--storage.tsdb.retention.time={retention}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]
