"""Traces end to end: the worker process exports to a real OTLP/gRPC receiver, and one workflow
run is one trace across the workflow, its activities and the HTTP calls they make.

The worker runs as its own process (`workers.worker.run`, what `python -m workers` runs),
configured only through the environment, `OME_OTEL__OTLP_ENDPOINT` pointing at the receiver of
tests/fixtures/otlp_receiver.py (the Collector and Jaeger are not installable here). Workflows
are started by a client without tracing, as `temporal workflow start` and `omectl` start them.
Every run's `RunWorkflow` span is its trace's root; where the run came from (a parent
workflow's `StartChildWorkflow` span) is a link.

1. An InferenceService applied as the controller, `omectl apply` and the README apply it (the
   `apply` Update with start): its Instance's `RunWorkflow:Instance` is the root of a trace of
   its own, linked to the InferenceReplica's `StartChildWorkflow:Instance` span; the
   Instance's create operation is one more trace, rooted at `Operation:Create` (linked to the
   Instance's run), holding the pod create (`POST /api/v1/namespaces/{ns}/pods`) under the
   create-pods activity span; the InferenceService's and the InferenceReplica's traces hold
   none of the Instance's spans.
2. An Instance started directly: the same trees (a run root without links), the pod create a
   child of the create-pods activity span although that activity runs on a worker thread, and
   `ome.*` attributes on every workflow and activity span.
3. A canary analysis sample against the real Prometheus: its `GET /api/v1/query` is a child of
   the `prometheus.analysis_sample` activity span, in the trace of the workflow that took it.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlparse
from uuid import uuid4

import kubernetes
import pytest
import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from bench.lifecycle_stack import isvc_manifest, runtime_manifest
from kubesim.handle import KubeSim
from kubesim.timing import Timing
from models.canary_analysis import (
    PROMETHEUS_ANALYSIS_SAMPLE,
    AnalysisSampleInput,
    AnalysisSampleResult,
    PrometheusTarget,
    TemplateFields,
)
from models.inferenceservice import AnalysisMetric
from models.instance import InstancePhase, InstanceSpec, InstanceStatus
from tests.e2e.running_stack import REPO_ROOT
from tests.e2e.trace_workflows import ANALYSIS_SAMPLE
from tests.fixtures.kubesim import TEST_TOPOLOGY
from tests.fixtures.otlp_receiver import OtlpReceiver, ReceivedSpan
from tests.fixtures.prometheus import RunningPrometheus
from workers.config import ENV_PREFIX
from workers.control.temporal import apply_with_start
from workers.watch.pods import PodWatcher, TemporalSignalSink
from workflows.names import (
    INFERENCE_REPLICA,
    INFERENCE_SERVICE,
    INSTANCE,
    instance_workflow_id,
    isvc_workflow_id,
    rollout_workflow_id,
)

pytestmark = pytest.mark.e2e

WORKER_PROGRAM = """
import asyncio, logging
from tests.e2e.trace_workflows import AnalysisSampleWorkflow
from workers.worker import run
logging.basicConfig(level=logging.INFO)
asyncio.run(run(extra_workflows=[AnalysisSampleWorkflow]))
"""

ISVC = "chat-v2"
"""Hyphenated on purpose: the attributes must split `chat-v2-engine-0` at the component."""


@dataclass
class TracedStack:
    receiver: OtlpReceiver
    sim: KubeSim
    client: Any
    task_queue: str
    namespace: str
    worker_log: Path


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def traced(dev_server: WorkflowEnvironment, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[TracedStack]:
    """A receiver, kubesim, and a worker process exporting its traces to the receiver; the pod
    watcher runs in the test's process without tracing (it only relays pod changes)."""
    tmp_path = tmp_path_factory.mktemp("traces")
    task_queue = f"tq-{uuid4()}"
    namespace = f"trace-{uuid4().hex[:8]}"
    with OtlpReceiver() as receiver, KubeSim(topology=TEST_TOPOLOGY, crds="product", timing=Timing.fast()) as sim:
        kubernetes.client.CoreV1Api(sim.api_client()).create_namespace({"metadata": {"name": namespace}})
        env = {name: value for name, value in os.environ.items() if not name.startswith(ENV_PREFIX)}
        env |= {
            f"{ENV_PREFIX}TEMPORAL__ADDRESS": dev_server.client.service_client.config.target_host,
            f"{ENV_PREFIX}TEMPORAL__TASK_QUEUE": task_queue,
            f"{ENV_PREFIX}KUBE__KUBECONFIG": sim.kubeconfig_path,
            f"{ENV_PREFIX}OTEL__OTLP_ENDPOINT": receiver.endpoint,
            # The SDK's batch processor exports every 5 s by default; a test need not wait that.
            "OTEL_BSP_SCHEDULE_DELAY": "200",
            "PYTHONUNBUFFERED": "1",
        }
        log_path = tmp_path / "worker.log"
        with log_path.open("wb") as log:
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-c", WORKER_PROGRAM, cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
            )
        watcher = PodWatcher(sim.api_client(), TemporalSignalSink(dev_server.client))
        await watcher.start()
        try:
            yield TracedStack(receiver, sim, dev_server.client, task_queue, namespace, log_path)
        finally:
            await watcher.stop()
            process.kill()
            await process.wait()


def pod_spec() -> dict[str, Any]:
    return {"containers": [{"name": "engine", "image": "engine:1"}], "terminationGracePeriodSeconds": 1}


async def wait_until(what: str, probe: Callable[[], Any], within: float = 60.0) -> Any:
    deadline = time.monotonic() + within
    while True:
        found = await probe()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within:.0f}s waiting for {what}; last saw {found!r}")
        await asyncio.sleep(0.2)


# --- reading a span tree ------------------------------------------------------------------------


def http_method(span: ReceivedSpan) -> str | None:
    """The method of an HTTP client span, under the stable or the older semantic conventions."""
    method = span.attributes.get("http.request.method", span.attributes.get("http.method"))
    return str(method) if method is not None else None


def http_path(span: ReceivedSpan) -> str:
    return urlparse(str(span.attributes.get("url.full", span.attributes.get("http.url", "")))).path


def ancestors(span: ReceivedSpan, by_id: dict[str, ReceivedSpan]) -> list[ReceivedSpan]:
    """The span's parent, its parent's parent, ... as far as received spans go."""
    chain = []
    while span.parent_id and span.parent_id in by_id:
        span = by_id[span.parent_id]
        chain.append(span)
    return chain


def render(spans: Iterable[ReceivedSpan], root: ReceivedSpan, limit: int = 60) -> str:
    """A compact, indented dump of the tree under `root` (for failure messages and the log)."""
    children: dict[str, list[ReceivedSpan]] = {}
    for span in spans:
        children.setdefault(span.parent_id, []).append(span)
    lines: list[str] = []

    def walk(span: ReceivedSpan, depth: int) -> None:
        if len(lines) >= limit:
            return
        shown = {k: v for k, v in span.attributes.items() if k.startswith("ome.")}
        if http_method(span):
            shown = {"http": f"{http_method(span)} {http_path(span)}"}
        linked = f" links={[span_id for _, span_id in span.links]}" if span.links else ""
        lines.append(f"{'  ' * depth}{span.name} [{span.service}] {span.span_id} {shown}{linked}")
        for child in sorted(children.get(span.span_id, []), key=lambda s: s.start_ns):
            walk(child, depth + 1)

    walk(root, 0)
    return "\n".join([f"trace {root.trace_id}", *lines])


def root_of(spans: list[ReceivedSpan], workflow_type: str, workflow_id: str) -> ReceivedSpan | None:
    return next(
        (
            s
            for s in spans
            if s.name == f"RunWorkflow:{workflow_type}" and s.attributes.get("temporalWorkflowID") == workflow_id
        ),
        None,
    )


def root_where(spans: list[ReceivedSpan], name: str, **attributes: str) -> ReceivedSpan | None:
    """The root span named `name` (`RunWorkflow:Instance`, `Operation:Create`) whose `ome.*`
    attributes include `attributes`."""
    wanted = {f"ome.{key}": value for key, value in attributes.items()}
    return next(
        (s for s in spans if s.name == name and s.parent_id == "" and s.attributes.items() >= wanted.items()),
        None,
    )


def operation_root(spans: list[ReceivedSpan], workflow_id: str, kind: str) -> ReceivedSpan | None:
    """The root of an Instance's operation trace (`Operation:Create`), by workflow ID."""
    return next(
        (s for s in spans if s.name == f"Operation:{kind}" and s.attributes.get("temporalWorkflowID") == workflow_id),
        None,
    )


# --- the tests ----------------------------------------------------------------------------------


APPLIED = "chat-v3"
"""The InferenceService the apply test applies (its own, so the other tests' spans stay apart)."""


async def test_an_applied_inferenceservices_instance_create_is_its_own_linked_trace(traced: TracedStack) -> None:
    # A namespace of its own: the other Instance's pod creates must not be mistaken for these.
    namespace = f"{traced.namespace}-apply"
    api = traced.sim.api_client()
    kubernetes.client.CoreV1Api(api).create_namespace({"metadata": {"name": namespace}})
    kubernetes.client.CustomObjectsApi(api).create_namespaced_custom_object(
        "ome.io", "v1beta1", namespace, "servingruntimes", runtime_manifest(namespace)
    )
    api.close()
    manifest = isvc_manifest(namespace, APPLIED, 1, "engine:1")
    # The controller's call: the `apply` Update with start of `isvc/{ns}/{name}`.
    await apply_with_start(traced.client, traced.task_queue, manifest)
    isvc_id = isvc_workflow_id(namespace, APPLIED)
    pods_path = f"/api/v1/namespaces/{namespace}/pods"
    instance = {"isvc": APPLIED, "component": "engine", "instance": f"{APPLIED}-engine-0"}

    def instance_root(spans: list[ReceivedSpan]) -> ReceivedSpan | None:
        return root_where(spans, f"RunWorkflow:{INSTANCE}", **instance)

    def create_root(spans: list[ReceivedSpan]) -> ReceivedSpan | None:
        return root_where(spans, "Operation:Create", **instance)

    def complete(spans: list[ReceivedSpan]) -> bool:
        create = create_root(spans)
        received = {s.span_id for s in spans}
        return (
            instance_root(spans) is not None
            and create is not None
            and root_where(spans, f"RunWorkflow:{INFERENCE_SERVICE}", isvc=APPLIED) is not None
            and root_where(spans, f"RunWorkflow:{INFERENCE_REPLICA}", isvc=APPLIED) is not None
            and any(
                http_method(s) == "POST"
                and http_path(s) == pods_path
                and s.trace_id == create.trace_id
                and s.parent_id in received
                for s in spans
            )
        )

    try:
        spans = await asyncio.to_thread(
            traced.receiver.wait_for, complete, 60.0, f"the applied Instance's trace (worker log {traced.worker_log})"
        )
    finally:
        await traced.client.get_workflow_handle(isvc_id).terminate("trace test finished")

    root = instance_root(spans)
    create = create_root(spans)
    isvc_root = root_where(spans, f"RunWorkflow:{INFERENCE_SERVICE}", isvc=APPLIED)
    irep_root = root_where(spans, f"RunWorkflow:{INFERENCE_REPLICA}", isvc=APPLIED)
    assert root is not None and create is not None and isvc_root is not None and irep_root is not None
    by_id = {s.span_id: s for s in spans}
    trees = "\n".join(render(spans, r) for r in (isvc_root, irep_root, root, create))
    print(f"\nspan trees of {isvc_id}:\n{trees}")
    instance_id = str(root.attributes["temporalWorkflowID"])

    # Three runs, three traces, each rooted at its own RunWorkflow span; the Instance's create
    # operation a fourth, rooted at `Operation:Create` and linked to the Instance's run.
    assert len({isvc_root.trace_id, irep_root.trace_id, root.trace_id, create.trace_id}) == 4, trees
    for run_root in (isvc_root, irep_root, root):
        assert run_root.parent_id == "" and run_root.kind == "SERVER", trees
    assert create.attributes.get("temporalWorkflowID") == instance_id, trees
    assert create.attributes.get("ome.operation") == "create-1", trees
    assert create.links == [(root.trace_id, root.span_id)], trees

    # The Instance's root links to the InferenceReplica's span that started it, in that trace.
    assert len(root.links) == 1, trees
    ((linked_trace, linked_span),) = root.links
    start_child = by_id.get(linked_span)
    assert start_child is not None and start_child.name == f"StartChildWorkflow:{INSTANCE}", trees
    assert linked_trace == start_child.trace_id == irep_root.trace_id, trees
    assert irep_root in ancestors(start_child, by_id), trees
    # ... and the InferenceReplica's root links to the InferenceService's span that started it.
    ((_, irep_origin),) = irep_root.links
    assert by_id[irep_origin].trace_id == isvc_root.trace_id, trees

    # The pod create is in the create operation's trace, under its create-pods activity.
    posts = [s for s in spans if http_method(s) == "POST" and http_path(s) == pods_path]
    assert posts, trees
    for post in posts:
        assert post.trace_id == create.trace_id, trees
        assert by_id[post.parent_id].name == "RunActivity:kube.create_pods", trees
        assert create in ancestors(post, by_id), trees

    # Bounded: the Instance's two traces hold only the Instance's spans and the calls its
    # activities make (HTTP to Kubernetes, and the report signalled to its parent), and no
    # other trace holds any of the Instance's spans.
    own_traces = {root.trace_id, create.trace_id}
    in_instance_traces = [s for s in spans if s.trace_id in own_traces]

    def the_instances(span: ReceivedSpan) -> bool:
        return span.attributes.get("temporalWorkflowID") == instance_id

    def an_instance_call(span: ReceivedSpan) -> bool:
        made_by = by_id.get(span.parent_id)
        is_call = bool(http_method(span)) or span.name.startswith("SignalWorkflow:")
        return is_call and made_by is not None and made_by.name.startswith("RunActivity:") and the_instances(made_by)

    assert all(the_instances(s) or an_instance_call(s) for s in in_instance_traces), trees
    assert {s.trace_id for s in spans if s.attributes.get("temporalWorkflowID") == instance_id} <= own_traces, trees
    for other in (isvc_root, irep_root):
        other_trace = [s for s in spans if s.trace_id == other.trace_id]
        assert not any(s.attributes.get("temporalWorkflowID") == instance_id for s in other_trace), trees
        assert not any(http_method(s) == "POST" and http_path(s) == pods_path for s in other_trace), trees



async def test_an_instance_is_one_trace_from_workflow_to_kubernetes_calls(traced: TracedStack) -> None:
    namespace = traced.namespace
    spec = InstanceSpec(
        namespace=namespace,
        isvc=ISVC,
        component="engine",
        index=0,
        revision="rev-abc123",
        leader_pod_spec=pod_spec(),
        drain_seconds=1.0,
    )
    workflow_id = instance_workflow_id(namespace, ISVC, "engine", 0)
    handle = await traced.client.start_workflow(
        "Instance", spec, id=workflow_id, task_queue=traced.task_queue, result_type=InstanceStatus
    )
    try:

        async def serving() -> bool:
            status = await handle.query("status", result_type=InstanceStatus)
            return status.phase == InstancePhase.READY and bool(status.serving)

        await wait_until(f"the Instance to serve (worker log {traced.worker_log})", serving)
        pods_path = f"/api/v1/namespaces/{namespace}/pods"

        def complete(spans: list[ReceivedSpan]) -> bool:
            received = {s.span_id for s in spans}
            return (
                root_of(spans, "Instance", workflow_id) is not None
                and operation_root(spans, workflow_id, "Create") is not None
                and any(
                    http_method(s) == "POST" and http_path(s) == pods_path and s.parent_id in received for s in spans
                )
            )

        spans = await asyncio.to_thread(
            traced.receiver.wait_for, complete, 30.0, "the Instance's root span, its create and its pod create"
        )
    finally:
        await handle.terminate("trace test finished")

    root = root_of(spans, "Instance", workflow_id)
    operation = operation_root(spans, workflow_id, "Create")
    assert root is not None and operation is not None
    tree = f"{render(spans, root)}\n{render(spans, operation)}"
    print(f"\nspan trees of {workflow_id}:\n{tree}")
    by_id = {s.span_id: s for s in spans}
    roots = (root, operation)

    # The root: no parent and no link (nothing traced started it), named for the Instance, with
    # every attribute its ID and input give.
    assert root.parent_id == "" and root.kind == "SERVER" and root.service == "omeflow-worker", tree
    assert root.links == [], tree
    instance_attributes = {
        "ome.namespace": namespace,
        "ome.isvc": ISVC,
        "ome.component": "engine",
        "ome.instance": f"{ISVC}-engine-0",
    }
    assert root.attributes.items() >= {**instance_attributes, "ome.revision": "rev-abc123"}.items(), tree
    # The create operation: a root of its own, linked to the run's root.
    assert operation.parent_id == "" and operation.links == [(root.trace_id, root.span_id)], tree
    assert operation.attributes.items() >= {**instance_attributes, "ome.operation": "create-1"}.items(), tree

    # Every span of this workflow, in the workflow or in an activity, is in one of the two.
    own = [s for s in spans if s.attributes.get("temporalWorkflowID") == workflow_id]
    assert {s.trace_id for s in own} == {root.trace_id, operation.trace_id}, tree

    # Its activities descend from one of the roots and carry the Instance's attributes.
    activities = [s for s in own if s.name.startswith("RunActivity:")]
    assert activities, tree
    for span in activities:
        assert any(r in ancestors(span, by_id) for r in roots), f"{span.name} is under no root:\n{tree}"
        assert span.attributes.items() >= instance_attributes.items(), (span.name, span.attributes)
    create = [s for s in activities if s.name == "RunActivity:kube.create_pods"]
    assert create and all(s.attributes.get("ome.revision") == "rev-abc123" for s in create), tree

    # The Kubernetes API call is a child of the activity span, although the activity is a plain
    # `def` run on the worker's thread pool: the context crossed into that thread.
    posts = [s for s in spans if http_method(s) == "POST" and http_path(s) == pods_path]
    assert posts, tree
    for post in posts:
        assert post.kind == "CLIENT" and post.trace_id == operation.trace_id, tree
        assert post.parent_id in by_id and by_id[post.parent_id].name == "RunActivity:kube.create_pods", tree


async def test_a_canary_sample_traces_its_prometheus_query(traced: TracedStack, tmp_path: Path) -> None:
    with RunningPrometheus(tmp_path, {}) as prometheus:
        sample = AnalysisSampleInput(
            target=PrometheusTarget(address=prometheus.url),
            metrics=[AnalysisMetric(name="always-one", query="vector(1)", operator="LT", threshold="2")],
            fields=TemplateFields(
                namespace=traced.namespace,
                isvc_name=ISVC,
                component="engine",
                canary_revision="rev-new",
                stable_revision="rev-old",
            ),
            time=datetime.now(UTC),
            step_number=1,
            sample_number=1,
        )
        # The ID a Rollout of the InferenceService would have, whose canary step this stands for.
        workflow_id = rollout_workflow_id(traced.namespace, ISVC, int(time.time()))
        result = await traced.client.execute_workflow(
            ANALYSIS_SAMPLE,
            sample,
            id=workflow_id,
            task_queue=traced.task_queue,
            result_type=AnalysisSampleResult,
        )
    assert result.verdict == "Pass", result

    def complete(spans: list[ReceivedSpan]) -> bool:
        received = {s.span_id for s in spans}
        return root_of(spans, ANALYSIS_SAMPLE, workflow_id) is not None and any(
            http_method(s) == "GET"
            and http_path(s) == "/api/v1/query"
            and s.trace_id == root_trace(spans)
            and s.parent_id in received
            for s in spans
        )

    def root_trace(spans: list[ReceivedSpan]) -> str | None:
        root = root_of(spans, ANALYSIS_SAMPLE, workflow_id)
        return root.trace_id if root else None

    spans = await asyncio.to_thread(traced.receiver.wait_for, complete, 30.0, "the sample's Prometheus query")
    root = root_of(spans, ANALYSIS_SAMPLE, workflow_id)
    assert root is not None
    tree = render(spans, root)
    print(f"\nspan tree of {workflow_id}:\n{tree}")
    by_id = {s.span_id: s for s in spans}
    query = next(s for s in spans if http_path(s) == "/api/v1/query" and s.trace_id == root.trace_id)
    activity = by_id[query.parent_id]
    assert activity.name == f"RunActivity:{PROMETHEUS_ANALYSIS_SAMPLE}", tree
    assert root in ancestors(activity, by_id), tree
    assert activity.attributes.items() >= {"ome.isvc": ISVC, "ome.revision": "rev-new"}.items(), activity.attributes
