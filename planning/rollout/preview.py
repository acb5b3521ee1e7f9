"""The plan a change would run, before it is applied (the InferenceService's `preview`
query): which grouped components it moves, in which stages, how many Instances of each at a
time, the soaks, and the gates it will meet. Computed by the same rules a run uses
(`planning.rollout.plan`, `planning.rollout.gates`), changing nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from models.duration import format_duration
from models.inferenceservice import RolloutSpec
from planning.replica.budget import resolve_budget
from planning.rollout.gates import WAVES, wave_limit
from planning.rollout.plan import GroupPlan, Parked, RolloutPlan, resolve_plan


@dataclass(frozen=True)
class GroupPreview:
    index: int
    components: tuple[str, ...]
    strategy: str
    moves: tuple[str, ...]
    """The group's components this change gives a new revision."""
    batches: dict[str, list[int]]
    """Component -> Instances on the new revision after each step (blue-green: each wave)."""
    gates: tuple[str, ...]
    soak: str | None = None


@dataclass(frozen=True)
class Preview:
    groups: tuple[GroupPreview, ...] = ()
    stages: tuple[tuple[str, ...], ...] = ()
    """Components that move together, stage after stage (a sequence: one at a time)."""
    parked: str | None = None
    independent: tuple[str, ...] = ()
    """Components the change moves that are in no group: they roll out on their own."""
    notes: list[str] = field(default_factory=list)


def _batches(group: GroupPlan, replicas: int, surges: bool) -> list[int]:
    if group.progression == "blueGreen":
        steps = [wave_limit(replicas, wave) for wave in range(1, WAVES + 1)]
        return sorted(set(steps))
    field = "maxSurge" if surges else "maxUnavailable"
    budget = resolve_budget(group.max_surge if surges else group.max_unavailable, replicas, field)
    if budget is None or budget >= replicas:
        return [replicas]
    if budget == 0:
        return []  # this strategy's budget is 0: the component never moves
    return [*range(budget, replicas, budget), replicas]


def _gates(plan: RolloutPlan, group: GroupPlan, moves: tuple[str, ...], pairing_change: bool) -> tuple[str, ...]:
    gates = ["Budget"]
    if group.ratio_tolerance is not None and len(moves) > 1:
        gates.append("Ratio")
    if plan.sequence and group.index > 0:
        gates.append("Sequential")
    if pairing_change and {"engine", "decoder"} <= set(group.components):
        gates.append("Pairing")
    return tuple(gates)


def preview(
    rollout: RolloutSpec | None,
    moves: Mapping[str, str],
    replicas: Mapping[str, int],
    surges: Mapping[str, bool],
    pairing_change: bool = False,
) -> Preview:
    """`moves`: component -> the revision the change gives it (components it leaves alone absent)."""
    plan = resolve_plan(rollout)
    if plan is None:
        return Preview(independent=tuple(moves))
    if isinstance(plan, Parked):
        return Preview(parked=f"{plan.reason}: {plan.message}", independent=tuple(m for m in moves))
    groups = []
    for group in plan.groups:
        moved = tuple(c for c in group.components if c in moves)
        groups.append(
            GroupPreview(
                index=group.index,
                components=group.components,
                strategy="Sequential" if plan.sequence else group.strategy_name,
                moves=moved,
                batches={c: _batches(group, replicas.get(c, 1), surges.get(c, True)) for c in moved},
                gates=_gates(plan, group, moved, pairing_change) if moved else (),
                soak=format_duration(group.soak_seconds) if group.soak_seconds else None,
            )
        )
    stages: tuple[tuple[str, ...], ...]
    if plan.sequence:
        stages = tuple((c,) for g in groups for c in g.moves)
    else:
        stages = (tuple(c for g in groups for c in g.moves),) if any(g.moves for g in groups) else ()
    notes = []
    if plan.sequence and len(stages) > 1 and plan.sequence_soak_seconds:
        notes.append(
            f"each component after the first waits {format_duration(plan.sequence_soak_seconds)} "
            "after the one before it finishes"
        )
    if any(g.canary is not None for g in plan.groups):
        notes.append("canary groups step through their own steps and gates")
    independent = tuple(c for c in moves if plan.group_of(c) is None)
    return Preview(groups=tuple(groups), stages=stages, independent=independent, notes=notes)
