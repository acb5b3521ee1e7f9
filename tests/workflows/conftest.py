"""Fixtures of the workflow tests.

`harness`: a worker on the test's own task queue running the Instance workflow against the
in-memory cluster (`FakeCluster`), on the session's time-skipping server. A module that
needs another cluster (kubesim) defines its own `harness`, which takes precedence there.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from tests.fixtures.temporal import register_search_attributes
from tests.workflows.instance_fake_cluster import FakeCluster
from tests.workflows.instance_harness import Harness
from workers.worker import build_worker


@pytest_asyncio.fixture(loop_scope="session")
async def harness(workflow_env: WorkflowEnvironment, task_queue: str) -> AsyncIterator[Harness]:
    await register_search_attributes(workflow_env)
    cluster = FakeCluster(client=workflow_env.client)
    async with build_worker(workflow_env.client, task_queue, None, activities=cluster.activities()):
        yield Harness(workflow_env, cluster, task_queue)
