"""The `Drain` workflow's `status` query: what moved, what waits and why, what is left.

`DrainStatus` is what an operator reads at 3 a.m. (`temporal workflow query --workflow-id
drain/node/<node> --name status`): the phase, one sentence saying what the drain does or
waits for, the Instances moved and moving, every wait with its reason and until when, and
the pods still on the node.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from planning.drain import texts
from planning.drain.progress import in_flight
from planning.drain.state import DrainState, InstanceMove
from planning.drain.texts import DrainPhase


class Waiting(BaseModel):
    model_config = ConfigDict(extra="forbid")

    subject: str
    """`Instance ns/isvc-component-index` or `pod ns/name`."""
    why: str
    until: datetime | None = None


class DrainStatus(BaseModel):
    model_config = ConfigDict(extra="forbid")

    node: str
    reason: str
    phase: DrainPhase
    message: str
    cordoned: bool
    started_at: datetime | None = None
    deadline: datetime | None = None
    instances_moved: list[str] = Field(default_factory=list)
    """`ns/isvc-component-index`, with `-> <index>` when a migration named the replacement."""
    instances_migrating: list[str] = Field(default_factory=list)
    waiting: list[Waiting] = Field(default_factory=list)
    pods_left: list[str] = Field(default_factory=list)
    pods_stuck: list[str] = Field(default_factory=list)
    """Of `pods_left`: terminating on a node that is not Ready; reported, not waited for."""
    pods_evicted: list[str] = Field(default_factory=list)
    pods_ignored: list[str] = Field(default_factory=list)
    migrations_started: int = 0


def _moved(move: InstanceMove) -> str:
    return move.instance.label + (f" -> {move.moved_to}" if move.moved_to is not None else "")


def waits(state: DrainState, now: datetime) -> list[Waiting]:
    found: list[Waiting] = []
    running = {m.instance.component_label: m.instance.label for m in in_flight(state)}
    for label in sorted(state.instances):
        move = state.instances[label]
        subject = f"Instance {label}"
        if not move.on_node or move.migration_id is not None:
            continue
        if move.retry_at is not None and move.retry_at > now:
            why = (
                texts.migration_failed(move.last_reason, move.last_message, move.retry_why)
                if move.last_reason
                else move.retry_why
            )
            found.append(Waiting(subject=subject, why=why, until=move.retry_at))
        elif move.instance.component_label in running:
            found.append(Waiting(subject=subject, why=texts.queued_behind(running[move.instance.component_label])))
    for key in sorted(state.evictions):
        eviction = state.evictions[key]
        if eviction.blocked:
            found.append(Waiting(subject=f"pod {key}", why=eviction.blocked, until=eviction.retry_at))
    return found


def message_of(state: DrainState, waiting: list[Waiting]) -> str:
    phase = state.phase
    node = state.node
    if phase == DrainPhase.CORDONING:
        return f"cordoning node {node}"
    if phase == DrainPhase.DRAINED:
        return f"node {node} is drained and stays cordoned; signal release to uncordon it"
    if phase == DrainPhase.TIMED_OUT:
        return (
            f"timed out after {state.timeout} with {len(state.pods_left)} pod(s) left; node {node} stays "
            f"cordoned: signal release (or cancel) to uncordon it"
        )
    if phase == DrainPhase.RELEASED:
        return f"node {node} released (uncordoned)"
    if phase == DrainPhase.CANCELLED:
        return f"drain of node {node} cancelled: nothing more moves; node uncordoned"
    moving = len(in_flight(state))
    if state.release_requested:
        return f"{texts.RELEASING}; waiting for {moving} migration(s) in flight to end, then node {node} is uncordoned"
    text = f"{phase.value.lower()} node {node}: {moving} migration(s) in flight, {len(state.pods_left)} pod(s) left"
    if waiting:
        text += f"; waiting: {waiting[0].subject} {waiting[0].why}"
    return text


def status_of(state: DrainState, now: datetime) -> DrainStatus:
    waiting = waits(state, now)
    instances = [state.instances[k] for k in sorted(state.instances)]
    return DrainStatus(
        node=state.node,
        reason=state.reason,
        phase=state.phase,
        message=message_of(state, waiting),
        cordoned=state.cordoned,
        started_at=state.started_at,
        deadline=state.deadline,
        instances_moved=[_moved(m) for m in instances if not m.on_node and m.migration_id is None],
        instances_migrating=[m.instance.label for m in instances if m.migration_id is not None],
        waiting=waiting,
        pods_left=state.pods_left,
        pods_stuck=state.pods_stuck,
        pods_evicted=state.evicted,
        pods_ignored=state.pods_ignored,
        migrations_started=state.migrations_started,
    )
