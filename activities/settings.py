"""The worker's own settings, handed to workflows through an activity.

Workflows never read the environment; a Rollout that needs the operator's canary settings
(default ready timeout, `metricProviders`, the worker's Prometheus) asks this activity, so
the answer is recorded in its history and replays the same.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio import activity

from models.canary_analysis import ROLLOUT_CANARY_SETTINGS, CanarySettingsResult
from models.routing_ops import ROUTING_SETTINGS, RoutingSettingsResult


class SettingsActivities:
    def __init__(self, canary: CanarySettingsResult | None = None, routing: RoutingSettingsResult | None = None) -> None:
        self.canary = canary or CanarySettingsResult()
        self.routing = routing or RoutingSettingsResult()

    def activities(self) -> list[Callable[..., Any]]:
        return [self.canary_settings, self.routing_settings]

    @activity.defn(name=ROLLOUT_CANARY_SETTINGS)
    def canary_settings(self) -> CanarySettingsResult:
        return self.canary

    @activity.defn(name=ROUTING_SETTINGS)
    def routing_settings(self) -> RoutingSettingsResult:
        """The chart-level routing settings a TrafficMap runs with (`OME_ROUTING__*`)."""
        return self.routing
