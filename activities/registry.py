"""Every activity the worker registers, built around the clients it is given."""

from collections.abc import Callable
from typing import Any

from activities.gateway import GatewayActivities
from activities.kube import KubeActivities
from activities.kube_nodes import NodeActivities
from activities.migration import MigrationActivities
from activities.prometheus import PrometheusActivities
from activities.settings import SettingsActivities
from activities.workflow_signals import SignalActivities
from models.canary_analysis import CanarySettingsResult
from models.migration import MigrationAudit
from models.routing_ops import RoutingSettingsResult
from planning.rollout.analysis.source import analysis_limits


def build_activities(
    kube_api_client: Any,
    canary: CanarySettingsResult | None = None,
    migration_audit: MigrationAudit | None = MigrationAudit(),
    routing: RoutingSettingsResult | None = None,
    gateway_transport: Any = None,
) -> list[Callable[..., Any]]:
    """Bound activity methods, one list for the worker. Add new activity classes here.

    `gateway_transport`: an `httpx` transport for the home gateways' probes and capacity
    polls (tests); None: real HTTP."""
    activities: list[Callable[..., Any]] = []
    settings = SettingsActivities(canary, routing)
    activities += settings.activities()
    activities += KubeActivities(kube_api_client).activities()
    activities += MigrationActivities(kube_api_client, migration_audit).activities()
    activities += NodeActivities(kube_api_client).activities()
    activities += GatewayActivities(gateway_transport).activities()
    activities += SignalActivities().activities()
    # Canary analysis reads bearer-token Secrets through the same Kubernetes client;
    # `maxConcurrency` and `cacheTTL` apply at start (spec reference §2.2).
    limits = analysis_limits(settings.canary.analysis)
    activities += PrometheusActivities(kube_api_client, limits.max_concurrency, limits.cache_ttl_seconds).activities()
    return activities
