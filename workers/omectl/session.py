"""What every omectl command shares: the Temporal connection, exit codes and error reporting.

Exit codes follow OME's guarded actions (spec reference §3.3): 0 done, 1 invalid, refused,
declined, timed out or unknown outcome, 3 conflict. Usage errors are Typer's 2. Every send (and
`apply`'s) is bounded by the reference's 45 s budget (`BUDGET_SECONDS`, `within_budget`): with no
worker polling, the SDK would otherwise repeat an Update until one accepts it.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import NoReturn, TypeVar

import typer
from rich.console import Console
from temporalio.client import Client, RPCTimeoutOrCancelledError
from temporalio.exceptions import TemporalError
from temporalio.service import RPCError, RPCStatusCode

from workers.client import connect, exit_process
from workers.config import Settings, SettingsError

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_CONFLICT = 3

BUDGET_SECONDS = 45.0
"""The total budget of an action, reads and send included (spec reference §3.3)."""

stdout = Console(highlight=False, soft_wrap=True)
stderr = Console(stderr=True, highlight=False, soft_wrap=True)

T = TypeVar("T")


class CommandFailed(Exception):
    """An outcome that ends the command with `code` after printing `message` to stderr."""

    def __init__(self, message: str, code: int = EXIT_REFUSED) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def settings() -> Settings:
    """The worker's settings (`OME_TEMPORAL__*` and the rest), read from the environment."""
    try:
        return Settings()
    except SettingsError as error:
        raise CommandFailed(str(error)) from error


async def client() -> Client:
    """A Temporal client configured exactly as the worker's (address, namespace, TLS, API key)."""
    loaded = settings()
    return await connect(loaded.temporal, otel=loaded.otel, role="omectl")


def budget() -> float:
    return BUDGET_SECONDS


_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar("omectl_deadline", default=None)
MIN_RPC_SECONDS = 0.05


def rpc_timeout() -> timedelta:
    """Each call's own deadline: what is left of the budget, so no call outlives it (the SDK
    repeats an Update's call until a worker accepts it: each repeat gets less)."""
    deadline = _deadline.get()
    left = BUDGET_SECONDS if deadline is None else deadline - asyncio.get_running_loop().time()
    return timedelta(seconds=max(MIN_RPC_SECONDS, left))


def timed_out(error: BaseException) -> bool:
    """The budget ran out (or a call's deadline passed) with no answer."""
    if isinstance(error, TimeoutError | RPCTimeoutOrCancelledError):
        return True
    return isinstance(error, RPCError) and error.status in (RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.CANCELLED)


async def within_budget(body: Callable[[], Awaitable[T]], unknown: Callable[[], str]) -> T:
    """`body` within `BUDGET_SECONDS`; past it, exit 1 with `unknown()` (what was, or may have
    been, sent and where to look: the outcome is not known)."""
    token = _deadline.set(asyncio.get_running_loop().time() + BUDGET_SECONDS)
    try:
        async with asyncio.timeout(BUDGET_SECONDS):
            return await body()
    except (TimeoutError, RPCTimeoutOrCancelledError, RPCError) as error:
        if not timed_out(error):
            raise
        raise CommandFailed(unknown()) from error
    finally:
        _deadline.reset(token)


def finish(code: int) -> NoReturn:
    """End the process with `code` (skipping the SDK runtime's finalization, see `exit_process`)."""
    exit_process(code)


def run(command: Callable[[], Awaitable[T]]) -> T:
    """Run an async command body; a `CommandFailed`, an unreachable Temporal, bad settings or any
    other refused call (UNAVAILABLE, PERMISSION_DENIED, ...) end the process with the failure's
    code and its message on stderr, never a traceback."""
    try:
        return asyncio.run(_call(command))
    except CommandFailed as failed:
        stderr.print(failed.message, markup=False)
        finish(failed.code)
    except RPCError as error:
        stderr.print(f"error: {error.message or error}", markup=False)
        finish(EXIT_REFUSED)
    except (ConnectionError, SettingsError, TemporalError) as error:
        stderr.print(f"error: {error}", markup=False)
        finish(EXIT_REFUSED)
    except KeyboardInterrupt:
        finish(130)


async def _call(command: Callable[[], Awaitable[T]]) -> T:
    return await command()


def option_namespace() -> str:
    option: str = typer.Option("default", "--namespace", "-n", help="Namespace of the InferenceService.")
    return option
