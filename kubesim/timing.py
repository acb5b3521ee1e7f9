"""Simulated time: how long image pulls, container starts and readiness take, and one factor that
scales every other wait (grace periods, toleration windows, back-offs, the time a container takes
to exit on SIGTERM) so tests stay fast while keeping the ratios a real cluster has.
"""

from __future__ import annotations

import datetime as dt
import random
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ImageBehavior:
    """How the simulated container runtime treats one image."""

    pull_seconds: float | None = None  # None: use the cluster default
    start_seconds: float | None = None
    ready_seconds: float | None = None
    fail_pull: bool = False
    crash: bool = False
    # A ready container stops passing its readiness probe this long after becoming ready.
    unready_after_seconds: float | None = None
    # Seconds (scaled by the factor, like the grace period it races) the container takes to exit
    # after SIGTERM. None: use the cluster default; negative: it ignores SIGTERM and is killed
    # (exit 137) when the grace period ends.
    stop_seconds: float | None = None


@dataclass
class Timing:
    """Default phase durations in seconds plus the factor applied to Kubernetes' own timeouts."""

    pull_seconds: float = 2.0
    start_seconds: float = 1.0
    ready_seconds: float = 2.0
    # Multiplies grace periods, tolerationSeconds, crash back-off and image-pull back-off:
    # 1.0 behaves like a real cluster, 0.01 turns a 30 s grace period into 0.3 s.
    factor: float = 1.0
    # Default time from SIGTERM to container exit, in cluster seconds scaled by `factor`. A model
    # server exits within a few seconds; the grace period is only the bound before SIGKILL.
    # None or negative: containers ignore SIGTERM and are killed at the end of the grace period.
    stop_seconds: float | None = 1.0
    images: dict[str, ImageBehavior] = field(default_factory=dict)

    @classmethod
    def fast(cls) -> Timing:
        """Instant-ish timing for tests: phases take a few tens of milliseconds."""
        return cls(pull_seconds=0.02, start_seconds=0.02, ready_seconds=0.02, factor=0.01)

    def behavior(self, image: str) -> ImageBehavior:
        return self.images.get(image) or self.images.get(image.rsplit(":", 1)[0]) or ImageBehavior()

    def phase_seconds(self, image: str) -> tuple[float, float, float]:
        b = self.behavior(image)
        return (
            self.pull_seconds if b.pull_seconds is None else b.pull_seconds,
            self.start_seconds if b.start_seconds is None else b.start_seconds,
            self.ready_seconds if b.ready_seconds is None else b.ready_seconds,
        )

    def stop_after(self, image: str) -> float | None:
        """Scaled seconds from SIGTERM to this image's exit, or None when it ignores SIGTERM."""
        own = self.behavior(image).stop_seconds
        seconds = self.stop_seconds if own is None else own
        return None if seconds is None or seconds < 0 else self.scaled(seconds)

    def scaled(self, seconds: float) -> float:
        return max(0.0, seconds * self.factor)


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def timestamp(at: dt.datetime | None = None) -> str:
    """RFC 3339 with second precision, as metav1.Time serialises."""
    return (at or now()).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_timestamp(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # the apiserver's generateName alphabet


def random_suffix(length: int = 5) -> str:
    return "".join(random.choices(_SUFFIX_ALPHABET, k=length))
