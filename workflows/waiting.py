"""How a workflow waits for news: a message newer than what it last looked at, a deadline
its plan computed, or the slow safety re-check, whichever comes first.

Workflows never poll: handlers only record what arrived and bump a counter, and the main
loop sleeps here until that counter moves. `wait_for_news` answers whether the safety
re-check is what woke it, so the caller re-reads what a lost message would have told it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from temporalio import workflow

MINIMUM_WAIT = timedelta(milliseconds=1)
"""A deadline already past still yields once, so handlers that arrived meanwhile run."""


async def wait_for_news(
    news: Callable[[], bool], until: datetime | None, safety: timedelta, summary: str | None = None
) -> bool:
    """Sleep until `news()` holds, `until`, or `safety` from now; True when the safety re-check
    woke it (`until`, when earlier, is the caller's own deadline: False). `summary` labels
    the wait's timer in the UI."""
    now = workflow.now()
    safe_at = now + safety
    wake = min(until, safe_at) if until is not None else safe_at
    timeout = max(wake - now, MINIMUM_WAIT)
    try:
        await workflow.wait_condition(news, timeout=timeout, timeout_summary=summary)
    except TimeoutError:
        return wake >= safe_at
    return False
