"""`workers.clusters.ClusterDirectory` against kubesims: a control plane, and workload
clusters behind HTTPS with their kubeconfig Secrets (reference §16)."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest
from kubernetes.client.exceptions import ApiException

from kubesim.handle import KubeSim
from tests.fixtures.tls import make_ca_and_server_cert
from tests.fixtures.workload import Workload, put_secret, register
from workers.clusters import ClusterDirectory


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def directory(kubesim: KubeSim, clock: Clock) -> Iterator[ClusterDirectory]:
    found = ClusterDirectory(kubesim.api_client(), probe_timeout_seconds=2.0, clock=clock)
    try:
        yield found
    finally:
        found.close()


def ready(directory: ClusterDirectory, name: str) -> tuple[str, str, str]:
    condition = directory.conditions()[name]
    return (condition.status, condition.reason, condition.message)


def wlc(control_plane: Any, name: str) -> dict[str, Any]:
    return kubernetes.client.CustomObjectsApi(control_plane).get_cluster_custom_object(
        "ome.io", "v1beta1", "workloadclusters", name
    )


def test_a_registered_cluster_is_reachable_over_tls_and_its_client_reaches_it(
    kubesim: KubeSim, workload: Workload, directory: ClusterDirectory
) -> None:
    register(kubesim.api_client(), "worker-a", workload.front.kubeconfig_text())
    directory.refresh()
    assert ready(directory, "worker-a") == ("True", "Reachable", "GET /version answered")
    client = directory.clients()["worker-a"]
    kubernetes.client.CoreV1Api(client).create_namespaced_config_map(
        "default", {"metadata": {"name": "landed-here"}}
    )
    workload_core = kubernetes.client.CoreV1Api(workload.sim.api_client())
    assert workload_core.read_namespaced_config_map("landed-here", "default").metadata.name == "landed-here"
    with pytest.raises(ApiException) as missing:
        kubernetes.client.CoreV1Api(kubesim.api_client()).read_namespaced_config_map("landed-here", "default")
    assert missing.value.status == 404


def test_status_is_written_once_with_observed_generation(
    kubesim: KubeSim, workload: Workload, directory: ClusterDirectory, clock: Clock
) -> None:
    register(kubesim.api_client(), "worker-a", workload.front.kubeconfig_text())
    directory.refresh()
    assert directory.write_status() == 1
    (condition,) = wlc(kubesim.api_client(), "worker-a")["status"]["conditions"]
    assert condition["type"] == "Ready" and condition["reason"] == "Reachable"
    assert condition["observedGeneration"] == 1
    assert condition["lastTransitionTime"] == "2026-01-02T03:04:05Z"
    clock.now += timedelta(seconds=15)
    directory.refresh()
    assert directory.write_status() == 0  # nothing changed


def test_probe_failures_retry_within_the_grace_then_fail(
    kubesim: KubeSim, workload: Workload, directory: ClusterDirectory, clock: Clock
) -> None:
    register(kubesim.api_client(), "worker-a", workload.front.kubeconfig_text())
    directory.refresh()
    directory.write_status()
    workload.front.stop()
    clock.now += timedelta(seconds=15)
    directory.refresh()
    status, reason, message = ready(directory, "worker-a")
    assert (status, reason) == ("True", "ProbeFailedRetrying")
    assert "within the 2m0s connection grace" in message
    assert "worker-a" in directory.clients()
    directory.write_status()
    clock.now += timedelta(minutes=2)
    directory.refresh()
    status, reason, message = ready(directory, "worker-a")
    assert (status, reason) == ("False", "ConnectionFailed")
    assert "past the 2m0s connection grace" in message and "failing since 2026-01-02T03:04:20Z" in message
    assert directory.clients() == {}
    directory.write_status()
    (condition,) = wlc(kubesim.api_client(), "worker-a")["status"]["conditions"]
    assert (condition["status"], condition["lastTransitionTime"]) == ("False", "2026-01-02T03:06:20Z")


def test_secret_problems_and_sources_give_their_reasons(
    kubesim: KubeSim, workload: Workload, directory: ClusterDirectory
) -> None:
    control_plane = kubesim.api_client()
    register(control_plane, "no-secret", None)
    register(control_plane, "wrong-key", workload.front.kubeconfig_text(), key="config")
    put_secret(control_plane, "wrong-key-kubeconfig", {"other": "x"})
    register(control_plane, "plain-http", kubesim_plain_kubeconfig(kubesim))
    register(control_plane, "profile", None, source={"clusterProfileRef": {"name": "p"}})
    directory.refresh()
    assert ready(directory, "no-secret")[:2] == ("False", "SecretNotFound")
    assert "Secret ome/no-secret-kubeconfig not found" in ready(directory, "no-secret")[2]
    assert "key 'config' of Secret ome/wrong-key-kubeconfig not found" in ready(directory, "wrong-key")[2]
    status, reason, message = ready(directory, "plain-http")
    assert (status, reason) == ("False", "BadKubeConfig")
    assert message.startswith("kubeconfig in Secret ome/plain-http-kubeconfig: clusters[kubesim].cluster.server")
    assert "is not https://" in message
    assert ready(directory, "profile")[:2] == ("False", "ClusterProfileUnsupported")
    assert directory.clients() == {}


def kubesim_plain_kubeconfig(sim: KubeSim) -> str:
    return Path(sim.kubeconfig_path).read_text()


def test_a_changed_kubeconfig_rebuilds_the_client_and_a_removed_cluster_cleans_up(
    kubesim: KubeSim, workload: Workload, directory: ClusterDirectory
) -> None:
    control_plane = kubesim.api_client()
    register(control_plane, "worker-a", workload.front.kubeconfig_text())
    directory.refresh()
    first = directory.clients()["worker-a"]
    files = Path(first.configuration.ssl_ca_cert)
    assert files.is_file() and files.read_bytes() == workload.front.ca_pem
    directory.refresh()
    assert directory.clients()["worker-a"] is first  # unchanged Secret: same client
    put_secret(control_plane, "worker-a-kubeconfig", {"kubeconfig": workload.front.kubeconfig_text(token="t2")})
    directory.refresh()
    second = directory.clients()["worker-a"]
    # The old client stays usable until what runs on it (the cluster's worker, its watchers)
    # has been stopped after the pass; only then is it closed and its CA file removed.
    assert second is not first and files.is_file()
    assert kubernetes.client.VersionApi(first).get_code().git_version
    directory.release_retired()
    assert not files.exists()
    assert second.configuration.auth_settings()["BearerToken"]["value"] == "Bearer t2"
    kubernetes.client.CustomObjectsApi(control_plane).delete_cluster_custom_object(
        "ome.io", "v1beta1", "workloadclusters", "worker-a"
    )
    directory.refresh()
    assert directory.clients() == {} and directory.conditions() == {}
    directory.release_retired()
    assert not Path(second.configuration.ssl_ca_cert).exists()


def test_no_workload_cluster_crd_means_no_clusters() -> None:
    with KubeSim(topology="zones=1,nodes-per-zone=1,gpus=8", crds=None) as bare:
        found = ClusterDirectory(bare.api_client())
        try:
            found.refresh()
            found.refresh()
            assert found.clients() == {} and found.conditions() == {}
        finally:
            found.close()


def test_a_server_certificate_from_another_ca_is_refused(
    kubesim: KubeSim, workload: Workload, directory: ClusterDirectory
) -> None:
    other_ca, _, _ = make_ca_and_server_cert()
    text = workload.front.kubeconfig_text().replace(
        base64.b64encode(workload.front.ca_pem).decode(), base64.b64encode(other_ca).decode()
    )
    register(kubesim.api_client(), "impostor", text)
    directory.refresh()
    status, reason, message = ready(directory, "impostor")
    assert (status, reason) == ("False", "ConnectionFailed")
    assert "never succeeded" in message and "CERTIFICATE_VERIFY_FAILED" in message


async def test_run_closes_a_replaced_client_only_after_its_consumers_were_told(
    kubesim: KubeSim, workload: Workload, directory: ClusterDirectory
) -> None:
    """`after_pass` (which stops the cluster's worker and watchers) still finds the client it
    replaces open, its CA file in place; the next pass finds it closed."""
    control_plane = kubesim.api_client()
    register(control_plane, "worker-a", workload.front.kubeconfig_text())
    directory.refresh()
    first = directory.clients()["worker-a"]
    ca = Path(first.configuration.ssl_ca_cert)
    put_secret(control_plane, "worker-a-kubeconfig", {"kubeconfig": workload.front.kubeconfig_text(token="t2")})
    seen: list[bool] = []
    stop = asyncio.Event()

    async def after_pass(found: ClusterDirectory) -> None:
        seen.append(await asyncio.to_thread(ca.is_file))
        if len(seen) == 2:
            stop.set()

    directory.refresh_interval_seconds = 0.01
    await asyncio.wait_for(directory.run(stop, after_pass), 30)
    assert seen == [True, False]
