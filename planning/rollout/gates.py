"""How far each component of a rollout group may move right now, or the gate that holds it
(spec reference §6, §7; the rollout groups page).

The Rollout workflow asks `allowances(plan, progress, now)` on every report from its
InferenceReplicas and tells each one its `limit`: how many of its Instances may be on the
run's target revision at this moment. An InferenceReplica moves Instances only up to that
limit, within its own budgets; a component held below where it stands gets the gate and
reason for its `rolloutHold`.

- Blue-green: the group moves in four waves of 25%: at wave `w`, each component may have
  `ceil(w x 25% x replicas)` Instances on the new revision (so each moves at most 25% of its
  replicas, rounded up, at a time), and the group enters wave `w + 1` once every component
  serves its wave's count on the new revision.
- Rolling update: each component moves within its own `maxSurge` / `maxUnavailable`, read
  from the group (the InferenceReplica applies them); no wave.
- `maintainRatio` (either progression): a component that one more move would put more than
  `tolerance`% further through its rollout than another component of the group is held
  (gate `Ratio`), unless it is the one furthest behind; a move that
  would take the serving ratio out of the band `anchor x (1 +- tolerance/100)` is held too
  (a surge under SurgeThenDrain, a drain under the strategies that move by taking an
  Instance out first), with the reference's escapes: one surge on a balanced pool, one
  drain whose overshoot stays within twice the band. Components updating in place skip it.
- Sequence: one component at a time in list order, each after the longest soak of any
  group but the last, counted from when the component before it finished (gate
  `Sequential`, with the reference's two reason texts). Components the change leaves alone
  are skipped; a failed component keeps those after it waiting.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from models.duration import format_duration
from planning.replica.hold import HoldGate
from planning.rollout.plan import BLUE_GREEN_FRACTION, GroupPlan, RolloutPlan

WAVES = round(1 / BLUE_GREEN_FRACTION)


@dataclass(frozen=True)
class ComponentProgress:
    """What an InferenceReplica last reported, as the Rollout counts it."""

    name: str
    replicas: int
    """Instances the component runs (its desired count)."""
    changed: bool = True
    """The run gives this component a new revision; False: the change leaves it alone."""
    updated: int = 0
    """Instances on, or moving to, the run's target revision."""
    updated_serving: int = 0
    """Instances serving on the target revision."""
    serving: int = 0
    """Instances serving, any revision."""
    failed: int = 0
    """Instances Failed on the target revision."""
    surge_serving: int = 0
    """Moving Instances whose new pod already serves beside their old one (not yet counted
    in `updated_serving`, which counts an Instance once its old pod is gone)."""
    finished_at: datetime | None = None
    """When every Instance last served on the target revision (the component's rollout done)."""
    in_place: bool = False
    """InPlaceIfPossible / InPlaceOnly: skips the ratio check."""
    surges: bool = True
    """SurgeThenDrain: a move adds a serving Instance before the old one drains."""

    @property
    def finished(self) -> bool:
        return not self.changed or self.updated_serving >= self.replicas

    @property
    def fraction(self) -> float:
        """How far through its rollout: updated / replicas (1.0 when it has none to move)."""
        return 1.0 if self.replicas <= 0 else min(1.0, self.updated / self.replicas)


@dataclass(frozen=True)
class Hold:
    gate: HoldGate
    reason: str
    release: str = ""
    """What would release it (the `explain` query): a peer finishing, a soak ending, ..."""


@dataclass(frozen=True)
class Allowance:
    """How many Instances of `component` may be on the target revision now, and why no more."""

    component: str
    limit: int
    hold: Hold | None = None
    wake_at: datetime | None = None
    """When the decision changes with no report (a soak ends)."""
    drain_hold: Hold | None = None
    """Old Instances may not drain yet (the pairing-protocol transition, `planning.rollout.pairing`)."""
    rollback_to: str | None = None
    """A canary group rolling back: the stable revision its Instances return to."""
    stable: str | None = None
    """A canary group's stable revision, which its InferenceReplicas keep for a rollback."""


def wave_limit(replicas: int, wave: int) -> int:
    """Blue-green: the Instances on the new revision a component may have at `wave` (0-4)."""
    return min(replicas, math.ceil(min(wave, WAVES) * BLUE_GREEN_FRACTION * replicas))


def current_wave(components: list[ComponentProgress]) -> int:
    """The group's wave: the first whose counts are not all serving yet (4 when done)."""
    for wave in range(1, WAVES + 1):
        if any(c.updated_serving < wave_limit(c.replicas, wave) for c in components):
            return wave
    return WAVES


def blue_green(group: GroupPlan, progress: list[ComponentProgress]) -> list[Allowance]:
    moving = [c for c in progress if c.changed]
    # A failed component fails the group but does not stop the others: the waves go on
    # without it (it keeps its own wave until a later change makes it healthy).
    healthy = [c for c in moving if not c.failed] or moving
    wave, stuck_wave = current_wave(healthy), current_wave(moving)
    laggards = [c for c in healthy if c.updated_serving < wave_limit(c.replicas, wave)]
    result = []
    for c in moving:
        limit = wave_limit(c.replicas, stuck_wave if c.failed else wave)
        hold = None
        if c.updated >= limit and limit < c.replicas:
            waiting = [f"{o.name} ({o.updated_serving}/{wave_limit(o.replicas, wave)} serving)" for o in laggards]
            reason = f"blue-green wave {wave} of {WAVES}: {c.name} moved {limit}/{c.replicas} Instances"
            reason += f"; waits for {', '.join(waiting)} on the new revision" if waiting else ""
            names = " and ".join(o.name for o in laggards)
            hold = Hold(HoldGate.BUDGET, reason, f"{names} serving wave {wave} on the new revision")
        result.append(Allowance(c.name, limit, hold))
    return result


def rolling_update(group: GroupPlan, progress: list[ComponentProgress]) -> list[Allowance]:
    return [Allowance(c.name, c.replicas) for c in progress if c.changed]


def ratio_hold(component: ComponentProgress, peers: list[ComponentProgress], tolerance: int) -> Hold | None:
    """`Ratio` when moving one more Instance would put `component` more than `tolerance`%
    further through its rollout than a peer, or its next surge would move the serving ratio
    out of the band (one surge on a balanced pool is always admitted).

    The component furthest behind (or level with the slowest) may always move, so components
    whose single move is larger than the tolerance (one of two decoders is 50%) leapfrog
    rather than wait for each other."""
    others = [p for p in peers if p.name != component.name and p.changed and not p.in_place]
    if component.in_place or not others or component.finished:
        return None
    slowest = min(others, key=lambda p: p.fraction)
    after = min(1.0, (component.updated + 1) / component.replicas) if component.replicas > 0 else 1.0
    ahead = component.fraction > slowest.fraction + 1e-9
    if ahead and (after - slowest.fraction) * 100 > tolerance + 1e-9:
        return Hold(
            HoldGate.RATIO,
            f"{component.name} is {component.fraction:.0%} through its rollout; one more Instance would put it "
            f"at {after:.0%}, more than {tolerance}% further than {slowest.name} ({slowest.fraction:.0%})",
            f"{slowest.name} moving further through its rollout",
        )
    for other in others:
        if component.surges and not surge_in_band(component, other, tolerance):
            return Hold(
                HoldGate.RATIO,
                "surge would skew cross-Component serving ratio past tolerance",
                f"{other.name} serving more Instances, or {component.name}'s surge draining its old Instance",
            )
        if not component.surges and not drain_in_band(component, other, tolerance):
            # Other strategies take an Instance out of rotation first.
            return Hold(
                HoldGate.RATIO,
                "drain would skew cross-Component serving ratio past tolerance",
                f"{other.name} serving fewer Instances, or {component.name}'s moved Instance serving again",
            )
    return None


def _ratio(a: int, b: int) -> float:
    return math.inf if b <= 0 else a / b


def surge_in_band(component: ComponentProgress, other: ComponentProgress, tolerance: int) -> bool:
    """Whether one more serving Instance of `component` keeps `component:other` serving within
    `anchor x (1 +- tolerance/100)`, anchor being their replicas' ratio; a balanced pool (at
    the anchor now) always admits one surge."""
    if other.replicas <= 0 or other.serving <= 0:
        return True
    anchor = component.replicas / other.replicas
    if component.serving * other.replicas == other.serving * component.replicas:
        return True
    after = _ratio(component.serving + 1, other.serving)
    return abs(after / anchor - 1) * 100 <= tolerance + 1e-9


def drain_in_band(component: ComponentProgress, other: ComponentProgress, tolerance: int) -> bool:
    """Whether one fewer serving Instance of `component` is admitted: within the band, or an
    overshoot within twice the band (the reference's drain escape)."""
    if other.replicas <= 0 or other.serving <= 0 or component.replicas <= 0:
        return True
    anchor = component.replicas / other.replicas
    after = _ratio(component.serving - 1, other.serving)
    return abs(after / anchor - 1) * 100 <= 2 * tolerance + 1e-9


def sequence(plan: RolloutPlan, progress: Mapping[str, ComponentProgress], now: datetime) -> list[Allowance]:
    """One component at a time in list order; each waits for the one before it and the soak."""
    soak = plan.sequence_soak_seconds
    result = []
    previous: ComponentProgress | None = None
    for group in plan.groups:
        (name,) = group.components
        c = progress.get(name)
        if c is None or not c.changed:
            continue  # the change leaves it alone: skipped
        hold, wake_at = _sequence_hold(c, previous, soak, now)
        result.append(Allowance(name, c.updated if hold else c.replicas, hold, wake_at))
        if previous is None or previous.finished:
            previous = c
    return result


def _sequence_hold(
    c: ComponentProgress, previous: ComponentProgress | None, soak: float, now: datetime
) -> tuple[Hold | None, datetime | None]:
    if previous is None:
        return None, None
    if not previous.finished:
        release = f"{previous.name} serving its target on every Instance"
        if previous.failed:
            release += f" (it has {previous.failed} failed Instance(s): a later change must make it healthy)"
        return Hold(HoldGate.SEQUENTIAL, f"Sequential waiting on {previous.name}", release), None
    if previous.finished_at is None:
        return None, None
    ends = previous.finished_at + timedelta(seconds=soak)
    if soak > 0 and now < ends:
        reason = f"Sequential.Soak: {c.name} waiting out the {format_duration(soak)} soak after {previous.name}"
        return Hold(HoldGate.SEQUENTIAL, reason, "the soak ending"), ends
    return None, None


def allowances(plan: RolloutPlan, progress: Mapping[str, ComponentProgress], now: datetime) -> list[Allowance]:
    """Every grouped, changed component's allowance at `now`."""
    if plan.sequence:
        return sequence(plan, progress, now)
    result: list[Allowance] = []
    for group in plan.groups:
        members = [progress[name] for name in group.components if name in progress]
        if group.progression == "blueGreen":
            moves = blue_green(group, members)
        elif group.progression == "rollingUpdate":
            moves = rolling_update(group, members)
        else:
            continue  # canary groups step through their own plan
        if group.ratio_tolerance is not None:
            moves = [_with_ratio(a, progress[a.component], members, group.ratio_tolerance) for a in moves]
        result.extend(moves)
    return result


def _with_ratio(
    allowance: Allowance, component: ComponentProgress, members: list[ComponentProgress], tolerance: int
) -> Allowance:
    hold = ratio_hold(component, members, tolerance)
    if hold is None:
        return replace(allowance, limit=min(allowance.limit, ratio_cap(component, members, tolerance)))
    return Allowance(allowance.component, min(allowance.limit, component.updated), hold)


def ratio_cap(component: ComponentProgress, peers: list[ComponentProgress], tolerance: int) -> int:
    """The most Instances `component` may have on the new revision before the drift check
    runs again: as far as `tolerance`% past its slowest peer, and one more when it is the
    one furthest behind. An InferenceReplica moves up to its limit without waiting for the
    next report, so a limit of all its replicas would let it run past the tolerance."""
    others = [p for p in peers if p.name != component.name and p.changed and not p.in_place]
    if component.in_place or not others or component.finished:
        return component.replicas
    slowest = min(others, key=lambda p: p.fraction)
    cap = math.floor((slowest.fraction + tolerance / 100) * component.replicas + 1e-9)
    if component.fraction <= slowest.fraction + 1e-9:
        cap = max(cap, component.updated + 1)
    return max(component.updated, min(cap, component.replicas))
