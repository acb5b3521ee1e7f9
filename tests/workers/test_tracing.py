"""The tracing interceptor's promises that the end-to-end test cannot force: a workflow run keeps
one trace, rooted at its own `RunWorkflow` span, even when every activation replays it from
history (a worker restart, a cache eviction); a traced client's span, a parent workflow and the
previous run of a continue-as-new are links, never the parent, so each run is its own bounded
trace; each operation of a long-lived run (workflows/tracing.py) is a trace of its own, its root
emitted once across replays and linked to the run's; HTTP calls, signals and queries made outside any operation are not sampled; omectl is not
traced; and a committed history of each workflow type replays with the interceptor installed
(its workflow-side code is replay-safe in every product workflow), emitting nothing. Spans go to an in-memory exporter of a local provider
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
from tests.workers.trace_steps import (
    OPERATIONS,
    PARENT,
    SIGNALLED,
    STEPS,
    OperationsWorkflow,
    ParentWorkflow,
    SignalledWorkflow,
    StepsWorkflow,
    step,
)
from workers.client import tracing_interceptors
from workers.config import OtelSettings
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
    env: WorkflowEnvironment,
    client: Client,
    interceptor: OmeTracingInterceptor,
    workflow_id: str,
    workflow: str = STEPS,
    arg: object = 3,
) -> str:
    """Run a workflow on a worker that caches nothing, so each activation replays the history;
    the ID of its last run."""
    task_queue = f"tq-{uuid4()}"
    async with Worker(
        env.client,
        task_queue=task_queue,
        workflows=[StepsWorkflow, ParentWorkflow, OperationsWorkflow],
        activities=[step],
        interceptors=[interceptor],
        max_cached_workflows=0,
    ):
        handle = await client.start_workflow(workflow, arg, id=workflow_id, task_queue=task_queue)
        await handle.result()
        # The handle names the first run; a continued workflow's last run is the latest.
        return (await client.get_workflow_handle(workflow_id).describe()).run_id


def link_ids(span: ReadableSpan) -> list[tuple[int, int]]:
    return [(link.context.trace_id, link.context.span_id) for link in span.links]


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


async def test_a_traced_client_span_is_a_link_of_the_runs_root(
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
    # The run is its own trace, rooted at its derived IDs; the client's span is a link.
    assert root.parent is None
    assert (root.context.trace_id, root.context.span_id) == root_ids(workflow_id, run_id)
    assert link_ids(root) == [(start.context.trace_id, start.context.span_id)]
    assert start.parent is None and start.context.trace_id != root.context.trace_id
    assert {s.context.trace_id for s in spans if s is not start} == {root.context.trace_id}
    # An ID of no known shape gives no ome.* attributes, and nothing breaks.
    assert not any(key.startswith("ome.") for key in (root.attributes or {}))


async def test_a_child_and_a_continued_run_are_their_own_traces_linked_to_their_origin(
    workflow_env: WorkflowEnvironment, provider: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    tracer_provider, exporter = provider
    interceptor = OmeTracingInterceptor(tracer_provider.get_tracer("test"))
    workflow_id = f"parent-{uuid4()}"
    last_run = await run_steps(workflow_env, workflow_env.client, interceptor, workflow_id, PARENT, False)
    spans = exporter.get_finished_spans()

    (second,) = [s for s in named(spans, f"RunWorkflow:{PARENT}") if (s.attributes or {})["temporalRunID"] == last_run]
    (first,) = [s for s in named(spans, f"RunWorkflow:{PARENT}") if s is not second]
    (child,) = named(spans, f"RunWorkflow:{STEPS}")
    (start_child,) = named(spans, f"StartChildWorkflow:{STEPS}")
    for root in (first, second, child):
        assert root.parent is None, root.name
    assert (second.context.trace_id, second.context.span_id) == root_ids(workflow_id, last_run)
    assert len({first.context.trace_id, second.context.trace_id, child.context.trace_id}) == 3

    # The untraced start gives no link; the child links to its parent's StartChildWorkflow span,
    # which sits in the parent's first run; the continued run links to the first run's root.
    assert first.links == ()
    assert start_child.context.trace_id == first.context.trace_id
    assert start_child.parent is not None and start_child.parent.span_id == first.context.span_id
    assert link_ids(child) == [(start_child.context.trace_id, start_child.context.span_id)]
    assert link_ids(second) == [(first.context.trace_id, first.context.span_id)]

    # Each run's activities are in that run's trace.
    child_trace = {s.context.trace_id for s in spans if (s.attributes or {}).get("temporalWorkflowID") == f"{workflow_id}/child"}
    assert child_trace == {child.context.trace_id}
    second_run = [s for s in spans if (s.attributes or {}).get("temporalRunID") == last_run]
    assert {s.context.trace_id for s in second_run} == {second.context.trace_id}
    assert named(second_run, "RunActivity:")


async def test_each_operation_of_a_long_lived_run_is_its_own_trace(
    workflow_env: WorkflowEnvironment, provider: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    tracer_provider, exporter = provider
    interceptor = OmeTracingInterceptor(tracer_provider.get_tracer("test"))
    workflow_id = instance_workflow_id("prod", "chat-v2", "engine", 3)
    workflow_id = f"{workflow_id}-{uuid4().hex[:6]}"
    run_id = await run_steps(workflow_env, workflow_env.client, interceptor, workflow_id, OPERATIONS, 2)
    spans = exporter.get_finished_spans()

    (root,) = named(spans, f"RunWorkflow:{OPERATIONS}")
    # One root per operation, emitted once although every activation replayed the history.
    operations = named(spans, "Operation:Update")
    assert sorted((s.attributes or {})["ome.operation"] for s in operations) == ["update-1", "update-2"]
    for operation in operations:
        operation_id = str((operation.attributes or {})["ome.operation"])
        # Derived from the workflow ID, its first run ID and the operation ID: found again
        # after a continue-as-new.
        assert (operation.context.trace_id, operation.context.span_id) == root_ids(workflow_id, run_id, operation_id)
        assert operation.parent is None
        assert link_ids(operation) == [(root.context.trace_id, root.context.span_id)]
        starts = [s for s in named(spans, "StartActivity:") if s.parent and s.parent.span_id == operation.context.span_id]
        assert len(starts) == 2 and {s.context.trace_id for s in starts} == {operation.context.trace_id}
    # The step outside any operation, and the run's completion, stay in the run's trace.
    in_run = {s.name for s in spans if s.context.trace_id == root.context.trace_id}
    assert in_run == {f"RunWorkflow:{OPERATIONS}", "StartActivity:TraceTestStep", "RunActivity:TraceTestStep", f"CompleteWorkflow:{OPERATIONS}"}
    assert len(named([s for s in spans if s.context.trace_id == root.context.trace_id], "StartActivity:")) == 1
    assert len({s.context.trace_id for s in spans}) == 3


def test_calls_outside_an_operation_are_not_sampled(
    provider: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    tracer_provider, exporter = provider
    tracer = tracer_provider.get_tracer("test")
    http = {"http.request.method": "GET", "url.full": "https://kube/api/v1/nodes"}
    with tracer.start_as_current_span("GET", kind=SpanKind.CLIENT, attributes=http) as orphan:
        assert not orphan.is_recording()
    # The watcher's and controller's signals and queries, sent outside any span.
    for name in ("SignalWorkflow:pods_changed", "QueryWorkflow:status"):
        attributes = {"temporalWorkflowID": "instance/prod/chat-engine-0"}
        with tracer.start_as_current_span(name, kind=SpanKind.CLIENT, attributes=attributes) as signal:
            assert not signal.is_recording()
    with tracer.start_as_current_span("RunActivity:kube.read_object", kind=SpanKind.SERVER):
        with tracer.start_as_current_span("GET", kind=SpanKind.CLIENT, attributes=http) as child:
            assert child.is_recording()
    # A start is an operation's beginning: kept, as the workflow run's root links to it.
    start = {"temporalWorkflowID": "isvc/prod/chat"}
    with tracer.start_as_current_span("StartUpdateWithStartWorkflow:InferenceService", kind=SpanKind.CLIENT, attributes=start):
        pass
    assert [s.name for s in exporter.get_finished_spans()] == [
        "GET",
        "RunActivity:kube.read_object",
        "StartUpdateWithStartWorkflow:InferenceService",
    ]


async def test_a_signal_sent_outside_any_span_is_recorded_by_the_run_without_a_link(
    workflow_env: WorkflowEnvironment, provider: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    tracer_provider, exporter = provider
    interceptor = OmeTracingInterceptor(tracer_provider.get_tracer("test"))
    config = workflow_env.client.config()
    config["interceptors"] = [interceptor]
    traced_client = Client(**config)  # a watcher's client: traced, but no span around its sends
    task_queue = f"tq-{uuid4()}"
    async with Worker(workflow_env.client, task_queue=task_queue, workflows=[SignalledWorkflow], interceptors=[interceptor]):
        handle = await workflow_env.client.start_workflow(SIGNALLED, id=f"signalled-{uuid4()}", task_queue=task_queue)
        await traced_client.get_workflow_handle(handle.id).signal("go")
        assert await handle.result() is True
    spans = exporter.get_finished_spans()

    # The client's span is dropped (it would be a one-span trace); the run records the signal
    # in its own trace and links to nothing (a link to a span nobody kept would dangle).
    assert named(spans, "SignalWorkflow:") == []
    (root,) = named(spans, f"RunWorkflow:{SIGNALLED}")
    (handled,) = named(spans, "HandleSignal:go")
    assert handled.context.trace_id == root.context.trace_id and handled.links == ()


def test_omectl_and_one_off_clients_are_not_traced() -> None:
    otel = OtelSettings(otlp_endpoint="http://127.0.0.1:1")
    assert tracing_interceptors(otel, "omectl") == []
    assert tracing_interceptors(otel, "client") == []


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
