"""`python -m workers` with a setting that cannot work: one line naming the variable and the
fix, exit code 2, no traceback to dig through."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.running_stack import REPO_ROOT, free_ports
from workers.config import ENV_PREFIX

KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:1"}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
users: [{name: u, user: {}}]
"""

CASES = {
    "unreachable-temporal": (
        {"OME_TEMPORAL__ADDRESS": "127.0.0.1:{closed_port}", "OME_KUBE__KUBECONFIG": "{kubeconfig}"},
        "cannot reach Temporal at OME_TEMPORAL__ADDRESS=127.0.0.1:{closed_port}",
    ),
    "key-without-certificate": (
        {"OME_TEMPORAL__TLS_KEY": "/certs/client.key"},
        "OME_TEMPORAL__TLS_KEY is set but OME_TEMPORAL__TLS_CERT is not",
    ),
    "missing-ca-file": (
        {"OME_TEMPORAL__TLS_CA": "{missing}", "OME_KUBE__KUBECONFIG": "{kubeconfig}"},
        "OME_TEMPORAL__TLS_CA={missing} cannot be read",
    ),
    "no-cluster": ({}, "OME_KUBE__KUBECONFIG is not set and this process is not running in a Kubernetes pod"),
    "missing-kubeconfig": (
        {"OME_KUBE__KUBECONFIG": "{missing}"},
        "OME_KUBE__KUBECONFIG={missing} is not a file",
    ),
}


@pytest.mark.parametrize(("settings", "message"), CASES.values(), ids=CASES.keys())
def test_a_bad_setting_stops_the_worker_with_its_name(
    tmp_path: Path, settings: dict[str, str], message: str
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    (closed_port,) = free_ports(1)
    values = {"closed_port": closed_port, "missing": tmp_path / "absent", "kubeconfig": kubeconfig}
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(ENV_PREFIX) and not name.startswith("KUBERNETES_SERVICE_")
    }
    env |= {name: value.format(**values) for name, value in settings.items()}
    result = subprocess.run(
        [sys.executable, "-m", "workers"], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2, result.stderr
    assert message.format(**values) in result.stderr
    assert "Traceback" not in result.stderr


async def test_local_activities_have_their_own_slots_and_threads(workflow_env, task_queue) -> None:
    """Local activities are capped explicitly (not the SDK's 100) and the pool has a thread for
    every regular and every local slot, so local batches cannot starve regular activities."""
    from workers.worker import (
        ACTIVITY_THREADS,
        MAX_CONCURRENT_ACTIVITIES,
        MAX_CONCURRENT_LOCAL_ACTIVITIES,
        build_worker,
    )

    worker = build_worker(workflow_env.client, task_queue, None, activities=[])
    config = worker.config()
    assert config["max_concurrent_local_activities"] == MAX_CONCURRENT_LOCAL_ACTIVITIES < 100
    assert config["max_concurrent_activities"] == MAX_CONCURRENT_ACTIVITIES
    executor = config["activity_executor"]
    assert executor is not None and executor._max_workers == ACTIVITY_THREADS  # type: ignore[attr-defined]
    assert ACTIVITY_THREADS == MAX_CONCURRENT_ACTIVITIES + MAX_CONCURRENT_LOCAL_ACTIVITIES
