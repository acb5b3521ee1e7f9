"""A test-only workflow that takes one canary analysis sample through the real activity, as a
Rollout's canary step does, so the trace test sees a Prometheus HTTP call inside its trace.

Its own module because the workflow sandbox re-imports the module that defines a workflow.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from models.canary_analysis import PROMETHEUS_ANALYSIS_SAMPLE, AnalysisSampleInput, AnalysisSampleResult

ANALYSIS_SAMPLE = "TraceTestAnalysisSample"


@workflow.defn(name=ANALYSIS_SAMPLE)
class AnalysisSampleWorkflow:
    @workflow.run
    async def run(self, sample: AnalysisSampleInput) -> AnalysisSampleResult:
        result: AnalysisSampleResult = await workflow.execute_activity(
            PROMETHEUS_ANALYSIS_SAMPLE,
            sample,
            result_type=AnalysisSampleResult,
            start_to_close_timeout=timedelta(seconds=30),
        )
        return result
