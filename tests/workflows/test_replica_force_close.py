"""The server closes an InferenceReplica's workflow task itself, and nothing is lost.

Events that reach a workflow while one of its tasks runs (Instance reports, its children's
starts) wait in the server's buffer; past `history.maximumBufferedEventsBatch` (100 by
default) the server fails the running task (`WorkflowTaskFailed`, cause `ForceCloseCommand`,
identity `history-service`) so the next task takes them all, and the worker's completion of
the failed one meets "Workflow task not found". Seen once under `make up` while 1,200
Instances came up. Here the cap is 2, so a bring-up of 20 meets it again and again: every
Instance still comes up once, one pod per index.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause
from temporalio.client import Client

from kubesim.handle import KubeSim
from models.pods import LABEL_INSTANCE_INDEX
from tests.fixtures.temporal import dev_client_of_its_own
from tests.workflows.service_harness import NAME, eventually, isvc_manifest, story

pytestmark = pytest.mark.workflows

BUFFERED_EVENTS_CAP = 2
INSTANCES = 20


@pytest_asyncio.fixture(loop_scope="session")
async def capped_client(tmp_path: Path) -> AsyncIterator[Client]:
    """A dev server of its own whose buffered-events cap is reached at test size."""
    cap = [f"history.maximumBufferedEventsBatch={BUFFERED_EVENTS_CAP}"]
    async for client in dev_client_of_its_own(tmp_path / "temporal.db", cap):
        yield client


async def test_a_replica_task_the_server_closes_loses_no_instance(
    capped_client: Client, task_queue: str, kubesim: KubeSim
) -> None:
    async with story(capped_client, task_queue, kubesim) as s:
        await s.apply(isvc_manifest(minReplicas=INSTANCES, maxReplicas=INSTANCES))

        async def serving() -> bool:
            lifecycle = (await s.status()).status.components["engine"].lifecycle
            return lifecycle is not None and lifecycle.ready_replicas == INSTANCES

        await eventually(serving, f"{INSTANCES} Ready Instances", within=120)

        closed = 0
        workflow_id = f"irep/{s.namespace}/{NAME}-engine"
        async for run in capped_client.list_workflows(f"WorkflowId = '{workflow_id}'"):
            async for event in capped_client.get_workflow_handle(workflow_id, run_id=run.run_id).fetch_history_events():
                if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
                    failed = event.workflow_task_failed_event_attributes
                    cause = WorkflowTaskFailedCause.Name(failed.cause)
                    assert cause == "WORKFLOW_TASK_FAILED_CAUSE_FORCE_CLOSE_COMMAND", f"a task failed: {cause}"
                    assert failed.identity == "history-service"
                    closed += 1
        assert closed, "the server never closed a task of the InferenceReplica: the test proves nothing"

        live = [pod for pod in s.pods() if pod.metadata.deletion_timestamp is None]
        per_index = Counter(int(pod.metadata.labels[LABEL_INSTANCE_INDEX]) for pod in live)
        assert per_index == Counter(range(INSTANCES)), f"one pod per index: {sorted(per_index.items())}"
        started = [run async for run in capped_client.list_workflows(f"WorkflowId STARTS_WITH 'instance/{s.namespace}/'")]
        assert len(started) == INSTANCES, [run.id for run in started]
