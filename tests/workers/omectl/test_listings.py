"""A listing (`omectl get KIND` without NAME) queries its workflows at most 16 at once, and one
that does not answer fails its own row (`-`, its error on stderr, exit 1), not the table."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from temporalio.service import RPCError, RPCStatusCode
from typer.testing import CliRunner

from tests.workers.omectl.cli import exit_with
from workers.omectl import get, reads, session
from workers.omectl.app import app
from workflows.service.messages import ServiceStatusView

ENV = {"OME_OTEL__OTLP_ENDPOINT": None}
COUNT = 40


def view(name: str) -> ServiceStatusView:
    return ServiceStatusView.model_validate(
        {"name": name, "namespace": "ns", "generation": 1, "phase": "Ready", "paused": False, "deleting": False, "status": {}}
    )


def test_one_failed_query_fails_its_row_and_concurrency_is_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    now = {"in_flight": 0, "most": 0}

    async def connected() -> Any:
        return object()

    async def running(*_: Any) -> list[reads.Running]:
        return [reads.Running(f"isvc/ns/svc-{i:02d}", None) for i in range(COUNT)]

    async def service_status(_: Any, workflow_id: str) -> ServiceStatusView:
        now["in_flight"] += 1
        now["most"] = max(now["most"], now["in_flight"])
        try:
            await asyncio.sleep(0.01)
            if workflow_id.endswith("-07"):
                raise RPCError("query timed out", RPCStatusCode.DEADLINE_EXCEEDED, b"")
            return view(workflow_id.rsplit("/", 1)[-1])
        finally:
            now["in_flight"] -= 1

    monkeypatch.setattr(session, "finish", exit_with)
    monkeypatch.setattr(get, "client", connected)
    monkeypatch.setattr(reads, "running", running)
    monkeypatch.setattr(reads, "service_status", service_status)
    result = CliRunner().invoke(app, ["get", "isvc", "-n", "ns"], env=ENV)

    assert result.exit_code == 1, result.output
    rows = [line.split() for line in result.stdout.splitlines()[1:]]
    assert len(rows) == COUNT
    assert rows[7] == ["svc-07", "-", "-", "-", "-", "-", "-"]
    assert rows[8][:2] == ["svc-08", "Ready"]
    assert "error: isvc/ns/svc-07: query timed out" in result.stderr
    assert 1 < now["most"] <= reads.LISTING_CONCURRENCY
