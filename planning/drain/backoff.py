"""How long a drain waits before trying again: one doubling back-off, two paces.

- A migration that ended with its Instance still on the node is started again after
  `MIGRATION_RETRY`, doubling per attempt up to `MIGRATION_RETRY_CAP`: a migration is
  expensive (a whole replacement Instance), and what failed it (no room for the surge, a
  deadline, a paused service) rarely clears within seconds. A `RateLimited` failure waits
  out the rate window its message names (`... in the last 1h0m0s`): no earlier try can pass.
- An eviction a PodDisruptionBudget refused is tried again after `EVICTION_RETRY` (the pace
  of `kubectl drain`'s retry loop), doubling up to `EVICTION_RETRY_CAP`, so a budget that
  blocks for hours costs a few history events a minute, not one every five seconds.
- An eviction the API server refused outright (403 Forbidden, an admission webhook, 422) is
  tried again after `EVICTION_FAILED_RETRY`, doubling up to `MIGRATION_RETRY_CAP`: what
  refused it (RBAC, a webhook) needs a person, so the drain waits for one, slowly.
"""

from __future__ import annotations

import re
from datetime import timedelta

from models.duration import parse_duration
from planning.drain import texts

MIGRATION_RETRY = timedelta(seconds=30)
MIGRATION_RETRY_CAP = timedelta(minutes=10)
EVICTION_RETRY = timedelta(seconds=5)
EVICTION_RETRY_CAP = timedelta(minutes=1)
EVICTION_FAILED_RETRY = timedelta(seconds=30)
RATE_LIMITED = "RateLimited"
DEFAULT_RATE_WINDOW = timedelta(hours=1)
"""The chart's `lifecycle.audit.window` (§13), for a RateLimited message that names none."""

_WINDOW = re.compile(r"in the last ([0-9][0-9a-zµμ.]*)\)")


def doubling(attempts: int, first: timedelta, cap: timedelta) -> timedelta:
    """`first` after the first attempt, doubling per further attempt, at most `cap`."""
    exponent = min(max(attempts, 1) - 1, 30)
    delay: timedelta = first * (2**exponent)
    return min(delay, cap)


def rate_window(message: str) -> timedelta:
    """The window a `migration rate cap reached (10/10 in the last 1h0m0s)` message names."""
    found = _WINDOW.search(message)
    if found:
        try:
            return timedelta(seconds=parse_duration(found.group(1)))
        except ValueError:
            pass
    return DEFAULT_RATE_WINDOW


def migration_retry(reason: str | None, message: str, attempts: int) -> tuple[timedelta, str]:
    """The wait before the next migration of an Instance still on the node, and why."""
    if reason == RATE_LIMITED:
        return rate_window(message), texts.RETRY_AFTER_WINDOW
    return doubling(attempts, MIGRATION_RETRY, MIGRATION_RETRY_CAP), texts.RETRY_AFTER_BACKOFF


def eviction_retry(attempts: int) -> timedelta:
    return doubling(attempts, EVICTION_RETRY, EVICTION_RETRY_CAP)


def eviction_failed_retry(attempts: int) -> timedelta:
    return doubling(attempts, EVICTION_FAILED_RETRY, MIGRATION_RETRY_CAP)
