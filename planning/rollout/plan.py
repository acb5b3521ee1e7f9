"""The plan a rollout run pins at its start (spec reference §4, §6; the rollout groups page).

`spec.rollout.groups` resolves into one `GroupPlan` per group: its components, its
progression (`blueGreen` unless the group sets another), the budgets and ratio tolerance
that progression reads, its soak, and its digest. A run pins the whole `RolloutPlan` so an
edit to `spec.rollout` during the run applies to the next one.

Digests (§4): a group's digest is `rp1:` + the first 12 hex of the SHA-256 of its rendered
progression, compact JSON with sorted keys (`{"blueGreen":{}}` for the default group, hence
the reference's `rp1:cca45ec1fb0f`); the plan digest is `rp1:` + the first 12 hex of the
SHA-256 of the group digests, in group order, joined with `|`.

A plan that cannot resolve at run start parks the run (`Parked`): the reference's reasons
`PolicyNotFound`, `PolicyNotReady`, `ProgressionMismatch`, `ProviderUnbound`, `PlanInvalid`.
A parked run never falls back to blue-green.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Literal

from models.admission_rollout import forms_sequence
from models.duration import parse_duration
from models.inferenceservice import (
    DEFAULT_RATIO_TOLERANCE_PERCENT,
    GroupCanary,
    RolloutGroup,
    RolloutSpec,
)

Progression = Literal["blueGreen", "rollingUpdate", "canary"]
ParkReason = Literal["PolicyNotFound", "PolicyNotReady", "ProgressionMismatch", "ProviderUnbound", "PlanInvalid"]

DIGEST_PREFIX = "rp1:"
BLUE_GREEN_FRACTION = 0.25
"""Blue-green: each component moves at most 25% of its replicas at a time, rounded up."""


@dataclass(frozen=True)
class GroupPlan:
    """One group as a run pins it."""

    index: int
    components: tuple[str, ...]
    progression: Progression
    digest: str
    soak_seconds: float = 0.0
    ratio_tolerance: int | None = None
    """Percent, when the group sets `maintainRatio` (0 allows no drift); None: no ratio check."""
    max_surge: int | str | None = None
    max_unavailable: int | str | None = None
    """A rolling update's per-component budgets (25% each unless set)."""
    canary: GroupCanary | None = None

    @property
    def strategy_name(self) -> str:
        """The STRATEGY column of `rollout status` (§3.4), sequences aside."""
        return {"blueGreen": "BlueGreen", "rollingUpdate": "RollingUpdate", "canary": "Canary"}[self.progression]


@dataclass(frozen=True)
class RolloutPlan:
    groups: tuple[GroupPlan, ...]
    sequence: bool
    """Two or more single-component blue-green groups: one at a time, in list order."""
    digest: str
    pairing_protocol: str | None = None

    def group_of(self, component: str) -> GroupPlan | None:
        return next((g for g in self.groups if component in g.components), None)

    @property
    def grouped(self) -> tuple[str, ...]:
        return tuple(c for g in self.groups for c in g.components)

    @property
    def sequence_soak_seconds(self) -> float:
        """The wait between two components of a sequence: the longest soak of any group but the last."""
        if not self.sequence or len(self.groups) < 2:
            return 0.0
        return max(g.soak_seconds for g in self.groups[:-1])


@dataclass(frozen=True)
class Parked:
    """A plan that does not resolve: the run waits, `RolloutPlanReady=False` with `reason`."""

    reason: ParkReason
    message: str


def digest_of(text: str) -> str:
    return DIGEST_PREFIX + hashlib.sha256(text.encode()).hexdigest()[:12]


def render_progression(group: RolloutGroup) -> dict[str, Any]:
    """What a group's digest covers: its progression, with the defaults it runs with."""
    if group.canary is not None:
        return {"canary": group.canary.model_dump(mode="json", by_alias=True, exclude_none=True)}
    if group.rolling_update is not None:
        budgets = {
            "maxSurge": group.rolling_update.effective_max_surge,
            "maxUnavailable": group.rolling_update.effective_max_unavailable,
        }
        return {"rollingUpdate": budgets}
    return {"blueGreen": {}}


def group_digest(group: RolloutGroup) -> str:
    return digest_of(json.dumps(render_progression(group), sort_keys=True, separators=(",", ":")))


def plan_digest(group_digests: list[str] | tuple[str, ...]) -> str:
    return digest_of("|".join(group_digests))


def _group_plan(index: int, group: RolloutGroup) -> GroupPlan:
    ratio = group.maintain_ratio
    rolling = group.rolling_update
    return GroupPlan(
        index=index,
        components=tuple(group.components),
        progression=group.progression,
        digest=group_digest(group),
        soak_seconds=parse_duration(group.soak) if group.soak else 0.0,
        ratio_tolerance=(
            None if ratio is None else (DEFAULT_RATIO_TOLERANCE_PERCENT if ratio.tolerance is None else ratio.tolerance)
        ),
        max_surge=rolling.effective_max_surge if rolling is not None else None,
        max_unavailable=rolling.effective_max_unavailable if rolling is not None else None,
        canary=group.canary,
    )


def resolve_plan(rollout: RolloutSpec | None) -> RolloutPlan | Parked | None:
    """The plan a run pins; None when the InferenceService declares no groups."""
    if rollout is None or not rollout.groups:
        return None
    for index, group in enumerate(rollout.groups):
        if group.policy_ref is not None and not group.declared_progressions():
            # Rollout policies are alpha and off: a group that only names one cannot render.
            return Parked(
                "PolicyNotFound",
                f'spec.rollout.groups[{index}].policyRef: rollout policy "{group.policy_ref.name}" not found',
            )
        if len(group.declared_progressions()) > 1:
            return Parked(
                "PlanInvalid",
                f"spec.rollout.groups[{index}] declares {' and '.join(group.declared_progressions())}; "
                "a group runs one progression",
            )
    groups = tuple(_group_plan(i, g) for i, g in enumerate(rollout.groups))
    return RolloutPlan(
        groups=groups,
        sequence=forms_sequence(rollout.groups),
        digest=plan_digest([g.digest for g in groups]),
        pairing_protocol=rollout.pairing_protocol,
    )
