"""Child processes of the local stack: started in their own process groups, stopped in order.

Each child gets its own process group so that the terminal's Ctrl-C reaches only the stack
runner, which then stops the children one by one in the order that keeps state safe (the
worker before kubesim, kubesim before the Temporal server). Their output is copied to ours,
each line prefixed with the child's name, and watched for the line that says it is ready.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import re
import signal
import sys
from collections import deque
from collections.abc import Mapping, Sequence

_TAIL_LINES = 30
"""Lines of a child's output kept to explain a failed start or an unexpected exit."""

_LINE_LIMIT = 1 << 20
"""Longest output line read whole; a JSON log line of a big object can pass the 64 KiB default."""


_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def _die_with_parent() -> None:
    """Runs in the child before exec: ask Linux to SIGTERM it if the stack runner dies.

    The children live in their own process groups, so nothing else would stop them when the
    runner is killed outright (SIGKILL, an OOM kill): they would hold the ports until found.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class ChildFailed(RuntimeError):
    """A child exited, or did not become ready, when the stack needed it running."""


class Child:
    """One supervised child process of the stack."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        ready_pattern: str | None = None,
        stop_hint: str = "",
        standby_of: str | None = None,
    ) -> None:
        self.name = name
        self.standby_of = standby_of
        """The Lease its replicas share (`ome-controller`, ...) when another replica can lead
        while it is down: the stack restarts it after an unexpected exit, as a Deployment would."""
        self.restarts: list[float] = []
        """When (monotonic) it was restarted after an unexpected exit."""
        self.argv = list(argv)
        self.env = dict(env) if env is not None else None
        self.stop_hint = stop_hint
        self._ready_pattern = re.compile(ready_pattern) if ready_pattern else None
        self._ready = asyncio.Event()
        self.ready_match: re.Match[str] | None = None
        self._tail: deque[str] = deque(maxlen=_TAIL_LINES)
        self._process: asyncio.subprocess.Process | None = None
        self._pump: asyncio.Task[None] | None = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    @property
    def returncode(self) -> int | None:
        return self._process.returncode if self._process else None

    def tail(self) -> str:
        """The last lines the child printed, for error messages."""
        return "\n".join(f"    {line}" for line in self._tail) or "    (no output)"

    async def start(self) -> None:
        if self._process is not None:
            self._tail.append(f"--- {self.name} restarted ---")
        self._ready.clear()
        self.ready_match = None
        self._process = await asyncio.create_subprocess_exec(
            *self.argv,
            env=self.env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            limit=_LINE_LIMIT,
            # Own process group: the terminal's SIGINT goes to the stack runner only, which
            # forwards it in a safe order instead of every process dying at once.
            process_group=0,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )
        self._pump = asyncio.create_task(self._copy_output(), name=f"output of {self.name}")
        if self._ready_pattern is None:
            self._ready.set()

    async def _copy_output(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        prefix = f"[{self.name}] "
        async for raw in self._process.stdout:
            line = raw.decode(errors="replace").rstrip()
            self._tail.append(line)
            sys.stdout.write(prefix + line + "\n")
            sys.stdout.flush()
            if not self._ready.is_set() and self._ready_pattern is not None:
                match = self._ready_pattern.search(line)
                if match:
                    self.ready_match = match
                    self._ready.set()

    async def wait_exit(self) -> int:
        assert self._process is not None
        code = await self._process.wait()
        if self._pump is not None:
            # The pipe closes with the process; finishing the copy keeps its last words. Shielded
            # because several waiters share the copy and one being cancelled must not stop it.
            await asyncio.shield(self._pump)
        return code

    async def wait_ready(self, within: float, what: str) -> None:
        """Wait until the ready line appears; fail with the child's output if it exits first."""
        print(f"waiting for {self.name}: {what} (up to {within:.0f} s)", flush=True)
        ready = asyncio.ensure_future(self._ready.wait())
        exited = asyncio.ensure_future(self.wait_exit())
        done, _ = await asyncio.wait({ready, exited}, timeout=within, return_when=asyncio.FIRST_COMPLETED)
        ready.cancel()
        if ready in done:
            exited.cancel()
            return
        if exited in done:
            raise ChildFailed(
                f"{self.name} exited with code {exited.result()} before it was ready "
                f"({' '.join(self.argv)}); its last output:\n{self.tail()}"
            )
        exited.cancel()
        raise ChildFailed(
            f"{self.name} was not ready after {within:.0f} s ({what}); its last output:\n{self.tail()}"
        )

    def signal(self, signum: int) -> None:
        if self._process is None or self._process.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._process.pid, signum)

    async def stop(self, grace: float) -> int | None:
        """SIGTERM the child's group, wait up to `grace` seconds, then SIGKILL it. Returns the exit code."""
        if self._process is None:
            return None
        if self._process.returncode is None:
            hint = f" ({self.stop_hint})" if self.stop_hint else ""
            print(f"stopping {self.name}{hint}, waiting up to {grace:.0f} s", flush=True)
            self.signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.wait_exit(), grace)
            except TimeoutError:
                print(f"{self.name} did not stop within {grace:.0f} s: killing it", flush=True)
                self.signal(signal.SIGKILL)
        code = await self.wait_exit()
        print(f"{self.name} stopped (exit code {code})", flush=True)
        return code


RESTART_WINDOW_SECONDS = 600.0
"""A replica restarted this often within this window is crash-looping: the stack stops."""
RESTARTS_WITHIN_WINDOW = 5
LONGEST_RESTART_DELAY_SECONDS = 30.0


def restart_delay(restarts: Sequence[float], now: float) -> float | None:
    """Seconds to wait before restarting a replica that just exited, given when (monotonic) it
    was restarted before; None when it crash-loops (`RESTARTS_WITHIN_WINDOW` restarts in the
    last `RESTART_WINDOW_SECONDS`). 1 s the first time, doubling with each recent restart."""
    recent = sum(1 for at in restarts if now - at < RESTART_WINDOW_SECONDS)
    if recent >= RESTARTS_WITHIN_WINDOW:
        return None
    return min(LONGEST_RESTART_DELAY_SECONDS, float(2**recent))


async def first_exit(children: Sequence[Child]) -> Child:
    """Wait until any of the children exits and return it."""
    waits = {asyncio.ensure_future(child.wait_exit()): child for child in children}
    try:
        done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        # Of several gone at once, one nothing stands by for first: it stops the stack.
        return min((waits[future] for future in done), key=lambda child: child.standby_of is not None)
    finally:
        for future in waits:
            future.cancel()
