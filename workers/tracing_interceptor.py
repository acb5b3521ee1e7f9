"""Temporal's OpenTelemetry tracing interceptor, made to give one trace per workflow run with
the product's `ome.*` attributes.

`temporalio.contrib.opentelemetry.TracingInterceptor` propagates span context from a client
span through workflows, child workflows, continue-as-new runs and activities. Left alone, that
makes one trace per InferenceService *lifetime*: its InferenceReplicas, Instances and Rollouts
are child workflows and every continue-as-new run carries the context on, so weeks of
operations pile into one trace. What this subclass changes:

1. **Every workflow run is the root of its own trace.** The run's `RunWorkflow` span has IDs
   derived from its workflow ID and run ID (`root_ids`): the workflow-side interceptor uses
   that context as the workflow's (`root_carrier`), the same on every replay, and the extern
   function creates the `RunWorkflow` span with exactly those IDs (`PinnedIdGenerator`) and no
   parent. Every later activity, child-workflow start, signal, update and HTTP call of the run
   joins it, even after the worker restarts.
2. **Where the run came from is a link, not the parent.** The context that arrived in the
   start headers (the parent workflow's `StartChildWorkflow` span, the previous run of a
   continue-as-new, a traced client's `StartWorkflow` span) becomes a span link on
   `RunWorkflow`, so a trace UI can jump from a child to its parent's trace and back while each
   stays bounded. A link to a span context that was not sampled (a client span dropped as an
   orphan, see workers/tracing.py) is left off: it would point at nothing.
3. **Attributes.** Every workflow span carries the `ome.*` attributes of its workflow ID
   (`models/trace_attributes.py`); `RunWorkflow` and every `RunActivity` add `ome.revision`
   when their input carries one.

Replay safety: workflow-side code here only reads the workflow's info, headers and input and
hashes them; spans are still created by the SDK's extern function, which skips them during
replay. One duplicate remains, as for every span of the SDK's: when the run's *first* workflow
task fails after the root was emitted (a worker dies mid-task, a task timeout), the retried
task is not a replay and emits `RunWorkflow` again, with the same trace and span ID (backends
show one span, Jaeger with a "duplicate span ID" warning). `workflow.info().attempt` cannot
guard this: it counts workflow retries (each a new run, so a new root), not task attempts.

4. **Operations of long-lived runs.** An Instance run lives for weeks and carries out one
   operation after another (create, update, restart, delete). Workflow code names them
   (workflows/tracing.py): `operation_began` emits an `Operation:{kind}` root with IDs derived
   from the workflow ID, its first run ID and the operation ID (`root_ids`; the same after a
   continue-as-new) and a link to the run's root, and while `follow_operations`' callback
   names an operation, every span the run would have parented on its root is parented on the
   operation's instead. Between operations (an idle Ready Instance's `pods_changed` signals)
   spans stay in the run's trace. The state is this interceptor's, one per workflow instance,
   rebuilt on every replay from the same workflow code, so it is as deterministic as the code.

The SDK documents subclassing these two classes as the way to customise them; the methods
overridden here (`_completed_span`, `_load_workflow_context_carrier`, `_completed_workflow_span`)
are its, so a temporalio upgrade is checked by tests/workers/test_tracing.py.
"""

from __future__ import annotations

import contextvars
import dataclasses
import hashlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import opentelemetry.trace
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator
from pydantic import BaseModel
from temporalio import activity, workflow
from temporalio.contrib.opentelemetry import TracingInterceptor, TracingWorkflowInboundInterceptor
from temporalio.contrib.opentelemetry._context import attached_context
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    ExecuteWorkflowInput,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
)

from models.trace_attributes import OPERATION, REVISION, revision_of, workflow_attributes

_ROOT_MARK = "ome.trace_root"
"""Passed from workflow code to the extern function, which removes it: this span is the run's
root and must get the IDs its children already name."""

_pinned: contextvars.ContextVar[tuple[int, int] | None] = contextvars.ContextVar("ome_pinned_ids", default=None)


class PinnedIdGenerator(IdGenerator):
    """Random IDs, except inside `pinned_ids(...)`, which fixes the next span's trace and span ID."""

    def __init__(self) -> None:
        self._random = RandomIdGenerator()

    def generate_span_id(self) -> int:
        pinned = _pinned.get()
        return pinned[1] if pinned else self._random.generate_span_id()

    def generate_trace_id(self) -> int:
        pinned = _pinned.get()
        return pinned[0] if pinned else self._random.generate_trace_id()


@contextmanager
def pinned_ids(trace_id: int, span_id: int) -> Iterator[None]:
    token = _pinned.set((trace_id, span_id))
    try:
        yield
    finally:
        _pinned.reset(token)


def root_ids(workflow_id: str, run_id: str, operation_id: str | None = None) -> tuple[int, int]:
    """Trace and span ID of a workflow run's root, or with `operation_id` (and the chain's first
    run ID as `run_id`) of an operation's root: a hash, so every replay agrees."""
    key = f"{workflow_id}\0{run_id}" if operation_id is None else f"{workflow_id}\0{run_id}\0{operation_id}"
    digest = hashlib.sha256(key.encode()).digest()
    # W3C forbids all-zero IDs; a zero from sha256 is not going to happen, but costs nothing.
    return int.from_bytes(digest[:16]) or 1, int.from_bytes(digest[16:24]) or 1


def root_carrier(workflow_id: str, run_id: str, operation_id: str | None = None) -> dict[str, str]:
    """A W3C `traceparent` carrier naming the run's (or the operation's) root span as sampled."""
    trace_id, span_id = root_ids(workflow_id, run_id, operation_id)
    return {"traceparent": f"00-{trace_id:032x}-{span_id:016x}-01"}


def _ids_of(carrier: Mapping[str, Any]) -> tuple[int, int] | None:
    parts = str(carrier.get("traceparent", "")).split("-")
    if len(parts) != 4:
        return None
    return int(parts[1], 16), int(parts[2], 16)


def _sampled(carrier: Mapping[str, Any] | None) -> bool:
    """Whether a carrier names a sampled span (a W3C `traceparent` with the sampled flag)."""
    parts = str((carrier or {}).get("traceparent", "")).split("-")
    return len(parts) == 4 and bool(int(parts[3] or "0", 16) & 1)


def _plain(value: Any) -> Mapping[str, Any] | None:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return value if isinstance(value, Mapping) else None


def input_revision(args: Any) -> str | None:
    """`ome.revision` of an operation whose first argument carries one."""
    first = _plain(args[0]) if args else None
    return revision_of(first) if first is not None else None


class OmeTracingInterceptor(TracingInterceptor):
    """The SDK's tracing interceptor with every workflow run rooted, its origin linked, and
    `ome.*` attributes added.

    Goes on the client (`workers/client.py`): every client and every worker built on it."""

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[TracingWorkflowInboundInterceptor]:
        super().workflow_interceptor_class(input)  # registers the extern that creates spans
        return OmeWorkflowInboundInterceptor

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        # Inside the SDK's activity span, so the attributes land on `RunActivity`.
        return super().intercept_activity(_ActivityAttributes(next))

    def _completed_workflow_span(self, params: Any) -> Any:
        if params.link_context is not None and not _sampled(params.link_context):
            params = dataclasses.replace(params, link_context=None)
        attributes = dict(params.attributes or {})
        if not attributes.pop(_ROOT_MARK, False):
            return super()._completed_workflow_span(params)
        params = dataclasses.replace(params, attributes=attributes)
        ids = _ids_of(params.context)
        if ids is None or not isinstance(getattr(self.tracer, "id_generator", None), PinnedIdGenerator):
            # A tracer of someone else's provider: the span stays a child of the derived root,
            # which keeps the one trace ID, with a root no backend receives.
            return super()._completed_workflow_span(params)
        with pinned_ids(*ids):
            return super()._completed_workflow_span(dataclasses.replace(params, context={}, parent_missing=False))


class OmeWorkflowInboundInterceptor(TracingWorkflowInboundInterceptor):
    """Workflow side: the run's derived root, its origin as a link, `ome.*` on every span."""

    # Read from the workflow's info on first use: the info does not exist yet while the SDK
    # constructs its interceptors.
    _ome_attributes: dict[str, str] | None = None

    def _workflow_attributes(self) -> dict[str, str]:
        if self._ome_attributes is None:
            self._ome_attributes = workflow_attributes(workflow.info().workflow_id)
        return self._ome_attributes

    def _load_workflow_context_carrier(self) -> Any:
        """The run's own root, whatever arrived in its headers (that is `_origin_carrier`)."""
        if not self._workflow_context_carrier:
            info = workflow.info()
            carrier: dict[str, str | list[str]] = {**root_carrier(info.workflow_id, info.run_id)}
            self._workflow_context_carrier = carrier
        return self._workflow_context_carrier

    def _origin_carrier(self) -> Any:
        """The span context the run was started with: a parent workflow's `StartChildWorkflow`,
        the previous run of a continue-as-new, a traced client's start; None when untraced."""
        header = workflow.info().headers.get(self.header_key)
        return self.payload_converter.from_payloads([header])[0] if header else None

    async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
        # The SDK's own version, plus the root mark, the origin link and the input's revision.
        extra: dict[str, Any] = {_ROOT_MARK: True}
        if revision := input_revision(input.args):
            extra[REVISION] = revision
        with self._top_level_workflow_context(success_is_complete=True):
            self._completed_span(
                f"RunWorkflow:{workflow.info().workflow_type}",
                kind=opentelemetry.trace.SpanKind.SERVER,
                link_context_carrier=self._origin_carrier(),
                additional_attributes=extra,
            )
            return await WorkflowInboundInterceptor.execute_workflow(self, input)

    # --- operations of long-lived runs (workflows/tracing.py) ---------------------------

    _operation: Callable[[], str | None] | None = None

    def follow_operations(self, current: Callable[[], str | None]) -> None:
        self._operation = current

    def operation_began(self, operation_id: str, name: str) -> None:
        with self._in_operation(operation_id):
            self._completed_span(
                f"Operation:{name}",
                kind=opentelemetry.trace.SpanKind.INTERNAL,
                link_context_carrier=self._load_workflow_context_carrier(),
                additional_attributes={_ROOT_MARK: True, OPERATION: operation_id},
            )

    @contextmanager
    def _in_operation(self, operation_id: str) -> Iterator[None]:
        info = workflow.info()
        carrier = root_carrier(info.workflow_id, info.first_execution_run_id, operation_id)
        with attached_context(self._set_on_context(self.text_map_propagator.extract(carrier))):
            yield

    def _current_operation(self) -> str | None:
        """The operation a span emitted now belongs to: one is in progress, and the span would
        otherwise hang off the run's root (not a query's client span, not a root itself)."""
        if self._operation is None:
            return None
        operation = self._operation()
        if operation is None:
            return None
        info = workflow.info()
        current = opentelemetry.trace.get_current_span().get_span_context()
        return operation if current.span_id == root_ids(info.workflow_id, info.run_id)[1] else None

    def _completed_span(self, span_name: str, **kwargs: Any) -> None:
        extra = kwargs.get("additional_attributes") or {}
        kwargs["additional_attributes"] = {**self._workflow_attributes(), **extra}
        operation = None if _ROOT_MARK in extra else self._current_operation()
        if operation is None:
            super()._completed_span(span_name, **kwargs)
            return
        with self._in_operation(operation):
            super()._completed_span(span_name, **kwargs)


class _ActivityAttributes(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        span = opentelemetry.trace.get_current_span()
        if span.is_recording():
            attributes: dict[str, str] = workflow_attributes(activity.info().workflow_id or "")
            if revision := input_revision(input.args):
                attributes[REVISION] = revision
            span.set_attributes(attributes)
        return await self.next.execute_activity(input)
