"""Whether a `scale` signal to an InferenceService can be honoured, and if not, why.

`temporal workflow signal --name scale --input '{"component": "engine", "replicas": 3}'` sets
a transient count (until the next apply). A signal has no reply, so a refused one must
be visible elsewhere: the workflow records a Warning Event `ScaleRejected` on the
InferenceService (`kubectl describe isvc` / `kubectl get events` show it) and keeps the last
refused request in its `status` query. This module decides and words it; the message names
the field, the value and the fix.

`release_held` and `reset_instances` go to a component's InferenceReplica; sent to a component
without one (unknown, or not OMENative) they are refused the same way (`forward_refusal`,
Event `RequestRejected`).

A request is refused when:
- `component` is not one of the InferenceService's components;
- the component runs in a mode this product does not run (`MultiNode`), so nothing scales;
- `replicas` is not a whole number >= 0, or lies outside `[minReplicas, maxReplicas]`
  (`maxReplicas` unset or 0 means no upper bound). Out-of-range values are refused rather
  than silently clamped, so a user who asks for 10 with maxReplicas 4 learns why nothing
  happened instead of seeing 4.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

SCALE_REJECTED = "ScaleRejected"
"""Reason of the Warning Event recorded on the InferenceService for a refused `scale`."""


@dataclass(frozen=True)
class ScalableComponent:
    """What the InferenceService knows about one of its components, for a `scale` check."""

    mode: str
    min_replicas: int
    max_replicas: int | None


@dataclass(frozen=True)
class ScaleVerdict:
    """Accepted with `replicas`, or refused with `message` (the Event's and status's text)."""

    component: str
    replicas: int | None = None
    message: str = ""

    @property
    def accepted(self) -> bool:
        return self.replicas is not None


def _range(component: ScalableComponent) -> str:
    high = "no maximum" if component.max_replicas is None else str(component.max_replicas)
    return f"{component.min_replicas}..{high}"


def check_scale(
    component: str, replicas: object, components: Mapping[str, ScalableComponent]
) -> ScaleVerdict:
    """The verdict on `scale` of `component` to `replicas`, given the InferenceService's components."""
    known = components.get(component)
    if known is None:
        names = ", ".join(sorted(components)) or "none yet"
        return ScaleVerdict(
            component,
            message=(
                f"scale refused: component={component!r} is not a component of this InferenceService "
                f"(components: {names}); send the scale to one of them, or add spec.{component} with apply"
            ),
        )
    if known.mode == "MultiNode":
        return ScaleVerdict(
            component,
            message=(
                f"scale refused: component {component} runs in MultiNode mode, which this product does "
                f'not run, so it has nothing to scale; remove spec.{component}.annotations["ome.io/'
                'deploymentMode"] with apply to run it on OMENative'
            ),
        )
    whole = isinstance(replicas, int) and not isinstance(replicas, bool)
    in_range = (
        whole
        and isinstance(replicas, int)
        and replicas >= known.min_replicas
        and (known.max_replicas is None or replicas <= known.max_replicas)
    )
    if not in_range:
        return ScaleVerdict(
            component,
            message=(
                f"scale refused: replicas={replicas!r} for component {component} must be an integer "
                f">= 0 within minReplicas..maxReplicas ({_range(known)}); send a value in range or "
                "change minReplicas/maxReplicas with apply"
            ),
        )
    assert isinstance(replicas, int)
    return ScaleVerdict(component, replicas=replicas)


REQUEST_REJECTED = "RequestRejected"
"""Reason of the Warning Event for a `release_held` / `reset_instances` that has no target."""

_FORWARDED_PURPOSE = {
    "release_held": "with held revisions to release",
    "reset_instances": "with Instances to reset",
}


def forward_refusal(signal: str, component: str, modes: Mapping[str, str]) -> str | None:
    """Why a signal meant for a component's InferenceReplica cannot be passed on, or None.

    Only OMENative components have an InferenceReplica (and so held revisions and Instances
    to reset); `modes` maps each running component to its deployment mode.
    """
    mode = modes.get(component)
    if mode == "OMENative":
        return None
    purpose = _FORWARDED_PURPOSE.get(signal, "to steer")
    if mode is None:
        names = ", ".join(sorted(modes)) or "none yet"
        return (
            f"{signal} refused: component={component!r} is not a component of this InferenceService "
            f"(components: {names}); send it to one of them"
        )
    return (
        f"{signal} refused: component {component} runs in {mode} mode, which has no InferenceReplica "
        f"{purpose}; {signal} applies to OMENative components only (set "
        f'spec.{component}.annotations["ome.io/deploymentMode"] to OMENative with apply to use it)'
    )
