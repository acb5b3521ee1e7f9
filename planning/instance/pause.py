"""What a pause lets one Instance do (spec reference §5, §9), as pure decisions.

The InferenceReplica tells each Instance the component's pause depth (`set_pause`):
`Recover` (the annotation's `true`, a fleet-change pause) or `Freeze` (repairs stop too).

While paused, whatever the depth:
- no update starts: an update that arrives waits until resume (`hold_update`);
- an in-flight single-pod SurgeThenDrain stops before the old pod drains: the new pod
  serves, the old one keeps serving, the operation waits `Paused` (`surge_may_drain`);
  other in-flight updates finish;
- the readiness deadline stops and restarts in full on resume: a `Paused` hold on the
  readiness clock, like the other holds (`readiness_holds`);
- under restart policy `None`, a pod deleted during a pause is not replaced: the Instance
  shows `Pending` until resume (`pending_may_rebuild`).

Repairs (restart on pod failure under RecreateInstanceOnPodRestart, rebuild after a failure,
recreating a Failed Instance) go on at `Recover` and stop at `Freeze`; a repair already in
flight finishes (`repairs_allowed`, `on_pod_failure`). Kubelet restarts, scale-down and
deletion always proceed.

Also what the InferenceReplica sends: which Instances need telling (`instances_to_tell`).
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from models.instance import InstancePauseMode, InstancePhase, RestartPolicy
from planning.instance.health import HOLD_PAUSED


def is_paused(mode: InstancePauseMode | None) -> bool:
    return mode is not None


def hold_update(mode: InstancePauseMode | None) -> bool:
    """True when an arriving update must wait for resume instead of starting (§5)."""
    return mode is not None


def surge_may_drain(mode: InstancePauseMode | None, drain_hold: str | None = None) -> bool:
    """Whether an in-flight single-pod SurgeThenDrain may drain its old pod now: not paused
    (§5), and no rollout run holds the drain (gate `Pairing`, §6)."""
    return mode is None and drain_hold is None


def repairs_allowed(mode: InstancePauseMode | None) -> bool:
    """Repairs continue at `Recover` and stop at `Freeze` (§5)."""
    return mode != "Freeze"


def pending_may_rebuild(mode: InstancePauseMode | None) -> bool:
    """A `Pending` Instance (restart policy None, all pods lost) is rebuilt only unpaused (§5)."""
    return mode is None


def readiness_holds(mode: InstancePauseMode | None) -> list[str]:
    """Holds the pause puts on the readiness clock: it stops, and restarts in full on resume."""
    return [HOLD_PAUSED] if mode is not None else []


def retry_timers_run(mode: InstancePauseMode | None, phase: InstancePhase) -> bool:
    """Whether the retry back-off and rebuild timers can lead anywhere now.

    A Failed Instance is recreated when they run out, unless frozen. Elsewhere they pace
    the next update attempt (Ready) or a rebuild, which no pause lets start.
    """
    if phase == InstancePhase.FAILED:
        return repairs_allowed(mode)
    return mode is None


class PodFailureAction(StrEnum):
    """What a Ready Instance does about a failed pod."""

    RESTART = "Restart"
    """Recreate the whole Instance with a new incarnation (RecreateInstanceOnPodRestart)."""
    PENDING = "Pending"
    """Restart policy None and every pod lost: rest `Pending`, rebuild when allowed."""
    KUBELET = "Kubelet"
    """Restart policy None: the kubelet restarts the container; note the new baseline."""
    WAIT = "Wait"
    """Frozen: leave the failure as it is until resume."""


def on_pod_failure(
    mode: InstancePauseMode | None, restart_policy: RestartPolicy, lost_all: bool
) -> PodFailureAction:
    """The Ready Instance's answer to a pod failure at pause depth `mode`."""
    if restart_policy == RestartPolicy.RECREATE_INSTANCE_ON_POD_RESTART:
        return PodFailureAction.RESTART if repairs_allowed(mode) else PodFailureAction.WAIT
    # Going Pending is no repair, just the truth; rebuilding from Pending waits for resume.
    return PodFailureAction.PENDING if lost_all else PodFailureAction.KUBELET


def instances_to_tell(
    told: str | None,
    mode: str | None,
    indexes: Iterable[int],
    removing: Iterable[int],
) -> list[int]:
    """The Instances the InferenceReplica signals when the pause (`set_pause`) or a rollout
    run's drain hold (`hold_drain`) changed.

    `told` is what the Instances were last told; when it equals `mode` nobody needs telling.
    Instances being removed are left out: scale-down and deletion proceed whatever the pause.
    """
    if told == mode:
        return []
    leaving = set(removing)
    return sorted(index for index in set(indexes) if index not in leaving)
