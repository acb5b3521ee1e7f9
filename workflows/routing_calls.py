"""Typed workflow-side calls of the routing activities (`models.routing_ops`): the worker's
routing settings, and one period's probes and capacity polls of the home gateways.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

from models import routing_ops

SETTINGS_TIMEOUT = timedelta(seconds=10)
OBSERVE_MARGIN = timedelta(seconds=10)
"""Beyond the longest request timeout of the batch: a hung worker, not a slow gateway."""
OBSERVE_RETRY = RetryPolicy(maximum_attempts=2, initial_interval=timedelta(seconds=1))
"""One retry for a lost worker; a period's observation that fails is skipped, the next comes."""


async def routing_settings() -> routing_ops.RoutingSettingsResult:
    result: routing_ops.RoutingSettingsResult = await workflow.execute_local_activity(
        routing_ops.ROUTING_SETTINGS,
        result_type=routing_ops.RoutingSettingsResult,
        start_to_close_timeout=SETTINGS_TIMEOUT,
        summary="read the worker's routing settings (OME_ROUTING__*)",
    )
    return result


async def observe_homes(arg: routing_ops.ObserveHomesInput, *, summary: str) -> routing_ops.ObserveHomesResult:
    longest = max((t.timeout_seconds for t in [*arg.probes, *arg.capacity]), default=1.0)
    result: routing_ops.ObserveHomesResult = await workflow.execute_activity(
        routing_ops.ROUTING_OBSERVE_HOMES,
        arg,
        result_type=routing_ops.ObserveHomesResult,
        start_to_close_timeout=timedelta(seconds=longest) + OBSERVE_MARGIN,
        retry_policy=OBSERVE_RETRY,
        summary=summary,
    )
    return result
