"""The lifecycle bench's CPU meter: what it reads from /proc and how it compares two phases."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import uuid

import pytest

from bench.cpu_meter import CpuMeter, CpuUse, pid_running, process_seconds, thread_seconds


def spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_a_thread_and_a_process_are_read_by_their_own_cpu_time() -> None:
    ident: list[int] = []
    done = threading.Event()

    def work() -> None:
        ident.append(threading.get_native_id())
        spin(0.3)
        done.wait()

    thread = threading.Thread(target=work)
    thread.start()
    while not ident:
        time.sleep(0.01)
    meter = CpuMeter({"thread": lambda: thread_seconds(ident[0])})
    meter.start()
    time.sleep(0.5)  # the thread spins; this one sleeps
    use = meter.stop()
    done.set()
    thread.join()
    assert 0.15 <= use.by_source["thread"] <= 0.5
    assert use.busy >= use.by_source["thread"] - 0.05
    # A process gone reads 0, not an error.
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert process_seconds(child.pid) == 0.0


def test_a_process_is_found_by_its_command_line() -> None:
    word = f"marker-{uuid.uuid4().hex}"
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", word])
    try:
        deadline = time.monotonic() + 5
        while pid_running(word) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert pid_running(word, "time.sleep") == child.pid
        assert pid_running(word, "no-such-word") is None
    finally:
        child.kill()
        child.wait()


@pytest.mark.parametrize(
    ("large", "small", "factor", "says"),
    [
        # Ten times the Instances for ten times the CPU: as much per Instance.
        ({"server": 60.0, "worker": 40.0}, {"server": 6.0, "worker": 4.0}, 10, "1.00x (server 1.00x, worker 1.00x)"),
        # The worker grew faster than the Instance count, the server slower.
        ({"server": 50.0, "worker": 60.0}, {"server": 6.0, "worker": 4.0}, 10, "1.10x (server 0.83x, worker 1.50x)"),
        # A source the small phase never used has no ratio.
        ({"server": 60.0, "kubesim": 5.0}, {"server": 6.0}, 10, "1.08x (server 1.00x, kubesim -)"),
    ],
)
def test_growth_per_instance(large: dict[str, float], small: dict[str, float], factor: float, says: str) -> None:
    big = CpuUse(wall=100.0, busy=sum(large.values()), by_source=large)
    assert big.growth(CpuUse(wall=10.0, busy=sum(small.values()), by_source=small), factor) == says


def test_the_line_says_how_many_cores_were_busy() -> None:
    use = CpuUse(wall=10.0, busy=18.0, by_source={"server": 8.0, "worker": 10.0})
    assert use.line().startswith("18.0 s busy in 10.0 s (1.80 of ")
    assert use.line().endswith("cores): server 8.0, worker 10.0")


def test_a_reading_within_a_phase_counts_from_its_start_and_the_phase_goes_on() -> None:
    clock = iter([1.0, 3.0, 5.0])
    meter = CpuMeter({"source": lambda: next(clock)})
    meter.start()
    within = meter.so_far()
    whole = meter.stop()
    assert within.by_source == {"source": 2.0}
    assert whole.by_source == {"source": 4.0}
    assert whole.wall >= within.wall >= 0


def test_parts_are_summed_by_name_and_a_missing_one_counts_nothing() -> None:
    use = CpuUse(wall=10.0, busy=18.0, by_source={"worker": 7.0, "watcher": 1.5, "server": 8.0})
    assert use.of("worker", "watcher") == 8.5
    assert use.of("worker", "absent") == 7.0
    assert use.of() == 0.0
