"""Issue 17's goals next to what one lifecycle bench run measured: each goal as a line that
says the figure, the ratio to that run's floor where the goal is a time, the goal itself, and
whether it was met, e.g.

    bring-up 200, 1 worker: 21.3 s = 4.3x floor (goal <= 2x): MISSED

A goal the run did not measure (a figure another module provides, a phase skipped) says so
instead of guessing. The bench prints these; nothing asserts them (timing goals live in the
bench, never in tests).
"""

from __future__ import annotations

from dataclasses import dataclass, field

FLOOR_RATIO = 2.0
"""Bring-up and update of 200 Instances: at most twice the floor."""
EVENTS_TO_SERVING = 25
"""History events from start to serving per single-pod Instance."""
EVENTS_PER_LIFECYCLE = 60
"""History events per create-update-delete lifecycle of one Instance."""
REQUESTS_PER_CREATE = 3.0
REQUESTS_PER_UPDATE = 5.0
"""Kubernetes requests per Instance created / updated."""
IDLE_REQUESTS_PER_SECOND = 1.0
"""Kubernetes requests per second, in total, while the idle Instances sit Ready."""
IDLE_ACTIONS_PER_INSTANCE_HOUR = 1.0
"""Temporal actions (activity, timer, signal, child start) per idle Ready Instance per hour."""
SCALE_RATIO_PER_TENFOLD = 10.0
"""2000 Instances in at most 10x the time of 200: linear in the Instance count."""
WORKER_RSS_MIB = 1024.0
RECREATION_P99_SECONDS = 1.0


def verdict(met: bool) -> str:
    return "met" if met else "MISSED"


@dataclass
class Goals:
    """The goal lines of one run, in the order they were checked."""

    lines: list[str] = field(default_factory=list)

    def _add(self, line: str) -> None:
        self.lines.append(line)

    def floor_ratio(self, what: str, seconds: float, floor: float, goal: float = FLOOR_RATIO) -> None:
        """`what` took `seconds`; the floor of the same run took `floor`."""
        ratio = seconds / floor
        self._add(
            f"{what}: {seconds:.1f} s = {ratio:.1f}x floor (goal <= {goal:g}x): {verdict(ratio <= goal)}"
        )

    def at_most(self, what: str, value: float, goal: float, unit: str = "") -> None:
        shown = f"{value:.2f}{unit}" if value < 10 else f"{value:.1f}{unit}"
        self._add(f"{what}: {shown} (goal <= {goal:g}{unit}): {verdict(value <= goal)}")

    def below(self, what: str, value: float, goal: float, unit: str = "") -> None:
        self._add(f"{what}: {value:.2f}{unit} (goal < {goal:g}{unit}): {verdict(value < goal)}")

    def scale(self, small: int, small_seconds: float, large: int, large_seconds: float) -> None:
        """Bring-up of `large` against `small`: the issue's 10x for 2000 against 200, i.e. no
        worse than linear, so the goal is `large / small` times (10x at the issue's sizes)."""
        goal = SCALE_RATIO_PER_TENFOLD * (large / small) / 10.0
        ratio = large_seconds / small_seconds
        self._add(
            f"bring-up {large} vs {small}: {large_seconds:.1f} s / {small_seconds:.1f} s = {ratio:.1f}x "
            f"(goal <= {goal:g}x): {verdict(ratio <= goal)}"
        )

    def same(self, what: str, agree: bool, detail: str = "") -> None:
        self._add(
            f"{what}: {'same' if agree else 'DIFFERENT'}{f' ({detail})' if detail else ''}: {verdict(agree)}"
        )

    def not_measured(self, what: str, why: str) -> None:
        self._add(f"{what}: not measured ({why})")

    def text(self) -> str:
        return "\n".join(self.lines)
