"""A stand-in for the InferenceReplica workflow that collects an Instance's reports.

In its own module because the sandbox re-imports a workflow's module, and test modules
import the worker (and with it the kubernetes client), which the sandbox refuses.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from models.instance import InstanceStatus


@workflow.defn(name="FakeParent")
class FakeParent:
    """Stands in for the InferenceReplica: collects the Instance's reports."""

    def __init__(self) -> None:
        self.reports: list[InstanceStatus] = []

    @workflow.signal(name="instance_changed")
    def instance_changed(self, status: InstanceStatus) -> None:
        self.reports.append(status)

    @workflow.query(name="phases")
    def phases(self) -> list[str]:
        return [r.phase.value for r in self.reports]

    @workflow.query(name="serving_reports")
    def serving_reports(self) -> list[tuple[str, int, str]]:
        """(phase, serving pods, operation step) of every report, in order."""
        return [
            (r.phase.value, r.serving_pods, r.operation.step if r.operation is not None else "")
            for r in self.reports
        ]

    @workflow.query(name="waits")
    def waits(self) -> list[tuple[str, str]]:
        """(phase, what its operation waits on) of every report, in order."""
        return [
            (r.phase.value, (r.operation.waiting or "") if r.operation is not None else "") for r in self.reports
        ]

    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: any(r.deleted for r in self.reports))
