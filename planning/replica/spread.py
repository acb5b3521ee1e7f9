"""Topology spread of an OMENative engine's or decoder's Instances (spec page 003).

The leader pod of each Instance, or its only pod, gets one Kubernetes topology spread
constraint, so the scheduler counts the component's Instances per domain:

- `maxSkew: 1`; `topologySpread: Required` -> `whenUnsatisfiable: DoNotSchedule`,
  `Preferred` -> `ScheduleAnyway`; unset -> no spread.
- The domain label is `topologySpreadKey`, else `topologyKey`; with neither there is no
  spread.
- The selector counts this component's Instances only: pods of this InferenceService and
  component whose role is `leader` or `default` (one pod per Instance, workers excluded),
  of every revision, so an old pod that still serves during a surge or a migration counts
  (spec 003: "The old pod counts, and keeps serving, until the new one is ready").
  Engine and decoder select different component labels, so they spread separately.
- `nodeAffinityPolicy` and `nodeTaintsPolicy` keep Kubernetes' defaults (Honor, Ignore):
  only domains with a node the pods select count, and a cordoned or tainted domain still
  counts, exactly as the troubleshooting tables describe.
- A constraint that the runtime or the InferenceService already set on the same key is
  kept unchanged (spec 003: "OME keeps it").

Runtime values are defaults under the InferenceService's (`models.resolution`
`effective_component` merges them). The spread is not part of the revision hash, so adding
it changes only new pods; `topologyKey` on a component with workers is, so changing it
rolls a new revision. Workers follow their leader through a required pod affinity on
`topologyKey`, which the Instance renders (`planning.instance.pods`).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Literal

from models.inferenceservice import ComponentSpec
from models.pods import LABEL_COMPONENT, LABEL_ISVC, LABEL_ROLE

INSTANCE_ROLES = ("leader", "default")
"""The one pod of each Instance that the spread counts."""

WHEN_UNSATISFIABLE: dict[str, str] = {"Required": "DoNotSchedule", "Preferred": "ScheduleAnyway"}


@dataclass(frozen=True)
class SpreadSettings:
    """The three fields, as the effective component (or InferenceReplica spec) holds them."""

    topology_spread: Literal["Required", "Preferred"] | None = None
    topology_spread_key: str | None = None
    topology_key: str | None = None

    @classmethod
    def of(cls, component: ComponentSpec) -> SpreadSettings:
        return cls(
            topology_spread=component.topology_spread,
            topology_spread_key=component.topology_spread_key,
            topology_key=component.topology_key,
        )

    @property
    def key(self) -> str | None:
        """The domain label: `topologySpreadKey`, else `topologyKey`."""
        return self.topology_spread_key or self.topology_key or None


def instance_selector(isvc: str, component: str) -> dict[str, Any]:
    """Selects one pod per Instance of this component: its leader or its only pod."""
    return {
        "matchLabels": {LABEL_ISVC: isvc, LABEL_COMPONENT: component},
        "matchExpressions": [{"key": LABEL_ROLE, "operator": "In", "values": list(INSTANCE_ROLES)}],
    }


def spread_constraint(settings: SpreadSettings, isvc: str, component: str) -> dict[str, Any] | None:
    """The constraint for the leader (or only) pod, or None when nothing asks for a spread."""
    if settings.topology_spread is None:
        return None
    key = settings.key
    if key is None:
        return None
    return {
        "maxSkew": 1,
        "topologyKey": key,
        "whenUnsatisfiable": WHEN_UNSATISFIABLE[settings.topology_spread],
        "labelSelector": instance_selector(isvc, component),
    }


def with_spread(pod_spec: dict[str, Any], constraint: dict[str, Any] | None) -> dict[str, Any]:
    """`pod_spec` (a copy) with the constraint added, unless one on that key is already set."""
    result = copy.deepcopy(pod_spec)
    if constraint is None:
        return result
    existing: list[dict[str, Any]] = list(result.get("topologySpreadConstraints") or [])
    if any(item.get("topologyKey") == constraint["topologyKey"] for item in existing):
        return result
    result["topologySpreadConstraints"] = [*existing, constraint]
    return result


def spread_summary(settings: SpreadSettings) -> str:
    """One line for status and history: what the spread does, or why there is none."""
    if settings.topology_spread is None:
        return "no topology spread (topologySpread is unset)"
    key = settings.key
    if key is None:
        return "no topology spread (neither topologySpreadKey nor topologyKey is set)"
    return (
        f"Instances spread over {key} ({settings.topology_spread}: "
        f"{WHEN_UNSATISFIABLE[settings.topology_spread]})"
    )
