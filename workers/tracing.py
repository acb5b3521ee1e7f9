"""OpenTelemetry set-up of a process: tracer provider, OTLP exporter, HTTP client instrumentation.

`configure(otel, role)` runs once per process (OpenTelemetry's global provider can be set only
once) and returns the tracer the Temporal interceptor uses; later calls return the same one.
Nothing here runs unless `OME_OTEL__OTLP_ENDPOINT` is set, so a process without a collector pays
nothing. `workers/client.py` calls it when it builds a client.

HTTP clients are instrumented in the worker only: there the Kubernetes client (urllib3) and
the Prometheus and gateway calls (httpx) run inside activities, so their spans are children of
the activity span and belong to the workflow's trace. The watcher's and the controller's HTTP
calls are long watches that belong to no workflow operation. Even in the worker, an HTTP call
made outside any span (the workload-cluster directory's periodic list) is not sampled
(`_NoOrphans`): one-span traces of housekeeping would bury the operations. The same rule drops
a Temporal client's signal or query made outside any span (the watcher's `pods_changed`, the
controller's `delete` and `runtime_changed`): each would be a one-span trace. The workflow's
`HandleSignal` span still records it, in the run's trace, without a link to a span nobody kept.

Command-line roles (`omectl`) are not traced at all (`TRACED_ROLES` of workers/client.py): a CLI's few calls are not
worth a span exporter, and one waiting on an unreachable collector at exit is a hang.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
from opentelemetry.instrumentation.urllib3 import URLLib3Instrumentor
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, Decision, ParentBased, Sampler, SamplingResult
from opentelemetry.trace import Link, SpanKind
from opentelemetry.util.types import Attributes

from workers.config import OtelSettings
from workers.tracing_interceptor import PinnedIdGenerator

logger = logging.getLogger(__name__)

TRACER_NAME = "omeflow"
HTTP_TRACED_ROLES = frozenset({"worker"})
"""Processes whose HTTP clients are instrumented (see the module docstring for why only these)."""

_HTTP_METHOD_KEYS = ("http.request.method", "http.method")
_TEMPORAL_WORKFLOW_KEY = "temporalWorkflowID"
_ORPHAN_TEMPORAL_CALLS = ("SignalWorkflow:", "QueryWorkflow:")
"""Client spans of the SDK's tracing interceptor that are dropped when they would be a root."""

_tracer: trace.Tracer | None = None


def _orphan(name: str, kind: SpanKind | None, attributes: Attributes) -> bool:
    """A client call that is worth a span only inside an operation's trace."""
    if kind != SpanKind.CLIENT or not attributes:
        return False
    if any(key in attributes for key in _HTTP_METHOD_KEYS):
        return True
    return _TEMPORAL_WORKFLOW_KEY in attributes and name.startswith(_ORPHAN_TEMPORAL_CALLS)


class _NoOrphans(Sampler):
    """Root sampler: every root span except an HTTP client call or a Temporal signal or query,
    which only a parent may sample."""

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: trace.TraceState | None = None,
    ) -> SamplingResult:
        if _orphan(name, kind, attributes):
            return SamplingResult(Decision.DROP)
        return ALWAYS_ON.should_sample(parent_context, trace_id, name, kind, attributes, links, trace_state)

    def get_description(self) -> str:
        return "NoOrphans"


def configure(otel: OtelSettings, role: str) -> trace.Tracer | None:
    """The process's tracer exporting to `otel.otlp_endpoint`, or None when none is configured."""
    global _tracer
    if otel.otlp_endpoint is None:
        return None
    if _tracer is None:
        provider = build_provider(f"{otel.service_name}-{role}")
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=otel.otlp_endpoint)))
        trace.set_tracer_provider(provider)
        _tracer = provider.get_tracer(TRACER_NAME)
        if role in HTTP_TRACED_ROLES:
            instrument_http_clients(provider)
        logger.info("exporting traces to %s as %s-%s", otel.otlp_endpoint, otel.service_name, role)
    return _tracer


def build_provider(service_name: str) -> TracerProvider:
    """A provider with the product's sampler and the IDs the tracing interceptor can pin; no
    exporter yet, and not installed as the global one (tests add an in-memory exporter)."""
    return TracerProvider(
        resource=Resource.create({SERVICE_NAME: service_name}),
        sampler=ParentBased(root=_NoOrphans()),
        id_generator=PinnedIdGenerator(),
    )


def instrument_http_clients(provider: trace.TracerProvider) -> None:
    """Spans for every urllib3 (the kubernetes client) and httpx (Prometheus, gateways) request."""
    for instrumentor in (URLLib3Instrumentor(), HTTPXClientInstrumentor()):
        if not instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.instrument(tracer_provider=provider)


def flush(timeout_seconds: float = 5.0) -> None:
    """Export what is buffered; a process about to `os._exit` calls this, or loses its last spans."""
    provider = trace.get_tracer_provider()
    if _tracer is not None and isinstance(provider, TracerProvider):
        provider.force_flush(int(timeout_seconds * 1000))
