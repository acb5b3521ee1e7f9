"""The probe and capacity blocks the TrafficMap tests start from (camelCase, as in
`spec.routing`), each test overriding what it is about: `PROBE | {"failureThreshold": 1}`."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

NOW = datetime(2026, 12, 2, 5, 0, tzinfo=UTC)
PROBE: dict[str, Any] = {
    "path": "/healthz", "method": "GET", "acceptStatuses": [200], "gateStatuses": [503], "period": "10s",
    "timeout": "2s", "failureThreshold": 2, "successThreshold": 1, "allFailedPolicy": "Drain",
}
CAPACITY: dict[str, Any] = {
    "path": "/capacity", "method": "GET", "format": "Report", "samples": 1, "quorum": 1, "period": "10s",
    "timeout": "2s", "maxAge": "1m",
}
