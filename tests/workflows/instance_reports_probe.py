"""A workflow that drives `InstanceReports` alone: one report awaited, then two beside steps
whose statuses go away from it and back. In its own module because the sandbox re-imports a
workflow's module (see `instance_parent`)."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from models.instance import InstancePhase, InstanceSpec
    from planning.instance.state import InstanceState
    from workflows.instance.reports import InstanceReports


@workflow.defn(name="InstanceReportsProbe")
class InstanceReportsProbe(InstanceReports):
    def __init__(self) -> None:
        self.last_report = None
        self.local_report = True
        self.reports_beside = True
        self.back_to_delivered = True

    def takes(self, change: str) -> bool:
        return self.back_to_delivered

    @workflow.run
    async def run(self, spec: InstanceSpec, back_to_delivered: bool) -> None:
        self.back_to_delivered = back_to_delivered
        self.state = InstanceState(spec=spec, phase=InstancePhase.READY)
        await self.report()
        self.state.phase = InstancePhase.UPDATING
        self.report_beside()  # on its way while the status goes back
        self.state.phase = InstancePhase.READY
        self.report_beside()
        await self.reports_sent()
