"""A test-only workflow: one regular `kube.read_object` call with a heartbeat timeout much
shorter than the request takes (`test_kube_heartbeat.py`).

Its own module because the workflow sandbox re-imports the module that defines a workflow.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from models.kube_ops import KUBE_READ_OBJECT, ObjectRef, ReadObjectInput, ReadObjectResult

SLOW_CALL = "KeepAliveTestSlowCall"


@workflow.defn(name=SLOW_CALL)
class SlowCallWorkflow:
    @workflow.run
    async def run(self, heartbeat_seconds: float) -> bool:
        result = await workflow.execute_activity(
            KUBE_READ_OBJECT,
            ReadObjectInput(ref=ObjectRef(api_version="v1", kind="Namespace", name="default")),
            result_type=ReadObjectResult,
            start_to_close_timeout=timedelta(minutes=1),
            heartbeat_timeout=timedelta(seconds=heartbeat_seconds),
            # One attempt: a heartbeat timeout fails the workflow instead of hiding in a retry.
            retry_policy=RetryPolicy(maximum_attempts=1),
        )
        return result.found
