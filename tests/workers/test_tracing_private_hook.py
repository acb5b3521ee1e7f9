"""workflows.tracing leans on the SDK interceptor's private `_from_context`: when an SDK lacks it,
operation tracing turns itself off instead of failing the workflow task (AttributeError)."""

from __future__ import annotations

import pytest
from temporalio.contrib.opentelemetry import TracingWorkflowInboundInterceptor

from workflows import tracing


def test_without_the_private_hook_tracing_is_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(TracingWorkflowInboundInterceptor, "_from_context", raising=False)
    assert tracing._tracing() is None
    tracing.follow_operations(lambda: None)
    tracing.operation_began("op-1", "Create")


def test_with_the_hook_and_no_interceptor_in_context_tracing_is_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(TracingWorkflowInboundInterceptor, "_from_context", staticmethod(lambda: None), raising=False)
    assert tracing._tracing() is None
