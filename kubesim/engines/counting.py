"""One pod's request counters and time-to-first-token histogram, grown by whole requests.

Counting is deterministic rather than sampled, so a test can predict the figures exactly: of
every `n` requests a pod has answered under one behaviour, `floor(n x error_ratio + phase)`
failed, where `phase` in [0, 1) is `error_phase` of the pod's name, and of the successful ones
`floor(s x P(ttft <= le))` fall in the bucket `le`, where P is the log-normal distribution of
`behavior.py`. The phase spreads the pods' errors over time as real engines' are: without it,
pods that began serving together would all fail their 100th request (at 1%) at once. When the
behaviour changes, the new requests follow the new one and nothing already counted moves.
Every figure only ever grows, and the buckets stay cumulative (each at most the next, the last
equal to the count).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from functools import cache

from kubesim.engines.behavior import TTFT_LOG_SIGMA, EngineBehavior

TTFT_BUCKETS: tuple[float, ...] = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
"""Upper bounds (seconds) of the time-to-first-token buckets, `+Inf` implied: from a cached
prefix (10 ms) to a cold start of a large model (30 s)."""

# Sums of k x ratio over many steps come out a hair below the exact product (0.1 x 10 =
# 0.9999999999999999); a request is not to be lost to that.
_ROUNDING = 1e-9


@cache
def ttft_distribution(mean_seconds: float) -> tuple[float, ...]:
    """P(ttft <= bound) for each bucket bound, for a log-normal with this mean."""
    mu = math.log(mean_seconds) - TTFT_LOG_SIGMA**2 / 2
    return tuple(
        0.5 * (1.0 + math.erf((math.log(bound) - mu) / (TTFT_LOG_SIGMA * math.sqrt(2.0)))) for bound in TTFT_BUCKETS
    )


def error_phase(pod: str) -> float:
    """Where in [0, 1) the error count of the pod named `pod` starts: fixed by the name, so a test
    can predict it, and spread across names. 60 pods that start serving together and share 20
    requests a second answer about one request each per 3 s: with no phase, none of them fails
    for 5 minutes at 1%, then all fail at once, and the share of errors over a 30 s window reads
    0, then 0.05 (a good canary would fail an analysis of `error_rate LT 0.05`). With it, the
    share stays near 0.01 over any such window."""
    digest = hashlib.blake2b(pod.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def _whole(credit: float) -> int:
    return math.floor(credit + _ROUNDING)


def _nearest(credit: float) -> int:
    return math.floor(credit + 0.5)


@dataclass
class SeriesCounts:
    """What one engine has answered since it started."""

    requests: int = 0
    """Requests answered, successful or not."""

    errors: int = 0
    """Requests answered with HTTP 500."""

    ttft_sum: float = 0.0
    """Seconds to first token, summed over the successful requests."""

    buckets: list[int] = field(default_factory=lambda: [0] * len(TTFT_BUCKETS))
    """Successful requests whose time to first token was at most each bound (cumulative)."""

    error_phase: float = 0.0
    """Where the error count starts, in [0, 1): `error_phase` of the pod's name. At 0, the first
    failed request is request number 1 / error_ratio."""

    _error_credit: float = field(init=False)
    _bucket_credit: list[float] = field(default_factory=lambda: [0.0] * len(TTFT_BUCKETS))

    def __post_init__(self) -> None:
        self._error_credit = self.error_phase

    @property
    def successes(self) -> int:
        return self.requests - self.errors

    def answer(self, new_requests: int, behavior: EngineBehavior) -> None:
        """Count `new_requests` more requests answered the way `behavior` says."""
        if new_requests <= 0:
            return
        self.requests += new_requests
        self._error_credit += new_requests * behavior.error_ratio
        # At most every new request fails: the success count never goes down.
        errors = min(_whole(self._error_credit), self.errors + new_requests)
        new_successes = new_requests - (errors - self.errors)
        self.errors = errors
        if new_successes == 0:
            return
        self.ttft_sum += new_successes * behavior.ttft_seconds
        successes = self.successes
        for position, probability in enumerate(ttft_distribution(behavior.ttft_seconds)):
            self._bucket_credit[position] += new_successes * probability
            self.buckets[position] = min(_nearest(self._bucket_credit[position]), successes)
