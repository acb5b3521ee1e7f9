"""Pause, resume and delete of an InferenceService, as pure decisions (reference §5, §15).

Pause has two depths: `true` (a fleet-change pause) and `freeze` (also stops repairs).
While paused, no Instance starts an update, no new Instance starts (one being created may
finish), migrations neither start nor advance, and spec changes wait; repairs continue at
`true` and stop at `freeze`; kubelet restarts, scale-down and deletion always proceed.
Resume removes either depth. Pausing needs active work to pause, never downgrades a
freeze, and resuming needs a pause; refusals use the spec's wording.

Deletion drains before it deletes: every Instance leaves rotation and is removed by its
InferenceReplica before any pod is deleted; Deployments, Services and
PodDisruptionBudgets go next; then the InferenceReplica objects; the InferenceService
object last, so while anything remains `kubectl get inferenceservice` still shows it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class PauseMode(StrEnum):
    """`ome.io/rollout-paused` values: `true` is Recover (repairs go on), `freeze` stops them."""

    RECOVER = "true"
    FREEZE = "freeze"


REFUSED_ALREADY_PAUSED = "action refused: service is already paused; freeze is preserved"
REFUSED_NOT_PAUSED = "action refused: service has no recognized pause"
REFUSED_NO_WORK = "action refused: no applicable active rollout or lifecycle work was observed"


def parse_pause_mode(value: str | None) -> PauseMode | None:
    """A pause value exactly as the annotation takes it; anything else (e.g. `True`) is no pause."""
    if value == PauseMode.RECOVER.value:
        return PauseMode.RECOVER
    if value == PauseMode.FREEZE.value:
        return PauseMode.FREEZE
    return None


@dataclass(frozen=True)
class PauseDecision:
    mode: PauseMode | None
    refusal: str | None = None


def request_pause(current: PauseMode | None, requested: PauseMode, active_work: bool) -> PauseDecision:
    """Pause at `requested` depth: a freeze is never downgraded, and idle services refuse."""
    if current == PauseMode.FREEZE or current == requested:
        return PauseDecision(current, REFUSED_ALREADY_PAUSED)
    if current is None and not active_work:
        return PauseDecision(None, REFUSED_NO_WORK)
    return PauseDecision(requested)


def request_resume(current: PauseMode | None) -> PauseDecision:
    if current is None:
        return PauseDecision(None, REFUSED_NOT_PAUSED)
    return PauseDecision(None)


@dataclass(frozen=True)
class PausePermissions:
    """What may happen at a pause depth (None: not paused)."""

    start_updates: bool
    create_instances: bool
    migrations: bool
    repairs: bool
    apply_spec: bool
    scale_down: bool = True
    delete: bool = True


def permissions(mode: PauseMode | None) -> PausePermissions:
    if mode is None:
        return PausePermissions(True, True, True, True, True)
    return PausePermissions(
        start_updates=False,
        create_instances=False,
        migrations=False,
        repairs=mode == PauseMode.RECOVER,
        apply_spec=False,
    )


def replica_pause_fields(mode: PauseMode | None) -> tuple[bool, str | None]:
    """`spec.paused` and `spec.pauseMode` projected onto each InferenceReplica."""
    if mode is None:
        return False, None
    return True, "Freeze" if mode == PauseMode.FREEZE else "Recover"


class DeleteStep(StrEnum):
    DRAIN_INSTANCES = "DrainInstances"
    """Each InferenceReplica drains and removes its Instances (pods leave rotation first)."""
    DELETE_DEPLOYMENTS = "DeleteDeployments"
    DELETE_SERVICES = "DeleteServices"
    """Services and PodDisruptionBudgets."""
    DELETE_REPLICAS = "DeleteInferenceReplicas"
    DELETE_ISVC = "DeleteInferenceService"


def delete_steps(has_omenative: bool, has_deployments: bool) -> list[DeleteStep]:
    """The order deletion runs in; steps with nothing to do are left out."""
    steps: list[DeleteStep] = []
    if has_omenative:
        steps.append(DeleteStep.DRAIN_INSTANCES)
    if has_deployments:
        steps.append(DeleteStep.DELETE_DEPLOYMENTS)
    steps.append(DeleteStep.DELETE_SERVICES)
    if has_omenative:
        steps.append(DeleteStep.DELETE_REPLICAS)
    steps.append(DeleteStep.DELETE_ISVC)
    return steps
