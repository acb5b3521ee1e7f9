"""The CPU seconds a bench phase cost, by process, read from /proc.

The lifecycle bench runs the dev server, the worker(s), the watcher and kubesim on one machine.
When a phase keeps the machine's cores busy, its time is its CPU seconds over the cores it got,
and a ratio between two phases (2,000 Instances against 200) is the ratio of their CPU seconds:
which process spent more per Instance at the larger size says where the time grew. This module
reads those seconds: the machine's busy time (`/proc/stat`), each process's own (`/proc/<pid>/stat`)
and one thread's (kubesim runs in a thread of the bench's process).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")
IDLE_FIELDS = (3, 4)
"""`/proc/stat`'s `cpu` line: user nice system idle iowait irq softirq steal ...; idle and iowait
are the cores' rest, the others their work."""


def machine_busy_seconds() -> float:
    """CPU seconds every core of the machine has spent working since boot."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:9]
    return sum(int(value) for index, value in enumerate(fields) if index not in IDLE_FIELDS) / TICKS


def stat_seconds(path: str) -> float:
    """utime + stime of a `/proc/.../stat` file (a process's or a thread's); 0 once it is gone."""
    try:
        text = Path(path).read_text()
    except OSError:
        return 0.0
    fields = text.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def process_seconds(pid: int) -> float:
    return stat_seconds(f"/proc/{pid}/stat")


def thread_seconds(native_id: int) -> float:
    """A thread of this process (`threading.Thread.native_id`)."""
    return stat_seconds(f"/proc/self/task/{native_id}/stat")


def pid_running(*words: str) -> int | None:
    """The first process whose command line holds every one of `words` (the dev server, by its
    database's path)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if all(word in command for word in words):
            return int(entry.name)
    return None


@dataclass(frozen=True)
class CpuUse:
    """One phase: its wall time, the machine's busy seconds in it, and each named source's."""

    wall: float
    busy: float
    by_source: Mapping[str, float]

    def line(self) -> str:
        """`16.2 s busy in 9.0 s (1.80 cores): server 6.1, worker 6.1, ...`"""
        cores = self.busy / self.wall if self.wall > 0 else 0.0
        parts = ", ".join(f"{name} {seconds:.1f}" for name, seconds in self.by_source.items())
        return f"{self.busy:.1f} s busy in {self.wall:.1f} s ({cores:.2f} of {os.cpu_count()} cores)" + (
            f": {parts}" if parts else ""
        )

    def of(self, *names: str) -> float:
        """The seconds of the named sources together (those missing count 0)."""
        return sum(self.by_source.get(name, 0.0) for name in names)

    def growth(self, smaller: CpuUse, factor: float) -> str:
        """Per Instance, this phase's CPU seconds against `smaller`'s, which had `factor` times
        fewer Instances: `1.17x (server 1.18x, ...)`; 1x is linear."""

        def ratio(large: float, small: float) -> str:
            return f"{large / small / factor:.2f}x" if small > 0 else "-"

        parts = ", ".join(
            f"{name} {ratio(seconds, smaller.by_source.get(name, 0.0))}" for name, seconds in self.by_source.items()
        )
        return f"{ratio(self.busy, smaller.busy)} ({parts})"


class CpuMeter:
    """Reads the machine and the named sources (name -> a reader of cumulative CPU seconds) at a
    phase's start and end."""

    def __init__(self, sources: Mapping[str, Callable[[], float]]) -> None:
        self.sources = dict(sources)
        self._start: tuple[float, float, dict[str, float]] | None = None

    def _read(self) -> tuple[float, float, dict[str, float]]:
        return time.monotonic(), machine_busy_seconds(), {name: read() for name, read in self.sources.items()}

    def start(self) -> None:
        self._start = self._read()

    def so_far(self) -> CpuUse:
        """From the start to now; the phase goes on (a phase's CPU up to a point within it)."""
        assert self._start is not None, "read before start()"
        (wall0, busy0, by0), (wall1, busy1, by1) = self._start, self._read()
        return CpuUse(wall1 - wall0, busy1 - busy0, {name: by1[name] - by0[name] for name in by1})

    def stop(self) -> CpuUse:
        return self.so_far()
