"""How a workflow waits for news: a message newer than what it last looked at, a deadline
its plan computed, or the slow safety re-check, whichever comes first.

Workflows never poll: handlers only record what arrived and bump a counter, and the main
loop sleeps here until that counter moves (with no timer at all when neither a deadline nor
a safety re-check applies: an idle workflow then costs nothing). `wait_for_news` answers whether the safety
re-check is what woke it, so the caller re-reads what a lost message would have told it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from temporalio import workflow

MINIMUM_WAIT = timedelta(milliseconds=1)
"""A deadline already past still yields once, so handlers that arrived meanwhile run."""


async def wait_for_news(
    news: Callable[[], bool], until: datetime | None, safety: timedelta | None, summary: str | None = None
) -> bool:
    """Sleep until `news()` holds, `until`, or `safety` from now; True when the safety re-check
    woke it (`until`, when earlier, is the caller's own deadline: False). `safety` None: no
    re-check (another workflow's net covers this one), and with no `until` either, no timer.
    `summary` labels the wait's timer in the UI."""
    now = workflow.now()
    safe_at = now + safety if safety is not None else None
    wake = min((at for at in (until, safe_at) if at is not None), default=None)
    if wake is None:
        await workflow.wait_condition(news)
        return False
    timeout = max(wake - now, MINIMUM_WAIT)
    try:
        await workflow.wait_condition(news, timeout=timeout, timeout_summary=summary)
    except TimeoutError:
        return safe_at is not None and wake >= safe_at
    return False
