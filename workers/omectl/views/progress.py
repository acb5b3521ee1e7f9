"""`omectl apply --wait`: what one look at the InferenceService's `status` query says about
getting to Ready, as one progress line, and, when the wait runs out, what blocks it.

Ready means the workflow has observed the applied generation, its `Ready` condition is True,
and every OMENative component serves its update revision (a paused service can be Ready on
the previous one). A component line reads `engine 1/2 serving`, then its canary step or rollout phase and
the gate holding it (`held at Budget: per-Component surge budget 1 exhausted ...`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from models.isvc_status import ComponentStatus
from workflows.service.messages import ServiceStatusView


@dataclass(frozen=True)
class Progress:
    ready: bool
    line: str
    blocking: str
    """The gate and reason holding it (a component's `rolloutHold`), else the `Ready`
    condition's reason and message: what a timeout names."""


def component_line(name: str, status: ComponentStatus, desired: int | None) -> str:
    lifecycle = status.lifecycle
    serving = lifecycle.serving_replicas if lifecycle is not None else 0
    wanted = desired if desired is not None else (lifecycle.replicas if lifecycle is not None else 0)
    line = f"{name} {serving}/{wanted} serving"
    if status.canary is not None and status.rollout_phase not in (None, "Stable"):
        line += f", canary step {status.canary.current_step + 1} {status.rollout_phase}"
    elif status.rollout_phase not in (None, "Stable"):
        line += f", {status.rollout_phase}"
    if lifecycle is not None and lifecycle.rollout_hold is not None:
        line += f", held at {lifecycle.rollout_hold.gate}"
    return line


def rolled_out(status: ComponentStatus) -> bool:
    lifecycle = status.lifecycle
    return lifecycle is None or lifecycle.update_revision is None or lifecycle.current_revision == lifecycle.update_revision


def blocking(view: ServiceStatusView) -> str:
    if view.pause is not None:
        return f"pause={view.pause}: changes wait for `omectl resume {view.name} -n {view.namespace}`"
    for name, status in view.status.components.items():
        hold = status.lifecycle.rollout_hold if status.lifecycle is not None else None
        if hold is not None:
            return f"{name}: gate {hold.gate}: {hold.reason}"
    found = view.status.condition("Ready")
    if found is None:
        return f"phase {view.phase}: no Ready condition reported yet"
    return f"Ready={found.status} {found.reason}: {found.message}".rstrip(": ")


def progress(view: ServiceStatusView, generation: int, desired: Mapping[str, int | None]) -> Progress:
    """`generation`: the one `apply` answered; `desired`: each component's Instance count."""
    found = view.status.condition("Ready")
    observed = view.status.observed_generation or 0
    ready = (
        found is not None
        and found.status == "True"
        and observed >= generation
        and all(rolled_out(status) for status in view.status.components.values())
    )
    parts = [
        component_line(name, status, desired.get(name))
        for name, status in sorted(view.status.components.items())
    ]
    state = "Ready" if ready else view.phase
    line = f"generation {generation} ({state}): " + ("; ".join(parts) if parts else "no component reported yet")
    return Progress(ready=ready, line=line, blocking=blocking(view))
