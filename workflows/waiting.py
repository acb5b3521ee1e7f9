"""How a workflow waits for news: a message newer than what it last looked at, a deadline
its plan computed, or the slow safety re-check, whichever comes first.

Workflows never poll: handlers only record what arrived and bump a counter, and the main
loop sleeps here until that counter moves (with no timer at all when neither a deadline nor
a safety re-check applies: an idle workflow then costs nothing). `wait_for_news` answers whether the safety
re-check is what woke it, so the caller re-reads what a lost message would have told it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime, timedelta

from temporalio import workflow

MINIMUM_WAIT = timedelta(milliseconds=1)
"""A deadline already past still yields once, so handlers that arrived meanwhile run."""
LEAVE_NEAR_TIMER = "waits-leave-near-timer"
"""`workflow.patched` id, asked only when a kept timer due within `NEAR` is superseded: from it
on, such a timer is left to fire instead of cancelled (`Waits`)."""
NEAR = timedelta(seconds=1)
"""A superseded timer due this soon may fire while the task that would cancel it runs."""
PARK_SAFETY_TIMER = "waits-park-safety-timer"
"""Change id, asked only when a running safety re-check gives way to a shorter wait: from it
on, that timer is parked (left running) instead of cancelled, and the next wait for a re-check
of its length takes it back (`Waits`)."""


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


class Waits:
    """How one workflow waits, run after run of its loop: `wait_for_news` as above, and with
    `keep` (a change each workflow gates for replay) its timer outlives the wait that set it.

    A wait that news ends leaves its timer running, and the next wait keeps it when it stands
    for the same thing: the same deadline of the caller's, or a safety re-check of the same
    length (which then comes `safety` after its timer started, no later than asked). Any other
    timer is cancelled and replaced, as before. So a deadline the plan computes again and again
    (the InferenceReplica's re-list, an Instance's drain) and a resting workflow's re-check are
    one timer however many messages wake the workflow meanwhile: each such wake saves the
    TimerCanceled and TimerStarted events, and no longer cancels a timer in the instant it fires
    (the time-skipping test server strands a workflow whose task does that:
    `tests/fixtures/temporal.py`).

    A timer that is replaced while due within `near` (a deadline of the InferenceReplica's pod
    batches is tens of milliseconds away) is left to fire, unwatched, from `LEAVE_NEAR_TIMER`
    on: it would fire anyway in the instant the task cancelling it runs, and the time-skipping
    test server rejects that task (temporalio/sdk-java#3088) and stalls the workflow for good,
    as the 3-day long run showed of the InferenceReplica. Its firing wakes the workflow once
    (the wait goes on: it watches only its own timer).

    A safety re-check that gives way to a shorter wait (an Instance at rest on its 6-hour net
    told to update, where a lost signal must cost minutes) is parked, from `PARK_SAFETY_TIMER`
    on: left running, unwatched, and taken back by the next wait for a re-check of its length
    (the Instance Ready again), which then comes no later than asked. An update or a deletion
    of a resting workflow so costs the short wait's timer alone, not the long one's
    cancellation and a new one; a parked timer that fires first wakes the workflow once."""

    def __init__(self, keep: bool, near: timedelta = NEAR, takes: Callable[[str], bool] = workflow.patched) -> None:
        self.keep = keep
        self.near = near
        self.takes = takes
        """Whether this run takes a change of this module's (`workflow.patched`, or the
        workflow's own versions)."""
        self.parked: dict[timedelta, tuple[asyncio.Task[None], datetime]] = {}
        """Safety re-check timers left running while a shorter wait went on, by length, with
        their deadlines."""
        self.timer: asyncio.Task[None] | None = None
        self.deadline: datetime | None = None
        self.safety: timedelta | None = None
        """The running timer's re-check length when it is the safety re-check's (None: it is
        a caller's deadline)."""

    def stands_for(self, wake: datetime | None, safety: timedelta | None) -> bool:
        """Whether the running timer serves a wait until `wake`, the safety re-check's of
        length `safety` (None: `wake` is the caller's own deadline)."""
        if wake is None or self.deadline is None or self.safety != safety:
            return False
        return self.deadline <= wake if safety is not None else self.deadline == wake

    def leaves_to_fire(self, now: datetime) -> bool:
        """Whether the running timer, superseded, is left to fire rather than cancelled: it is
        due within `near` (and this run takes `LEAVE_NEAR_TIMER`)."""
        return self.deadline is not None and self.deadline - now <= self.near and self.takes(LEAVE_NEAR_TIMER)

    def park(self, timer: asyncio.Task[None], wake: datetime | None, now: datetime) -> bool:
        """Whether the running timer, superseded, is parked: it is a safety re-check's and the
        new wait ends before it (an idle workflow's long re-check while an operation waits on
        a short one); the operation's end takes it back instead of starting another."""
        safety, deadline = self.safety, self.deadline
        if safety is None or deadline is None or wake is None or wake >= deadline or deadline - now <= self.near:
            return False
        held = self.parked.get(safety)
        if (held is not None and not held[0].done()) or not self.takes(PARK_SAFETY_TIMER):
            return False
        self.parked[safety] = (timer, deadline)
        return True

    def unpark(self, safety: timedelta | None, wake: datetime) -> asyncio.Task[None] | None:
        """The parked re-check of length `safety` when it still runs (it comes no later than
        `wake`: it started earlier), made the running timer again."""
        held = self.parked.pop(safety, None) if safety is not None else None
        if held is None or held[0].done():
            return None
        self.deadline, self.safety = held[1], safety
        return held[0]

    def running(self) -> asyncio.Task[None] | None:
        """The timer a wait left running, if it has not fired."""
        return self.timer if self.timer is not None and not self.timer.done() else None

    async def wait_for_news(
        self, news: Callable[[], bool], until: datetime | None, safety: timedelta | None, summary: str | None = None,
        hold: bool = False,
    ) -> bool:  # fmt: skip
        """As the module's `wait_for_news`; True when the safety re-check's timer woke it.
        `hold`: a moment's wait for news about to come (the watcher showing a write of the
        caller's own): with a timer running it waits on that timer as it is, whatever it stands
        for, and adds no command; with none, as without `hold`."""
        if not self.keep:
            return await wait_for_news(news, until, safety, summary)
        held = self.running() if hold else None
        if held is not None:
            await workflow.wait_condition(lambda: news() or held.done())
            return held.done() and self.safety is not None
        now = workflow.now()
        safe_at = now + safety if safety is not None else None
        wake = min((at for at in (until, safe_at) if at is not None), default=None)
        timer = self.running()
        by_safety = safe_at is not None and wake is not None and wake >= safe_at
        if timer is not None and not self.stands_for(wake, safety if by_safety else None):
            if not self.park(timer, wake, now) and not self.leaves_to_fire(now):
                timer.cancel()
            timer = None
        if timer is None and wake is not None and by_safety:
            timer = self.unpark(safety, wake)
        if timer is None and wake is not None:
            self.deadline, self.safety = wake, safety if by_safety else None
            timer = asyncio.create_task(workflow.sleep(max(wake - now, MINIMUM_WAIT), summary=summary))
        self.timer = timer
        if timer is None:
            await workflow.wait_condition(news)
            return False
        await workflow.wait_condition(lambda: news() or timer.done())
        return timer.done() and self.safety is not None
