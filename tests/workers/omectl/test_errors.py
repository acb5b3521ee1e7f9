"""omectl never prints a traceback: a missing file, a missing workflow, or any refused call
(UNAVAILABLE, PERMISSION_DENIED) is `error: <message>` (or the reference's text) and exit 1."""

from __future__ import annotations

from typing import Any, NoReturn

import pytest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode
from typer.testing import CliRunner

from tests.workers.omectl.cli import exit_with, omectl_runner
from workers.omectl import get, reads, session
from workers.omectl.app import app

ENV = {"OME_OTEL__OTLP_ENDPOINT": None}


@pytest.fixture(autouse=True)
def exits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(session, "finish", exit_with)


def test_apply_of_a_missing_file_is_an_error_not_a_traceback() -> None:
    result = CliRunner().invoke(app, ["apply", "-f", "/nonexistent.yaml"], env=ENV)
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith("-f /nonexistent.yaml: ")
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output


@pytest.mark.parametrize("status", [RPCStatusCode.UNAVAILABLE, RPCStatusCode.PERMISSION_DENIED])
def test_a_refused_call_is_error_and_exit_1(monkeypatch: pytest.MonkeyPatch, status: RPCStatusCode) -> None:
    async def connected() -> Any:
        return object()

    async def refusing(*_: Any) -> NoReturn:
        raise RPCError(f"request refused ({status.name})", status, b"")

    monkeypatch.setattr(get, "client", connected)
    monkeypatch.setattr(reads, "service_status", refusing)
    result = CliRunner().invoke(app, ["get", "isvc", "x"], env=ENV)
    assert result.exit_code == 1, result.output
    assert result.stderr.strip() == f"error: request refused ({status.name})"
    assert isinstance(result.exception, SystemExit)


async def test_get_irep_of_a_missing_workflow_exits_1(monkeypatch: pytest.MonkeyPatch, dev_client: Client, task_queue: str) -> None:
    omectl = omectl_runner(monkeypatch, dev_client, task_queue)
    missing = await omectl("get", "irep", "missing", "-n", "omectl-errors")
    assert missing.exit_code == 1, missing.output
    assert missing.stderr.startswith("no workflow irep/omectl-errors/missing")
    assert isinstance(missing.exception, SystemExit)
