"""A regular Kubernetes activity on a real worker stays alive through a request that takes
longer than its heartbeat timeout (`activities.keep_alive`): the workflows give Kubernetes calls
a heartbeat timeout of 15 s so that a dead worker's call is retried quickly, and a slow API
server must not time out a live one. Real-time dev server: the server enforces the timeout."""

from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor
from uuid import uuid4

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import TimeoutError, TimeoutType
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from activities import keep_alive
from activities.kube import KubeActivities
from kubesim.handle import KubeSim
from tests.fixtures.kubesim import SLOW_API_SECONDS
from tests.workers.slow_call_workflow import SLOW_CALL, SlowCallWorkflow

HEARTBEAT = SLOW_API_SECONDS / 2


async def run_slow_call(dev_server: WorkflowEnvironment, sim: KubeSim) -> bool:
    task_queue = f"keep-alive-{uuid4()}"
    with ThreadPoolExecutor(max_workers=2) as pool:
        async with Worker(
            dev_server.client,
            task_queue=task_queue,
            workflows=[SlowCallWorkflow],
            activities=KubeActivities(sim.api_client()).activities(),
            activity_executor=pool,
        ):
            found: bool = await dev_server.client.execute_workflow(
                SLOW_CALL, HEARTBEAT, id=f"keep-alive-{uuid4()}", task_queue=task_queue
            )
            return found


async def test_a_request_longer_than_the_heartbeat_timeout_completes(
    dev_server: WorkflowEnvironment, slow_kubesim: KubeSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(keep_alive, "BEAT_SECONDS", 0.2)
    assert await run_slow_call(dev_server, slow_kubesim) is True


async def test_without_the_keep_alive_the_same_call_times_out(
    dev_server: WorkflowEnvironment, slow_kubesim: KubeSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control: what the heartbeat timeout does to a call that waits in silence."""
    monkeypatch.setattr(keep_alive, "waiting", contextlib.nullcontext)
    with pytest.raises(WorkflowFailureError) as failure:
        await run_slow_call(dev_server, slow_kubesim)
    timeout = failure.value.cause.__cause__
    assert isinstance(timeout, TimeoutError) and timeout.type == TimeoutType.HEARTBEAT, repr(timeout)
