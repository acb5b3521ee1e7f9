"""Fixtures of the worker-process tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from temporalio.client import Client

from kubesim.handle import KubeSim
from tests.workers.controller_cluster import Cluster, running_cluster


@pytest.fixture
async def cluster(dev_client: Client, kubesim: KubeSim, task_queue: str) -> AsyncIterator[Cluster]:
    """The controller tests' cluster (`tests.workers.controller_cluster`); a module's own
    `cluster` fixture (test_webhook's) takes its place there."""
    async with running_cluster(dev_client, kubesim, task_queue) as found:
        yield found
