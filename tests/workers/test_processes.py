"""The stack's process supervision: readiness, failures that explain themselves, and stops that
end even when a child ignores SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from workers.processes import Child, ChildFailed, first_exit, restart_delay
from workers.stack import _serve

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


RESTART_CASES = {
    "first exit: 1 s": ([], 100.0, 1.0),
    "one recent restart: 2 s": ([90.0], 100.0, 2.0),
    "four recent restarts: 16 s": ([10.0, 20.0, 30.0, 40.0], 100.0, 16.0),
    "fifth within ten minutes: crash-looping": ([10.0, 20.0, 30.0, 40.0, 50.0], 100.0, None),
    "old restarts are forgiven": ([0.0, 1.0, 2.0, 3.0, 4.0], 1000.0, 1.0),
}


@pytest.mark.parametrize(("restarts", "now", "delay"), RESTART_CASES.values(), ids=RESTART_CASES.keys())
def test_restart_delay_doubles_and_gives_up_on_a_crash_loop(
    restarts: list[float], now: float, delay: float | None
) -> None:
    assert restart_delay(restarts, now) == delay


class PairAndSingle:
    """What `_serve` needs of a Stack: two controller replicas (each the other's standby) and a
    process nothing stands by for."""

    def __init__(self) -> None:
        sleeper = python("import time; print('up', flush=True); time.sleep(120)")
        self.partner = Child("controller", sleeper, standby_of="ome-controller")
        self.replica = Child("controller-2", sleeper, standby_of="ome-controller")
        self.single = Child("worker", sleeper)
        self.children = [self.single, self.partner, self.replica]

    async def start_all(self) -> None:
        for child in self.children:
            await child.start()

    def banner(self) -> str:
        return "ready"


async def test_a_killed_replica_is_restarted_and_a_killed_single_process_stops_the_stack(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("workers.stack.restart_delay", lambda restarts, now: 0.1 if len(restarts) < 2 else None)
    stack = PairAndSingle()
    stop = asyncio.ensure_future(asyncio.Event().wait())
    serving = asyncio.create_task(_serve(stack, stop))  # type: ignore[arg-type]
    try:
        for restart in (1, 2):
            await wait_for(lambda: stack.replica.pid is not None and stack.replica.returncode is None)
            pid = stack.replica.pid
            os.kill(pid, signal.SIGKILL)  # type: ignore[arg-type]
            await wait_for(lambda killed=pid: stack.replica.pid != killed and stack.replica.returncode is None)
            assert len(stack.replica.restarts) == restart
            assert not serving.done()
        out = capsys.readouterr().out
        assert out.count(
            "controller-2 exited unexpectedly with code -9; another replica takes over Lease ome-controller; "
            "restarting controller-2 in 0.1 s"
        ) == 2, out
        # The third exit is a crash loop (as the patched policy says): the stack stops.
        os.kill(stack.replica.pid, signal.SIGKILL)  # type: ignore[arg-type]
        assert await asyncio.wait_for(serving, 10) == 1
        assert "controller-2 exited unexpectedly with code -9 (5 restarts within 10 min: it crash-loops)" in (
            capsys.readouterr().out
        )
        # A process nothing stands by for stops the stack at once.
        for child in (stack.single, stack.partner):
            await child.stop(5)
        serving = asyncio.create_task(_serve(stack, stop))  # type: ignore[arg-type]
        await wait_for(lambda: stack.single.returncode is None and stack.replica.returncode is None)
        os.kill(stack.single.pid, signal.SIGKILL)  # type: ignore[arg-type]
        assert await asyncio.wait_for(serving, 10) == 1
        assert "worker exited unexpectedly with code -9; stopping the stack" in capsys.readouterr().out
    finally:
        serving.cancel()
        stop.cancel()
        for child in stack.children:
            await child.stop(5)


async def wait_for(condition: Callable[[], bool], within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, "not within 10 s"
        await asyncio.sleep(0.05)


async def test_of_two_children_gone_at_once_the_one_without_a_standby_comes_first() -> None:
    replica = Child("watcher-2", python("pass"), standby_of="ome-watcher")
    single = Child("worker", python("pass"))
    for child in (replica, single):
        await child.start()
    for child in (replica, single):
        await child.wait_exit()
    assert await first_exit([replica, single]) is single
    assert await first_exit([single, replica]) is single
