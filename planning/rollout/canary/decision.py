"""What one call of the canary machine decided (spec reference §1.3-§1.7, §2.4, §2.7).

The Rollout workflow acts on every field and keeps `state` for the next call:
- `capacities`: per component, the count that must serve on the canary revision and the
  limit the InferenceReplica may hold there (`Coordination.limit`); rolling back, 0 and the
  stable revision to return to.
- `traffic_weight`: the canary's recorded weight (`status...traffic[]`, `CanaryState.to_status`).
- `sample`: take this sample now and answer with its verdict in a later observation.
- `wake_at`: call again at this time if nothing else happens first (a timed gate or bake
  ends, `scaleDownDelaySeconds` runs out, a ready timeout expires, the next sample is due).
- `events`: record them on the InferenceService, in order.
- `rollback_started` (`ome_canary_rollback_total{cause}`) and `outcome` (the canary
  completed or rolled back during this call).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from planning.rollout.canary.capacity import ComponentCapacity
from planning.rollout.canary.sampling import SampleRequest
from planning.rollout.canary.state import CanaryState
from planning.rollout.canary.texts import EventType, RollbackCause


@dataclass(frozen=True)
class CanaryEvent:
    type: EventType
    reason: str
    message: str


@dataclass(frozen=True)
class CanaryDecision:
    state: CanaryState
    capacities: Mapping[str, ComponentCapacity] = field(default_factory=dict)
    traffic_weight: int = 0
    sample: SampleRequest | None = None
    next_sample_at: datetime | None = None
    wake_at: datetime | None = None
    events: tuple[CanaryEvent, ...] = ()
    rollback_started: RollbackCause | None = None
    outcome: Literal["Completed", "RolledBack"] | None = None
