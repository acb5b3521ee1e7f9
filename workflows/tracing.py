"""Operation traces for long-lived workflows, through the tracing interceptor when one runs.

Every workflow run is the root of its own trace (workers/tracing_interceptor.py). A run that
lives for weeks and carries out many operations one after another, an Instance's create,
updates, restarts and delete, calls these two functions so each operation is a trace of its
own instead of one more branch of the run's:

- `follow_operations(current)`, once at the start of every run: `current()` names the operation
  in progress (None between operations). While one is, every span the run emits from its
  workflow context (activities, child-workflow starts, signals sent and handled) goes into the
  operation's trace instead of the run's.
- `operation_began(operation_id, name)`, when an operation starts: emits the operation's root
  span, `Operation:{name}`, with IDs derived from the workflow ID, its first run ID and the
  operation ID (so the run after a continue-as-new finds the same trace) and a link to the
  run's root.

Both are no-ops without the product's interceptor (no OTLP endpoint, the Replayer in
tests/replay). Replay-safe: they issue no commands and read only workflow info; the interceptor
emits nothing during replay.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, cast

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from temporalio.contrib.opentelemetry import TracingWorkflowInboundInterceptor


class OperationTracing(Protocol):
    def follow_operations(self, current: Callable[[], str | None]) -> None: ...

    def operation_began(self, operation_id: str, name: str) -> None: ...


def _tracing() -> OperationTracing | None:
    # `_from_context` is private to the SDK's interceptor: an SDK without it means no operation
    # traces, never a failed workflow task.
    from_context = getattr(TracingWorkflowInboundInterceptor, "_from_context", None)
    if from_context is None:
        return None
    found = from_context()
    if found is None or not hasattr(found, "operation_began"):
        return None
    return cast(OperationTracing, found)


def follow_operations(current: Callable[[], str | None]) -> None:
    """From now on, spans of the run's workflow context go to `current()`'s operation trace."""
    if (tracing := _tracing()) is not None:
        tracing.follow_operations(current)


def operation_began(operation_id: str, name: str) -> None:
    """Emit the root of the operation's trace (once: never on replay)."""
    if (tracing := _tracing()) is not None:
        tracing.operation_began(operation_id, name)
