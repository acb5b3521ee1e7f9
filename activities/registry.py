"""Every activity the worker registers, built around the clients it is given."""

from collections.abc import Callable
from typing import Any

from activities.kube import KubeActivities
from activities.prometheus import PrometheusActivities
from activities.settings import SettingsActivities
from models.canary_analysis import CanarySettingsResult


def build_activities(kube_api_client: Any, canary: CanarySettingsResult | None = None) -> list[Callable[..., Any]]:
    """Bound activity methods, one list for the worker. Add new activity classes here."""
    activities: list[Callable[..., Any]] = []
    activities += SettingsActivities(canary).activities()
    activities += KubeActivities(kube_api_client).activities()
    # Canary analysis reads bearer-token Secrets through the same Kubernetes client.
    activities += PrometheusActivities(kube_api_client).activities()
    return activities
