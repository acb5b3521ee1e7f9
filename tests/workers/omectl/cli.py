"""Running omectl in tests: Typer's CliRunner on a thread (each command runs its own event loop,
as the console script does), against a Temporal server and optionally a kubeconfig, with the
process exit replaced by `SystemExit` so the exit code lands in the result."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import NoReturn

import pytest
from click.testing import Result
from temporalio.client import Client
from typer.testing import CliRunner

from workers.omectl import session
from workers.omectl.app import app

Omectl = Callable[..., Awaitable[Result]]


def exit_with(code: int) -> NoReturn:
    raise SystemExit(code)


def omectl_runner(monkeypatch: pytest.MonkeyPatch, client: Client, task_queue: str, kubeconfig: str | None = None) -> Omectl:
    monkeypatch.setattr(session, "finish", exit_with)
    env = {
        "OME_TEMPORAL__ADDRESS": client.service_client.config.target_host,
        "OME_TEMPORAL__NAMESPACE": client.namespace,
        "OME_TEMPORAL__TASK_QUEUE": task_queue,
        "OME_OTEL__OTLP_ENDPOINT": None,
    }
    if kubeconfig is not None:
        env["OME_KUBE__KUBECONFIG"] = kubeconfig

    async def invoke(*args: str) -> Result:
        return await asyncio.to_thread(CliRunner().invoke, app, list(args), env=env)

    return invoke
