"""The Instance's reports to its parent InferenceReplica (`instance_changed`).

A report is the whole status at the moment it is composed, sent when its fingerprint differs
from the last one delivered. `report` sends and waits. Under `versions.REPORT_BESIDE_NEXT_STEP`
the loop's report after each step goes out beside the next step (`report_beside`): composed at
once, delivered in order after any still on their way, while the next step's Kubernetes calls
run. Every `report` (a wait's included, before it picks its safety timer), a continue-as-new
and the run's end wait for those first, so the parent hears the same reports in the same
order, only no longer ahead of the step that follows. Under `versions.UPDATE_REPORTS_COUNTED`
a report the parent counts already from its own update request is not sent
(`planning.instance.reports.counted_by_request`), and under `versions.DELETION_COUNTED` one
that only tells it of the deletion it asked for (`planning.instance.reports.deletion_counted`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from models.instance import PARENT_SIGNAL_INSTANCE_CHANGED, InstanceStatus
    from planning.instance.reports import (
        counted_by_request,
        deletion_counted,
        deletion_wait_news,
        shows_a_wait,
        wait_changed,
    )
    from planning.instance.state import InstanceState, build_status, report_fingerprint
    from workflows.instance.versions import (
        COUNTED_WAITS_REPORTED,
        REPORT_BACK_TO_DELIVERED,
        UPDATE_REPORTS_COUNTED,
    )
    from workflows.parent import deliver, signal_local

REPORT_BUSY_WITHIN = timedelta(seconds=0.3)
"""How long a report tries a parent its server calls busy before it is answered busy (`REPORT_BUSY_LATER`)."""
REPORT_AGAIN = timedelta(seconds=0.5)
"""How soon a report answered busy goes again: the wait's timer (`report_again_at`)."""


@dataclass(frozen=True)
class Report:
    parent: str
    status: InstanceStatus
    fingerprint: tuple[object, ...]


class InstanceReports:
    state: InstanceState
    last_report: tuple[object, ...] | None
    """The fingerprint of the last report the parent took (or that needs no sending)."""
    delivered: InstanceStatus | None = None
    """The last report the parent took (or counts from its launch record), as it was sent."""
    local_report: bool = False
    """Whether this run reports to its parent through a local activity (`REPORT_BY_LOCAL_ACTIVITY`)."""
    reports_beside: bool = False
    """Whether the loop's reports go out beside the next step (`REPORT_BESIDE_NEXT_STEP`)."""
    reports_waits: bool = False
    """Whether a wait's start or end is news to the parent (`WAITS_REPORTED`, decided at the run's start)."""
    counted_deletion: bool = False
    """Whether the deletion under way is one the parent counts from its request
    (`DeleteRequest.counted_since`, `DELETION_COUNTED`; decided when the deletion starts)."""
    sending: asyncio.Task[None] | None = None
    """The last report sent beside a step, until it has been delivered (or refused)."""
    reports_busy_later: bool = False
    """Whether a report a busy parent refuses is answered at once and sent again shortly
    (`REPORT_BUSY_LATER`, decided at the run's start)."""
    report_again_at: datetime | None = None
    """When the last report, refused by a busy parent, goes again (the wait wakes for it)."""

    takes: Callable[[str], bool]
    """Whether this run takes a change (`InstanceOperations.takes`, `workflows.instance.versions`)."""

    async def report(self, held_drain: bool = False) -> None:
        """Tell the parent InferenceReplica when something it counts has changed, or (with
        `held_drain`) that a rollout run now holds this Instance's drain: the run counts its
        serving surge pod as the new revision's, which the counts alone would not show."""
        await self.reports_sent()
        composed = self.compose_report(held_drain)
        if composed is not None:
            await self.send_report(composed)

    def report_beside(self) -> None:
        """The loop's report: composed now, delivered while the next step runs."""
        if not self.reports_beside:
            raise RuntimeError("report_beside needs REPORT_BESIDE_NEXT_STEP; use report")
        composed = self.compose_report(held_drain=False)
        if composed is None:
            return
        before = self.sending

        async def send() -> None:
            if before is not None:
                await before
            await self.send_report(composed)

        self.sending = asyncio.create_task(send())

    async def reports_sent(self) -> None:
        """Wait until every report sent beside a step has been delivered or refused."""
        while self.sending is not None:
            sending = self.sending
            await sending
            if self.sending is sending:
                self.sending = None

    def compose_report(self, held_drain: bool) -> Report | None:
        """The report of the status now; None when it is the one last delivered and none is on
        its way, or when the Instance has no parent (then it counts as delivered). A status back
        to the one last delivered while another is on its way is composed all the same: that
        other one would otherwise leave the parent holding a status already gone (`send_report`
        compares again once it is the report's turn)."""
        status = build_status(self.state, workflow.now())
        fingerprint = self.fingerprint(status) + (("held_drain",) if held_drain else ())
        if fingerprint == self.last_report and (self.sending is None or not self.takes(REPORT_BACK_TO_DELIVERED)):
            return None
        if not held_drain and self.counted_by_parent(status):
            self.last_report = fingerprint
            return None
        parent = self.state.spec.parent_workflow_id
        info_parent = workflow.info().parent
        if parent is None and info_parent is not None:
            parent = info_parent.workflow_id
        if parent is None:
            self.last_report = fingerprint
            return None
        return Report(parent, status, fingerprint)

    def fingerprint(self, status: InstanceStatus) -> tuple[object, ...]:
        """What a report is compared by: `report_fingerprint`, with the operation's wait under
        `WAITS_REPORTED`."""
        return report_fingerprint(status, waits=self.reports_waits)

    def counted_by_parent(self, status: InstanceStatus) -> bool:
        """Whether the parent counts `status` from its own request already, so it is not sent:
        a deletion it asked for (`deletion_counted`), or an update
        (`planning.instance.reports.counted_by_request`, `UPDATE_REPORTS_COUNTED`) unless the
        report says the update waits (`shows_a_wait`, `COUNTED_WAITS_REPORTED`). Under
        `WAITS_REPORTED`, never one whose wait started or ended since the last report taken;
        for a deletion, only a wait of the deletion's own (`deletion_wait_news`)."""
        if self.counted_deletion:
            news = self.reports_waits and deletion_wait_news(self.delivered, status)
            return not news and deletion_counted(self.delivered, status)
        if self.reports_waits and wait_changed(self.delivered, status):
            return False
        if not counted_by_request(self.delivered, status, self.state.update_counted_by_parent):
            return False
        if not self.takes(UPDATE_REPORTS_COUNTED):
            return False
        return not (shows_a_wait(status) and self.takes(COUNTED_WAITS_REPORTED))

    async def send_report(self, report: Report) -> None:
        # Compared again: one composed beside a step that brought no change since the last
        # delivered is not sent twice.
        if report.fingerprint == self.last_report:
            return
        if self.local_report:
            summary = f"report {report.status.phase.value} to {report.parent}"
            busy_within = REPORT_BUSY_WITHIN if self.reports_busy_later else None
            result = await signal_local(report.parent, PARENT_SIGNAL_INSTANCE_CHANGED, report.status, summary, busy_within)
            delivered = result.delivered
            self.report_again_at = workflow.now() + REPORT_AGAIN if result.busy else None
        else:
            delivered = await deliver(report.parent, PARENT_SIGNAL_INSTANCE_CHANGED, report.status)
        if delivered:
            self.last_report = report.fingerprint
            self.delivered = report.status
