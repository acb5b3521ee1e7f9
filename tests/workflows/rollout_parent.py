"""A stand-in for the InferenceService that collects a Rollout's reports.

In its own module because the sandbox re-imports a workflow's module, and test modules
import the worker (and with it the kubernetes client), which the sandbox refuses.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.rollout.messages import RolloutReport


@workflow.defn(name="FakeRolloutParent")
class FakeRolloutParent:
    def __init__(self) -> None:
        self.reports: list[RolloutReport] = []

    @workflow.signal(name="rollout_changed")
    def rollout_changed(self, report: RolloutReport) -> None:
        self.reports.append(report)

    @workflow.query(name="reports")
    def all_reports(self) -> list[RolloutReport]:
        return self.reports

    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: any(r.outcome for r in self.reports))
