"""Every activity the worker registers, built around the clients it is given."""

from collections.abc import Callable
from typing import Any

from activities.kube import KubeActivities
from activities.prometheus import PrometheusActivities


def build_activities(kube_api_client: Any) -> list[Callable[..., Any]]:
    """Bound activity methods, one list for the worker. Add new activity classes here."""
    activities: list[Callable[..., Any]] = []
    activities += KubeActivities(kube_api_client).activities()
    # Canary analysis reads bearer-token Secrets through the same Kubernetes client.
    activities += PrometheusActivities(kube_api_client).activities()
    return activities
