"""A stop that hangs ends all the same: the process says what still ran and exits with code 1,
within its budget, whether a task waits forever or a blocking call holds the event loop."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.e2e.running_stack import REPO_ROOT

PROGRAM = textwrap.dedent(
    """
    import asyncio, logging, time
    from workers.stopping import handle_stop_signals

    async def release_the_lease_forever():
        await asyncio.Event().wait()

    async def main():
        logging.basicConfig(level=logging.INFO)
        stop = asyncio.Event()
        handle_stop_signals(asyncio.get_running_loop(), stop, "controller", 0.5)
        print("ready", flush=True)
        if "{blocked}" == "before":
            time.sleep(60)  # a blocking call holds the event loop when the signal comes
        await stop.wait()
        if "{blocked}" == "after":
            time.sleep(60)  # a blocking call on the event loop itself
        await asyncio.create_task(release_the_lease_forever(), name="release the lease")

    asyncio.run(main())
    """
)


@pytest.mark.parametrize("blocked", ["no", "after", "before"], ids=["task-waits-forever", "loop-blocked", "blocked-at-signal"])
def test_a_hanging_stop_reports_what_still_runs_and_exits(blocked: str) -> None:
    process = subprocess.Popen(
        [sys.executable, "-c", PROGRAM.format(blocked=blocked)],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "ready"
        process.send_signal(subprocess.signal.SIGTERM)  # type: ignore[attr-defined]
        _, stderr = process.communicate(timeout=20)
    finally:
        process.kill()
    assert process.returncode == 1, stderr
    if blocked != "no":
        # The event loop never ran the report: the C-level watchdog dumped the threads' stacks.
        assert "Timeout (0:00:02.500000)!" in stderr, stderr
        assert "time.sleep" in stderr or "in main" in stderr, stderr
    else:
        assert "controller did not stop within 0.5s of the stop signal: exiting with code 1" in stderr, stderr
        assert "release the lease" in stderr and "release_the_lease_forever" in stderr, stderr


CLEAN = textwrap.dedent(
    """
    import asyncio, threading, time
    from workers.stopping import handle_stop_signals

    async def main():
        stop = asyncio.Event()
        handle_stop_signals(asyncio.get_running_loop(), stop, "watcher", 30.0)
        for _ in range(8):  # threads the kernel may hand the signal to (the SDK's, the pools')
            threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
        print("ready", flush=True)
        await stop.wait()  # an idle loop: no timer would wake it
        print("stopped", flush=True)

    asyncio.run(main())
    """
)


def test_an_idle_process_stops_at_once_whichever_thread_the_signal_reaches() -> None:
    for _ in range(5):
        process = subprocess.Popen(
            [sys.executable, "-c", CLEAN], cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        try:
            assert process.stdout is not None
            assert process.stdout.readline().strip() == "ready"
            process.send_signal(subprocess.signal.SIGTERM)  # type: ignore[attr-defined]
            stdout, stderr = process.communicate(timeout=5)
        finally:
            process.kill()
        assert process.returncode == 0 and "stopped" in stdout, stderr
