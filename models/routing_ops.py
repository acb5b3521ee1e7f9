"""Activity names and payloads of the TrafficMap's HTTP observations and routing settings
(spec reference §17-§21).

- `routing.observe_homes`: one batch per period, the due health probes (§19) and capacity
  polls (§18) of every home at once, so a history reads one line per period.
- `routing.settings`: the worker's chart-level routing settings (`OME_ROUTING__*`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

ROUTING_OBSERVE_HOMES = "routing.observe_homes"
ROUTING_SETTINGS = "routing.settings"


class _Op(BaseModel):
    model_config = ConfigDict(extra="forbid")


class HttpTarget(_Op):
    """One request: `url` is `<entry.endpoint><path>`; no body, no credentials, no redirects."""

    cluster: str
    url: str
    method: Literal["GET", "HEAD", "POST"] = "GET"
    timeout_seconds: float = Field(gt=0)


class ObserveHomesInput(_Op):
    probes: list[HttpTarget] = Field(default_factory=list)
    capacity: list[HttpTarget] = Field(default_factory=list)


class ProbeAnswer(_Op):
    """A probe's HTTP status, or the transport error (DNS, connect, TLS, timeout) without it."""

    cluster: str
    status: int | None = None
    error: str | None = None


class CapacityAnswer(_Op):
    """A valid report (`servable`, `observed_at`), or `failure`: a §18 fallbackReason text."""

    cluster: str
    servable: int | None = None
    observed_at: datetime | None = None
    failure: str | None = None


class ObserveHomesResult(_Op):
    probes: list[ProbeAnswer] = Field(default_factory=list)
    capacity: list[CapacityAnswer] = Field(default_factory=list)


class RoutingSettingsResult(_Op):
    """The chart-level routing settings, checked when the worker started."""

    global_gateway: str = ""
    backend_port: int = 0
    global_host_template: str = ""
    resync_interval_seconds: float = 60.0
    probe: dict[str, Any] | None = None
    """The chart's `routing.probe` (camelCase, as in `spec.routing.probe`); None: no probes."""
    capacity: dict[str, Any] | None = None
    """The chart's `routing.capacity`; None: no capacity polling."""
