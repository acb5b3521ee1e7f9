"""The one factory for Temporal clients: worker, watcher, tests and any starter use it.

Every client gets the pydantic data converter, so workflow inputs, results, signals, updates
and query answers are the product's pydantic models on both sides. A client gets the
OpenTelemetry tracing interceptor only when an OTLP endpoint is configured, and the worker's
runtime serves the SDK's metrics and the product's own (`workflows.metrics`,
`activities.kube_metrics`) at one Prometheus endpoint.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from temporalio.client import Client, Interceptor
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig
from temporalio.service import TLSConfig

from activities import kube_metrics
from workers.config import ENV_PREFIX, OtelSettings, Settings, SettingsError, TemporalSettings
from workflows import metrics as workflow_metrics

logger = logging.getLogger(__name__)

TRACED_ROLES = frozenset({"worker", "watcher", "controller"})
"""Roles that get the tracing interceptor when an OTLP endpoint is set: the long-running
processes. `omectl` and any other one-off client are not traced (a CLI waiting at exit to flush
spans to an unreachable collector is a hang, and its calls are linked from the workflows
they start only when traced)."""

DATA_CONVERTER: DataConverter = pydantic_data_converter
"""The converter every client and test environment uses; payloads written by one and read by
another must agree, so nothing else constructs a converter."""


def _read_pem(path: Path, field: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        raise SettingsError(
            f"{ENV_PREFIX}TEMPORAL__{field.upper()}={path} cannot be read ({error.strerror}): "
            f"point it at a PEM file or unset it"
        ) from error


def tls_config(settings: TemporalSettings) -> TLSConfig | bool:
    """TLS settings for `Client.connect`: False for plaintext, True for system roots only."""
    if not settings.uses_tls:
        return False
    if settings.tls_cert is None and settings.tls_ca is None and settings.tls_server_name is None:
        # API key alone: TLS with the system's roots, as Temporal Cloud expects.
        return True
    return TLSConfig(
        server_root_ca_cert=_read_pem(settings.tls_ca, "tls_ca") if settings.tls_ca else None,
        domain=settings.tls_server_name,
        client_cert=_read_pem(settings.tls_cert, "tls_cert") if settings.tls_cert else None,
        client_private_key=_read_pem(settings.tls_key, "tls_key") if settings.tls_key else None,
    )


_tracing_interceptor: Interceptor | None = None


def tracing_interceptors(otel: OtelSettings, role: str) -> Sequence[Interceptor]:
    """The tracing interceptor when an OTLP endpoint is configured, else nothing.

    The tracer provider is process-wide (`workers/tracing.py` builds it once, naming the
    process by the first `role`), so later calls reuse the same interceptor. Only the long-running
    roles are traced (`TRACED_ROLES`): `omectl` and other one-off clients get nothing, so they
    never wait on a collector at exit.
    """
    global _tracing_interceptor
    if otel.otlp_endpoint is None or role not in TRACED_ROLES:
        return []
    if _tracing_interceptor is None:
        # Imported here: OpenTelemetry's SDK, exporter and instrumentations cost a third of a
        # second, which a CLI without a collector should not pay.
        from workers import tracing
        from workers.tracing_interceptor import OmeTracingInterceptor

        tracer = tracing.configure(otel, role)
        assert tracer is not None
        _tracing_interceptor = OmeTracingInterceptor(tracer)
    return [_tracing_interceptor]


def metrics_runtime(address: str | None) -> Runtime | None:
    """A Temporal runtime serving SDK metrics for Prometheus at `address`, or None when unset.

    A runtime owns its exporter, so a process creates at most one; the worker passes it to
    `connect` and every client and worker built on that connection reports through it.
    """
    if address is None:
        return None
    return Runtime(
        telemetry=TelemetryConfig(
            metrics=PrometheusConfig(bind_address=address, histogram_bucket_overrides=product_histogram_buckets())
        )
    )


def product_histogram_buckets() -> dict[str, Sequence[float]]:
    """The buckets of the product's own histograms (the SDK's keep their defaults)."""
    return {**workflow_metrics.HISTOGRAM_BUCKETS, **kube_metrics.HISTOGRAM_BUCKETS}


async def connect(
    settings: TemporalSettings | None = None,
    *,
    otel: OtelSettings | None = None,
    role: str = "client",
    runtime: Runtime | None = None,
) -> Client:
    """Connect to Temporal with the product's converter (and tracing when configured).

    With no arguments both groups come from the environment. When `settings` is given, tracing
    follows `otel` only, so a test that passes explicit settings is not traced by accident.
    `role` names the process in traces. `runtime` carries the metrics exporter (see
    `metrics_runtime`); None uses the SDK's default runtime, which exports nothing.
    """
    if settings is None:
        loaded = Settings()
        settings = loaded.temporal
        otel = otel if otel is not None else loaded.otel
    interceptors = tracing_interceptors(otel, role) if otel is not None else []
    try:
        return await Client.connect(
            settings.address,
            namespace=settings.namespace,
            api_key=settings.api_key.get_secret_value() if settings.api_key else None,
            tls=tls_config(settings),
            data_converter=DATA_CONVERTER,
            interceptors=interceptors,
            runtime=runtime,
        )
    except RuntimeError as error:
        raise ConnectionError(
            f"cannot reach Temporal at {ENV_PREFIX}TEMPORAL__ADDRESS={settings.address} "
            f"(namespace {settings.namespace!r}): {error}. Start the local stack with `make up`, or set "
            f"{ENV_PREFIX}TEMPORAL__ADDRESS to your cluster's frontend"
        ) from error


def exit_process(code: int) -> NoReturn:
    """End a process that has used a Temporal client, skipping interpreter finalization.

    The SDK's Rust runtime keeps threads that can still call into Python while the interpreter
    finalizes, which now and then aborts the exit with "PyGILState_Release ... must be current"
    or a segfault (temporalio/sdk-python#300): a clean stop would then report exit code 134 or
    139. Output and buffered trace spans are flushed first; everything else the process holds
    dies with it anyway.
    """
    tracing = sys.modules.get("workers.tracing")
    if tracing is not None:
        tracing.flush()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
