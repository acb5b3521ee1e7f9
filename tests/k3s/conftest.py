"""k3s fixtures: a real single-node cluster in Docker, and the local stack pointed at it.

Every test here is marked `k3s` by tests/conftest.py and skipped, with the reason, when no
Docker engine answers; these fixtures therefore run only where Docker does.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.running_stack import RunningStack

K3S_IMAGE = "rancher/k3s:v1.31.4-k3s1"
"""Pinned so a new k3s release cannot change a run's outcome unannounced."""

CRDS_DIR = Path(__file__).resolve().parents[2] / "deploy" / "crds"


@pytest.fixture(scope="session")
def k3s_kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """kubeconfig of a fresh k3s with the product's CRDs applied."""
    import kubernetes.utils
    from testcontainers.community.k3s import K3SContainer

    from workers.config import KubeSettings, kube_api_client

    with K3SContainer(image=K3S_IMAGE) as k3s:
        kubeconfig = tmp_path_factory.mktemp("k3s") / "kubeconfig"
        kubeconfig.write_text(k3s.config_yaml())
        api_client = kube_api_client(KubeSettings(kubeconfig=kubeconfig))
        for crd in sorted(CRDS_DIR.glob("*.yaml")):
            kubernetes.utils.create_from_yaml(api_client, str(crd))
        yield kubeconfig


@pytest.fixture(scope="session")
def k3s_stack(k3s_kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    """The local stack (dev server, worker, watcher; no kubesim) acting on the k3s cluster."""
    root = tmp_path_factory.mktemp("k3s-stack")
    stack = RunningStack(root / "data", root / "stack.log", kubeconfig=k3s_kubeconfig)
    stack.start()
    try:
        yield stack
    finally:
        code = stack.stop()
    assert code == 0, f"the stack exited with code {code} on Ctrl-C:\n{stack.log()}"
