"""What the Rollout workflow tells the canary machine on each call (spec reference §1.3-§1.5,
§2.4, §2.5, §5).

`CanaryObservation` is built by the workflow from what it last heard: each component's
counts as its InferenceReplica reported them, the service's pause, and the verdict of the
sample the machine asked for last (`SampleVerdict`, from the analysis package's judging).
Operator requests are not here: accepted ones wait in the state's `Mailbox`
(`planning.rollout.canary.steering`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

Verdict = Literal["Pass", "Fail", "Inconclusive"]


@dataclass(frozen=True)
class ComponentObservation:
    """One component of the canary group, as its InferenceReplica last reported it."""

    target: str
    """The revision hash the spec asks for now (a newer one than the canary's restarts it)."""
    desired: int | None
    """`minReplicas` as set in the InferenceService; None when unset (§1.3, `capacity`)."""
    instances: int
    """Instances the component runs now, any revision (autoscaled ones included)."""
    ready_canary: int
    """Instances serving on the canary revision."""
    on_canary: int = 0
    """Instances on, or moving to or from, the canary revision: a rollback is done at 0."""
    stable_retained: bool = True
    """The stable revision's ControllerRevision is still kept (rollback needs it)."""


@dataclass(frozen=True)
class SampleVerdict:
    """The judged outcome of one `SampleRequest`; every request gets exactly one (an error
    taking it is `Inconclusive`)."""

    sequence: int
    time: datetime
    """When the queries were evaluated (`lastEvaluationTime`)."""
    verdict: Verdict
    metric_results: tuple[Mapping[str, Any], ...] = ()
    """`status...canary.metricResults[]` in wire form, opaque here."""


@dataclass(frozen=True)
class CanaryObservation:
    run_id: str
    """The run the workflow is (`targetID` after a restart)."""
    components: Mapping[str, ComponentObservation] = field(default_factory=dict)
    paused: bool = False
    """`ome.io/rollout-paused` in force at either depth (§5)."""
    sample: SampleVerdict | None = None
    """The verdict received since the last call, if any."""
