"""The tracing interceptor's promises that the end-to-end test cannot force: a workflow started
without span context keeps one trace even when every activation replays it from history (a
worker restart, a cache eviction); a traced client's span stays the parent; and HTTP calls made
outside any operation are not sampled; and a committed history of each workflow type replays with
the interceptor installed (its workflow-side code is replay-safe in every product workflow),
emitting nothing. Spans go to an in-memory exporter of a local provider
(the process-wide one is left alone)."""

from __future__ import annotations

from collections.abc import Iterator
from uuid import uuid4

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer, Worker

from tests.replay.test_replay import FILES, history, replayer, workflow_type
from tests.workers.trace_steps import STEPS, StepsWorkflow, step
from workers.tracing import build_provider
from workers.tracing_interceptor import OmeTracingInterceptor, root_ids
from workflows.names import instance_workflow_id
from workflows.registry import WORKFLOWS

ATTRIBUTES = {"ome.namespace": "prod", "ome.isvc": "chat-v2", "ome.component": "engine", "ome.instance": "chat-v2-engine-3"}


@pytest.fixture
def provider() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    built = build_provider("omeflow-test")
    exporter = InMemorySpanExporter()
    built.add_span_processor(SimpleSpanProcessor(exporter))
    yield built, exporter
    built.shutdown()


def named(spans: tuple[ReadableSpan, ...], prefix: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name.startswith(prefix)]


async def run_steps(
    env: WorkflowEnvironment, client: Client, interceptor: OmeTracingInterceptor, workflow_id: str
) -> str:
    """Run three steps on a worker that caches nothing, so each activation replays the history."""
    task_queue = f"tq-{uuid4()}"
    async with Worker(
        env.client,
        task_queue=task_queue,
        workflows=[StepsWorkflow],
        activities=[step],
        interceptors=[interceptor],
        max_cached_workflows=0,
    ):
        handle = await client.start_workflow(STEPS, 3, id=workflow_id, task_queue=task_queue)
        assert await handle.result() == 3
        assert handle.result_run_id is not None
        return handle.result_run_id


async def test_a_spanless_workflow_is_one_trace_across_replays(
    workflow_env: WorkflowEnvironment, provider: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    tracer_provider, exporter = provider
    interceptor = OmeTracingInterceptor(tracer_provider.get_tracer("test"))
    workflow_id = instance_workflow_id("prod", f"chat-v2-{uuid4().hex[:6]}", "engine", 3)
    run_id = await run_steps(workflow_env, workflow_env.client, interceptor, workflow_id)
    spans = exporter.get_finished_spans()

    # One root, emitted once although the run was replayed at every activation, with the IDs
    # derived from the run: what the spans made after each replay name as their parent.
    (root,) = named(spans, f"RunWorkflow:{STEPS}")
    assert root.parent is None
    trace_id, span_id = root_ids(workflow_id, run_id)
    assert (root.context.trace_id, root.context.span_id) == (trace_id, span_id)

    starts = named(spans, "StartActivity:")
    runs = named(spans, "RunActivity:")
    assert len(starts) == len(runs) == 3
    assert all(s.parent is not None and s.parent.span_id == span_id for s in starts)
    start_ids = {s.context.span_id for s in starts}
    assert all(s.parent is not None and s.parent.span_id in start_ids for s in runs)
    assert {s.context.trace_id for s in spans} == {trace_id}

    isvc = workflow_id.split("/")[2].removesuffix("-engine-3")
    expected = ATTRIBUTES | {"ome.isvc": isvc, "ome.instance": f"{isvc}-engine-3"}
    for span in [root, *starts, *runs]:
        assert dict(span.attributes or {}).items() >= expected.items(), span.name


async def test_a_traced_client_span_stays_the_parent(
    workflow_env: WorkflowEnvironment, provider: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    tracer_provider, exporter = provider
    interceptor = OmeTracingInterceptor(tracer_provider.get_tracer("test"))
    config = workflow_env.client.config()
    config["interceptors"] = [interceptor]
    traced_client = Client(**config)
    workflow_id = f"steps-{uuid4()}"
    run_id = await run_steps(workflow_env, traced_client, interceptor, workflow_id)
    spans = exporter.get_finished_spans()

    (start,) = named(spans, f"StartWorkflow:{STEPS}")
    (root,) = named(spans, f"RunWorkflow:{STEPS}")
    assert root.parent is not None and root.parent.span_id == start.context.span_id
    assert root.context.span_id != root_ids(workflow_id, run_id)[1]
    assert {s.context.trace_id for s in spans} == {start.context.trace_id}
    # An ID of no known shape gives no ome.* attributes, and nothing breaks.
    assert not any(key.startswith("ome.") for key in (root.attributes or {}))


def test_http_calls_outside_an_operation_are_not_sampled(
    provider: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    tracer_provider, exporter = provider
    tracer = tracer_provider.get_tracer("test")
    http = {"http.request.method": "GET", "url.full": "https://kube/api/v1/nodes"}
    with tracer.start_as_current_span("GET", kind=SpanKind.CLIENT, attributes=http) as orphan:
        assert not orphan.is_recording()
    with tracer.start_as_current_span("RunActivity:kube.read_object", kind=SpanKind.SERVER):
        with tracer.start_as_current_span("GET", kind=SpanKind.CLIENT, attributes=http) as child:
            assert child.is_recording()
    assert [s.name for s in exporter.get_finished_spans()] == ["GET", "RunActivity:kube.read_object"]


async def test_a_history_of_each_workflow_type_replays_with_the_interceptor(
    provider: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    tracer_provider, exporter = provider
    config = replayer(WORKFLOWS).config()
    config["interceptors"] = [OmeTracingInterceptor(tracer_provider.get_tracer("test"))]
    traced_replayer = Replayer(**config)
    # One history of each workflow type: tests/replay replays them all without the interceptor.
    first_of_each = {workflow_type(path): path for path in reversed(FILES)}
    assert len(first_of_each) == len(WORKFLOWS)
    for path in first_of_each.values():
        result = await traced_replayer.replay_workflow(history(path), raise_on_replay_failure=False)
        assert result.replay_failure is None, f"{path.name}: {result.replay_failure!r}"
    # A replay re-creates no span: the first run emitted them all.
    assert exporter.get_finished_spans() == ()
