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


class SettingsActivities:
    def __init__(self, canary: CanarySettingsResult | None = None) -> None:
        self.canary = canary or CanarySettingsResult()

    def activities(self) -> list[Callable[..., Any]]:
        return [self.canary_settings]

    @activity.defn(name=ROLLOUT_CANARY_SETTINGS)
    def canary_settings(self) -> CanarySettingsResult:
        return self.canary
