"""The Instance workflow on the time-skipping test server against the in-memory cluster:
`make_spec`, the `Harness` that starts Instances and waits on their status, and `ready_at`.
The `harness` fixture (tests/workflows/conftest.py) builds one per test.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from models.instance import InstancePhase, InstanceSpec, InstanceStatus
from planning.instance.state import InstanceState
from tests.fixtures.temporal import register_search_attributes
from tests.workflows.instance_fake_cluster import FakeCluster
from tests.workflows.instance_parent import FakeParent
from workers.client import DATA_CONVERTER
from workers.worker import build_worker
from workflows.instance import versions
from workflows.names import instance_workflow_id
from workflows.replica.children import first_input

P = InstancePhase


def make_spec(image: str = "engine:1", workers: int = 0, **overrides: Any) -> InstanceSpec:
    pod = {"containers": [{"name": "engine", "image": image}]}
    values: dict[str, Any] = {
        "namespace": "prod",
        "isvc": "chat",
        "component": "engine",
        "index": 1,
        "revision": f"rev-{image.replace(':', '-')}",
        "leader_pod_spec": pod,
        "worker_pod_spec": pod if workers else None,
        "worker_count": workers,
        "drain_seconds": 5.0,
    }
    values.update(overrides)
    return InstanceSpec(**values)


def versioned(spec: InstanceSpec) -> InstanceState:
    """The input a parent gives a new Instance of `spec` (`first_input`), without its launch record."""
    return first_input(spec).model_copy(update={"launched_by_parent": False})


async def start_instance(
    env: WorkflowEnvironment, spec: InstanceSpec, task_queue: str, first: InstanceState | InstanceSpec | None = None
) -> WorkflowHandle[Any, InstanceStatus]:
    """Start the Instance workflow of `spec` under its own workflow ID, as its parent would:
    under the newest workflow version (`workflows.instance.versions`); with `first` (an
    `InstanceState` of `spec`) as its input where given. `spec` itself as `first` starts it as
    runs from before versions travelled in the input were started (version 0: every change is
    asked with `workflow.patched`)."""
    return await env.client.start_workflow(
        "Instance",
        first if first is not None else versioned(spec),
        id=instance_workflow_id(spec.namespace, spec.isvc, spec.component, spec.index),
        task_queue=task_queue,
        result_type=InstanceStatus,
    )


class Harness:
    def __init__(self, env: WorkflowEnvironment, cluster: FakeCluster, task_queue: str) -> None:
        self.env = env
        self.cluster = cluster
        self.task_queue = task_queue
        # Workflow ids derive from the namespace: one per test keeps tests apart.
        self.namespace = f"ns-{task_queue[3:11]}"

    def spec(self, image: str = "engine:1", workers: int = 0, **overrides: Any) -> InstanceSpec:
        return make_spec(image, workers, namespace=self.namespace, **overrides)

    async def start(
        self, spec: InstanceSpec, first: InstanceState | InstanceSpec | None = None
    ) -> WorkflowHandle[Any, InstanceStatus]:
        return await start_instance(self.env, spec, self.task_queue, first)

    async def until(
        self,
        handle: WorkflowHandle[Any, InstanceStatus],
        test: Callable[[InstanceStatus], bool],
        step: float = 5.0,
    ) -> InstanceStatus:
        """Query until `test` holds, letting `step` seconds of workflow time pass between tries."""
        status = None
        for _ in range(2000):
            status = await handle.query("status", result_type=InstanceStatus)
            if test(status):
                return status
            await self.env.sleep(step)
        raise AssertionError(f"condition never held; last status: {status}")


def ready_at(phase: InstancePhase = P.READY, incarnation: int = 1) -> Callable[[InstanceStatus], bool]:
    return lambda s: s.phase == phase and s.incarnation == incarnation and s.serving


def without_change(monkeypatch: pytest.MonkeyPatch, change: str) -> None:
    """Instances take every change but `change`: the path of runs recorded before it."""
    takes = versions.takes
    monkeypatch.setattr(versions, "takes", lambda version, name: name != change and takes(version, name))


@asynccontextmanager
async def reporting_to_a_fake_parent(
    env: WorkflowEnvironment, task_queue: str, cluster: FakeCluster, signals: list[Callable[..., Any]]
) -> AsyncIterator[tuple[Harness, WorkflowHandle[Any, Any]]]:
    """A worker with the fake cluster's activities and `signals` for the report's, and a running
    `FakeParent` (an InferenceReplica's stand-in) for Instances started with its id as parent."""
    await register_search_attributes(env)
    async with build_worker(
        env.client, task_queue, None, activities=cluster.activities(signals=signals), extra_workflows=[FakeParent]
    ):
        parent = await env.client.start_workflow("FakeParent", id=f"irep/prod/chat-engine-{task_queue}", task_queue=task_queue)
        yield Harness(env, cluster, task_queue), parent


async def history_lines(handle: WorkflowHandle[Any, Any]) -> list[str]:
    """The history, one line per event: its type, and a marker's summary (or name) or a timer's length."""
    lines = []
    async for event in handle.fetch_history_events():
        name = EventType.Name(event.event_type).removeprefix("EVENT_TYPE_")
        summary = ""
        if event.user_metadata.HasField("summary"):
            summary = DATA_CONVERTER.payload_converter.from_payload(event.user_metadata.summary, str)
        if event.HasField("timer_started_event_attributes"):
            summary = f"{round(event.timer_started_event_attributes.start_to_fire_timeout.ToTimedelta().total_seconds())} s"
        if event.HasField("marker_recorded_event_attributes") and not summary:
            summary = event.marker_recorded_event_attributes.marker_name
        lines.append(f"{name} {summary}".strip())
    return lines
