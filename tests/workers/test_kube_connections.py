"""The worker's Kubernetes client keeps a connection for every activity thread: calls that run
at once all give their connections back to the pool, and the next ones reuse them."""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import kubernetes
import pytest

from kubesim.handle import KubeSim
from workers.config import ACTIVITY_THREADS, KubeSettings, kube_api_client


def test_calls_on_every_activity_thread_at_once_keep_their_connections(
    kubesim: KubeSim, caplog: pytest.LogCaptureFixture
) -> None:
    api_client = kube_api_client(KubeSettings(kubeconfig=Path(kubesim.kubeconfig_path)))
    core = kubernetes.client.CoreV1Api(api_client)
    # Each answer takes 0.3 s, so every thread holds a connection at the same moment.
    kubesim.inject_faults(latency_seconds=0.3)
    barrier = threading.Barrier(ACTIVITY_THREADS)

    def call(_: int) -> None:
        barrier.wait(timeout=30)
        core.list_namespaced_pod("default")

    def all_at_once() -> None:
        with ThreadPoolExecutor(ACTIVITY_THREADS) as threads:
            list(threads.map(call, range(ACTIVITY_THREADS)))

    with caplog.at_level(logging.WARNING, logger="urllib3.connectionpool"):
        all_at_once()
        pool = api_client.rest_client.pool_manager.connection_from_url(kubesim.url)
        opened = pool.num_connections
        all_at_once()
    api_client.close()  # type: ignore[no-untyped-call]

    assert opened == ACTIVITY_THREADS, "the calls did not all run at once: the test proves nothing"
    discarded = [record.getMessage() for record in caplog.records if "pool is full" in record.getMessage()]
    assert discarded == []
    assert pool.num_connections == ACTIVITY_THREADS, "the second round opened new connections"
