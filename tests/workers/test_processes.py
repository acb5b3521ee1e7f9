"""The stack's process supervision: readiness, failures that explain themselves, and stops that
end even when a child ignores SIGTERM."""

from __future__ import annotations

import os
import signal
import socket
import sys
from pathlib import Path

import pytest

from workers.config import Settings, StackSettings
from workers.processes import Child, ChildFailed, first_exit
from workers.stack import run_stack


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


async def test_the_stack_refuses_a_busy_port_and_names_the_setting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        settings = Settings(stack=StackSettings(data_dir=tmp_path, frontend_port=port))
        assert await run_stack(settings) == 1
    output = capsys.readouterr().out
    assert f"127.0.0.1:{port} is already in use" in output
    assert "OME_STACK__FRONTEND_PORT" in output
