"""The stack's process supervision: readiness, failures that explain themselves, and stops that
end even when a child ignores SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from workers.processes import Child, ChildFailed, first_exit

REPO_ROOT = Path(__file__).resolve().parents[2]


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


async def test_a_child_is_ready_when_its_line_appears_and_lives_in_its_own_group() -> None:
    child = Child("echo", python("import time; print('serving on port 1234', flush=True); time.sleep(60)"),
                  ready_pattern=r"serving on port (\d+)")  # fmt: skip
    await child.start()
    try:
        await child.wait_ready(30, "it to serve")
        assert child.ready_match is not None and child.ready_match.group(1) == "1234"
        assert child.pid is not None and os.getpgid(child.pid) == child.pid
    finally:
        assert await child.stop(10) == -signal.SIGTERM


async def test_a_child_that_exits_before_ready_fails_with_its_last_words() -> None:
    child = Child("broken", python("import sys; print('config file missing: /etc/x'); sys.exit(3)"),
                  ready_pattern="never")  # fmt: skip
    await child.start()
    with pytest.raises(
        ChildFailed, match=r"broken exited with code 3 before it was ready(.|\n)*config file missing"
    ):
        await child.wait_ready(30, "it to serve")


async def test_a_child_that_never_gets_ready_fails_after_the_wait() -> None:
    child = Child("silent", python("import time; print('starting'); time.sleep(60)"), ready_pattern="never")
    await child.start()
    try:
        with pytest.raises(
            ChildFailed, match=r"silent was not ready after 1 s \(it to serve\)(.|\n)*starting"
        ):
            await child.wait_ready(1, "it to serve")
    finally:
        await child.stop(10)


async def test_a_child_ignoring_sigterm_is_killed_after_the_grace() -> None:
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(60)"
    child = Child("stubborn", python(code), ready_pattern="up")
    await child.start()
    await child.wait_ready(30, "it to start")
    assert await child.stop(0.5) == -signal.SIGKILL


async def test_first_exit_names_the_child_that_died() -> None:
    steady = Child("steady", python("import time; time.sleep(60)"))
    short = Child("short", python("pass"))
    for child in (steady, short):
        await child.start()
    try:
        assert await first_exit([steady, short]) is short
        assert steady.returncode is None
    finally:
        await steady.stop(10)


ORPHANING_PARENT = """
import asyncio, sys
from workers.processes import Child

async def main():
    child = Child("sleeper", [sys.executable, "-c", "import time; time.sleep(120)"])
    await child.start()
    print(child.pid, flush=True)
    await asyncio.sleep(120)

asyncio.run(main())
"""


def _alive(pid: int) -> bool:
    """True while `pid` runs; a zombie (dead, not yet reaped by its new parent) counts as gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


def test_children_die_with_a_killed_runner() -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", ORPHANING_PARENT], cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert parent.stdout is not None
        child_pid = int(parent.stdout.readline())
        assert _alive(child_pid)
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 30
    while _alive(child_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child_pid), "a child outlived the killed stack runner"
