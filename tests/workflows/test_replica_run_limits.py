"""A component of more Instances than the server lets one run of the InferenceReplica hold.

The server refuses a workflow task that would leave a run with more running children than
`limit.numPendingChildExecutions.error`, or more undelivered signals than
`limit.numPendingSignals.error` (2,000 each by default). Instances outlive their start, so
before `RUN_LIMITS` a component of more Instances than that stopped starting them for good,
and a pause told to all of them never went out. Here the server's limits are 12 and the
InferenceReplica's own (`CHILDREN_PER_RUN`, `SENDS_PER_TASK`) 8 and 5, so 20 Instances need
three runs and a pause told to them goes out in four waves. Each hand-over here carries the
state packed (`workflows.replica.carry`, whose threshold is lowered to 1 byte).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause
from temporalio.client import Client

from kubesim.handle import KubeSim
from tests.fixtures.temporal import dev_client_of_its_own
from tests.workflows.service_harness import NAME, eventually, isvc_manifest, story
from workflows.replica import carry, children

pytestmark = pytest.mark.workflows

SERVER_LIMIT = 12
INSTANCES = 20


@pytest_asyncio.fixture(loop_scope="session")
async def limited_client(tmp_path: Path) -> AsyncIterator[Client]:
    """A dev server of its own whose per-run limits are reached at test size."""
    limits = [f"limit.numPendingChildExecutions.error={SERVER_LIMIT}", f"limit.numPendingSignals.error={SERVER_LIMIT}"]
    async for client in dev_client_of_its_own(tmp_path / "temporal.db", limits):
        yield client


async def test_a_component_bigger_than_one_runs_limits_comes_up_and_hears_its_pause(
    limited_client: Client, task_queue: str, kubesim: KubeSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(children, "CHILDREN_PER_RUN", 8)
    monkeypatch.setattr(children, "SENDS_PER_TASK", 5)
    monkeypatch.setattr(carry, "PACKED_ABOVE", 1)  # every hand-over carries the state packed
    async with story(limited_client, task_queue, kubesim) as s:
        await s.apply(isvc_manifest(minReplicas=INSTANCES, maxReplicas=INSTANCES))

        async def serving() -> bool:
            lifecycle = (await s.status()).status.components["engine"].lifecycle
            return lifecycle is not None and lifecycle.ready_replicas == INSTANCES

        await eventually(serving, f"{INSTANCES} Ready Instances", within=120)
        runs = [run async for run in limited_client.list_workflows(f"WorkflowId = 'irep/{s.namespace}/{NAME}-engine'")]
        assert len(runs) >= 3, "8 starts a run: 20 Instances take three runs of the InferenceReplica"
        inputs = []
        for run in runs:
            handle = limited_client.get_workflow_handle(run.id, run_id=run.run_id)
            async for first in handle.fetch_history_events():
                inputs.append(json.loads(first.workflow_execution_started_event_attributes.input.payloads[0].data))
                break
        packed = ["packed_state" in given for given in inputs]
        carried_whole = ["config" in given for given in inputs]  # a ReplicaState as it is
        assert any(packed) and not any(carried_whole), f"each later run was handed the state packed: {packed}"

        await s.handle().signal("pause")

        async def told() -> list[int] | None:
            """The `set_pause` signals each workflow task sent, over every run of the replica."""
            waves: list[int] = []
            refused = []
            workflow_id = f"irep/{s.namespace}/{NAME}-engine"
            async for run in limited_client.list_workflows(f"WorkflowId = '{workflow_id}'"):
                sent = 0
                handle = limited_client.get_workflow_handle(workflow_id, run_id=run.run_id)
                async for event in handle.fetch_history_events():
                    if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED and sent:
                        waves.append(sent)
                        sent = 0
                    elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
                        cause = WorkflowTaskFailedCause.Name(event.workflow_task_failed_event_attributes.cause)
                        # A report landing while a hand-over completes fails that task
                        # (UnhandledCommand) and it is tried again; a limit would fail it for good.
                        if "LIMIT" in cause:
                            refused.append(cause)
                    elif event.HasField("signal_external_workflow_execution_initiated_event_attributes"):
                        signal = event.signal_external_workflow_execution_initiated_event_attributes.signal_name
                        sent += signal == "set_pause"
            assert not refused, f"the server refused workflow tasks of the InferenceReplica: {refused}"
            return waves if sum(waves) == INSTANCES else None

        waves = await eventually(told, "set_pause sent to every Instance", within=60)
        assert waves == [5, 5, 5, 5], waves
