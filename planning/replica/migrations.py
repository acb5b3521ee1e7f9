"""Migrations as the InferenceReplica carries them out (spec reference §13).

A migration moves one Ready Instance off a node, replacement first: a surge Instance at the
lowest unused index, kept off the source node (and on the hinted nodes when given), comes up
and serves for `minReadySeconds`; then the source leaves rotation and its pods go. The
request's own workflow (`Migration`) hands it here as a `MigrationTicket`; this module
decides, each pass, what becomes of every ticket of the component:

    Accepted -> SurgePending -> SurgeReady -> Draining -> Completed
         \\____________\\______________\\-> Failed

- `Accepted` waits (the message says why) while another migration of the component runs or
  is older, an update surge is in flight, the source is busy, not Ready or unscheduled, the
  component is paused, or no audit caps are configured. One migration per component at a
  time, oldest first.
- It fails at once under `migrationPolicy.mode: Never`, for an Instance that does not exist,
  a `from_node` that is not the source's node, hints that name only the source node, or the
  rate cap; and in any phase before `Draining` at its deadline (acceptance +
  `instanceReadyTimeout`; the clock runs while waiting and while paused).
- A replacement that fails ends the migration (`MigrationSurgeWedged`, or
  `MigrationSurgeCreateBlocked` when it cannot be placed) and is deleted; the source stays.
- Once the source drains, the migration completes when the source is gone; the deadline no
  longer applies (the replacement is the copy that serves, so neither side is undone).

`plan_migrations` is pure; the workflow starts the surge, sends the drains and deletes,
records the Events and reports each ticket's change to its `Migration` workflow. How the
tickets show in the rules' rows, the status and a replacement's pod spec is
`planning.replica.migration_views`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from models.duration import format_duration
from models.instance import InstancePhase
from models.migration import MigrationAudit, MigrationPhase, MigrationProgress
from planning.replica.events import PlannedEvent
from planning.replica.facts import InstanceFacts

P = MigrationPhase

POLICY_UNCONFIGURED_WAIT = "waiting for migration capacity policy (no lifecycle.audit configured)"
MODE_NEVER_MESSAGE = "migrations disabled by MigrationPolicy Mode=Never"
NO_DEADLINE_MESSAGE = "deadline exceeded in phase Accepted: surge never allocated"
"""§10's known bug, kept as OME behaves: without `instanceReadyTimeout` every migration fails."""
DEFAULT_RETENTION = timedelta(hours=1)
"""How long an ended migration stays listed when no audit window is configured."""


@dataclass(frozen=True)
class MigrationTicket:
    """One migration of this component, as the InferenceReplica keeps it."""

    uuid: str
    instance: int
    from_node: str
    accepted_at: datetime
    deadline: datetime | None
    hint_target_nodes: tuple[str, ...] = ()
    reason: str = ""
    requested_by: str = ""
    workflow_id: str | None = None
    """The `Migration` workflow to tell of each change; None: nobody to tell."""
    audit: MigrationAudit | None = None
    """The caps in force when the request came (the worker's configuration)."""
    phase: MigrationPhase = P.ACCEPTED
    message: str = ""
    failure_reason: str | None = None
    surge_instance: int | None = None
    revision: str | None = None
    """The revision hash the replacement runs: the source's."""
    began_at: datetime | None = None
    """When the replacement was started: the rate cap counts these."""
    ended_at: datetime | None = None
    cancel_requested: str | None = None
    """Who asked to cancel (the `Migration` workflow's `cancel`); None: nobody."""
    warned: tuple[str, ...] = ()
    """Warning reasons already recorded for this ticket (`MigrationPolicyUnconfigured`, ...)."""

    @property
    def active(self) -> bool:
        return not self.phase.terminal

    @property
    def moving(self) -> bool:
        """Between the replacement's start and the end: a pair is in flight."""
        return self.phase in (P.SURGE_PENDING, P.SURGE_READY, P.DRAINING)

    def progress(self, component: str, nodes: Sequence[str] = ()) -> MigrationProgress:
        return MigrationProgress(
            uuid=self.uuid,
            component=component,
            instance=self.instance,
            from_node=self.from_node,
            phase=self.phase,
            message=self.message,
            reason=self.failure_reason,
            surge_instance=self.surge_instance,
            surge_nodes=list(nodes),
            revision=self.revision,
            accepted_at=self.accepted_at,
            deadline=self.deadline,
            ended_at=self.ended_at,
        )


@dataclass(frozen=True)
class SurgeStart:
    """Start the replacement of `source` at `index`, on `revision`, off `avoid_node`."""

    uuid: str
    index: int
    source: int
    revision: str
    avoid_node: str
    prefer_nodes: tuple[str, ...] = ()


@dataclass(frozen=True)
class MigrationContext:
    """What the decisions read besides the tickets and the Instances."""

    component: str
    now: datetime
    mode: str = "Auto"
    paused: bool = False
    min_ready_seconds: float = 0.0
    update_surge_in_flight: bool = False
    nodes: Mapping[int, Sequence[str]] = field(default_factory=dict)
    """Each Instance's nodes (its pods'), by index; empty: not scheduled yet."""
    failed_pods: Mapping[int, tuple[str, str]] = field(default_factory=dict)
    """A failed Instance's last failure: index -> (pod, reason)."""
    reserved_indexes: Sequence[int] = ()
    """Indexes not free for a replacement although no Instance reports there."""
    revision_names: Mapping[str, str] = field(default_factory=dict)
    """Revision hash -> ControllerRevision name, as Events show it."""
    drain_deadlines: Mapping[int, datetime] = field(default_factory=dict)
    """Each deleting Instance's drain deadline (its Delete operation's), by index."""


@dataclass(frozen=True)
class MigrationPlan:
    tickets: tuple[MigrationTicket, ...]
    start: SurgeStart | None = None
    drain: tuple[int, ...] = ()
    """Sources whose replacement serves settled: out of rotation and deleted now."""
    delete: tuple[int, ...] = ()
    """Replacements of failed or cancelled migrations: deleted now."""
    events: tuple[PlannedEvent, ...] = ()
    wake_at: datetime | None = None


def plan_migrations(
    tickets: Sequence[MigrationTicket], instances: Sequence[InstanceFacts], ctx: MigrationContext
) -> MigrationPlan:
    """What becomes of each ticket in this pass, oldest first."""
    by_index = {fact.index: fact for fact in instances}
    ordered = sorted(tickets, key=lambda t: (t.accepted_at, t.uuid))
    out: list[MigrationTicket] = []
    events: list[PlannedEvent] = []
    drain: list[int] = []
    delete: list[int] = []
    start: SurgeStart | None = None
    wake: list[datetime] = []
    taken = set(by_index) | set(ctx.reserved_indexes)
    for position, ticket in enumerate(ordered):
        if not ticket.active:
            out.append(ticket)
            continue
        # The others as they stand now: those decided in this pass in their new state, the
        # rest as they came. Ended ones count toward the rate cap only.
        rest = [*out, *ordered[position + 1 :]]
        others = [t for t in rest if t.active]
        began = [t.began_at for t in rest if t.began_at is not None]
        step = _advance(ticket, by_index, ctx, others, began, taken, start is not None)
        out.append(step.ticket)
        events.extend(step.events)
        drain.extend(step.drain)
        delete.extend(step.delete)
        if step.start is not None:
            start = step.start
            taken.add(step.start.index)
        if step.wake is not None:
            wake.append(step.wake)
        if step.ticket.active and step.ticket.deadline is not None and step.ticket.phase != P.DRAINING:
            wake.append(step.ticket.deadline)
    return MigrationPlan(
        tickets=tuple(out),
        start=start,
        drain=tuple(drain),
        delete=tuple(delete),
        events=tuple(events),
        wake_at=min(wake) if wake else None,
    )


@dataclass(frozen=True)
class _Step:
    ticket: MigrationTicket
    events: tuple[PlannedEvent, ...] = ()
    start: SurgeStart | None = None
    drain: tuple[int, ...] = ()
    delete: tuple[int, ...] = ()
    wake: datetime | None = None


def _fail(ticket: MigrationTicket, ctx: MigrationContext, reason: str, message: str, **extra: object) -> _Step:
    ended = replace(ticket, phase=P.FAILED, failure_reason=reason, message=message, ended_at=ctx.now)
    event = PlannedEvent("Warning", reason, _subject(ticket, ctx.component) + message, on_isvc=True)
    delete = (ticket.surge_instance,) if ticket.surge_instance is not None and ticket.moving else ()
    return _Step(ended, (event,), delete=delete, **extra)  # type: ignore[arg-type]


def _subject(ticket: MigrationTicket, component: str) -> str:
    return f"OMENative migration uuid={ticket.uuid} component={component} instance={ticket.instance}: "


def _wait(ticket: MigrationTicket, message: str) -> _Step:
    return _Step(replace(ticket, message=message))


def _advance(
    ticket: MigrationTicket,
    by_index: Mapping[int, InstanceFacts],
    ctx: MigrationContext,
    others: Sequence[MigrationTicket],
    began: Sequence[datetime],
    taken: set[int],
    started_one: bool,
) -> _Step:
    if ticket.cancel_requested is not None and ticket.phase != P.DRAINING:
        return _fail(ticket, ctx, "MigrationCancelled", f"cancelled by {ticket.cancel_requested}")
    if ticket.phase == P.ACCEPTED:
        return _accepted(ticket, by_index, ctx, others, began, taken, started_one)
    if ticket.phase == P.DRAINING:
        return _draining(ticket, by_index, ctx)
    return _surging(ticket, by_index, ctx)


def _expired(ticket: MigrationTicket, ctx: MigrationContext) -> bool:
    return ticket.deadline is not None and ctx.now >= ticket.deadline


def _accepted(
    ticket: MigrationTicket,
    by_index: Mapping[int, InstanceFacts],
    ctx: MigrationContext,
    others: Sequence[MigrationTicket],
    began: Sequence[datetime],
    taken: set[int],
    started_one: bool,
) -> _Step:
    if ctx.mode == "Never":
        return _fail(ticket, ctx, "MigrationRequestRejected", MODE_NEVER_MESSAGE)
    source = by_index.get(ticket.instance)
    if source is None or source.deleting:
        return _fail(
            ticket,
            ctx,
            "MigrationRequestRejected",
            f"instance={ticket.instance} of component={ctx.component} does not exist or is being deleted",
        )
    if ticket.deadline is None:
        return _fail(ticket, ctx, "MigrationExpired", NO_DEADLINE_MESSAGE)
    if _expired(ticket, ctx):
        return _fail(ticket, ctx, "MigrationExpired", "deadline exceeded in phase Accepted: surge never allocated")
    if ticket.audit is None:
        step = _wait(ticket, POLICY_UNCONFIGURED_WAIT)
        if "MigrationPolicyUnconfigured" in ticket.warned:
            return step
        event = PlannedEvent(
            "Warning", "MigrationPolicyUnconfigured", _subject(ticket, ctx.component) + POLICY_UNCONFIGURED_WAIT,
            on_isvc=True,
        )
        return replace(step, ticket=replace(step.ticket, warned=(*ticket.warned, "MigrationPolicyUnconfigured")),
                       events=(event,))
    ahead = next((t for t in others if t.moving), None)
    if ahead is not None:
        return _wait(ticket, f"waiting for migration {ahead.uuid} (instance={ahead.instance}) to finish")
    older = next((t for t in others if t.phase == P.ACCEPTED and (t.accepted_at, t.uuid) < (ticket.accepted_at, ticket.uuid)), None)
    if older is not None or started_one:
        first = older.uuid if older is not None else "started in this pass"
        return _wait(ticket, f"waiting behind migration {first} (one migration per component, oldest first)")
    if ctx.paused:
        return _wait(ticket, "waiting while the component is paused (the deadline keeps running)")
    if ctx.update_surge_in_flight:
        return _wait(ticket, "waiting for the update surge in flight to finish")
    if source.operation is not None or not source.at_rest:
        return _wait(ticket, f"waiting for instance={ticket.instance} to finish its {source.operation or source.phase.value} operation")
    if source.phase != InstancePhase.READY or not source.ready:
        return _wait(ticket, f"waiting for instance={ticket.instance} to be Ready (phase={source.phase.value})")
    nodes = list(ctx.nodes.get(ticket.instance, ()))
    if not nodes:
        return _wait(ticket, f"waiting for instance={ticket.instance} to have its pods scheduled")
    if ticket.from_node not in nodes:
        return _fail(
            ticket,
            ctx,
            "MigrationFromNodeMismatch",
            f"request.FromNode={ticket.from_node} does not match observed source node={','.join(sorted(set(nodes)))}",
        )
    if ticket.hint_target_nodes and set(ticket.hint_target_nodes) <= {ticket.from_node}:
        return _fail(
            ticket,
            ctx,
            "MigrationNodeAffinityConflict",
            f"hint_target_nodes {list(ticket.hint_target_nodes)} name only the source node {ticket.from_node}; "
            "the replacement must run on another node",
        )
    cap = ticket.audit
    window = timedelta(seconds=cap.window_seconds)
    # Every migration of the component begun within the window, ended ones included (they
    # stay listed for the window): one at a time runs, so counting active ones counts none.
    recent = [at for at in began if ctx.now - window < at <= ctx.now]
    if len(recent) >= cap.max_migrations_per_window:
        return _fail(
            ticket,
            ctx,
            "RateLimited",
            f"migration rate cap reached ({len(recent)}/{cap.max_migrations_per_window} in the last "
            f"{format_duration(cap.window_seconds)})",
        )
    index = lowest_unused(taken)
    revision = source.running_revision or source.target_revision or ""
    surge = SurgeStart(
        uuid=ticket.uuid,
        index=index,
        source=ticket.instance,
        revision=revision,
        avoid_node=ticket.from_node,
        prefer_nodes=tuple(n for n in ticket.hint_target_nodes if n != ticket.from_node),
    )
    moved = replace(
        ticket,
        phase=P.SURGE_PENDING,
        surge_instance=index,
        revision=revision,
        began_at=ctx.now,
        message=f"surge instance={index} starting off node {ticket.from_node}",
    )
    event = PlannedEvent(
        "Normal",
        "MigrationRequestAccepted",
        f"OMENative migration uuid={ticket.uuid} accepted: component={ctx.component} instance={ticket.instance} "
        f"on node {ticket.from_node} -> surge instance={index}"
        + (f" (requested by {ticket.requested_by})" if ticket.requested_by else ""),
        on_isvc=True,
    )
    return _Step(moved, (event,), start=surge)


def _surging(ticket: MigrationTicket, by_index: Mapping[int, InstanceFacts], ctx: MigrationContext) -> _Step:
    """`SurgePending` / `SurgeReady`: the replacement comes up; the source serves meanwhile."""
    surge_index = ticket.surge_instance
    surge = by_index.get(surge_index) if surge_index is not None else None
    source = by_index.get(ticket.instance)
    if surge is not None and surge.deleting and (source is None or source.deleting):
        # A scale-down took both (to zero, or past the pair): nothing is left to move.
        return _fail(ticket, ctx, "MigrationRequestRejected",
                     f"instance={ticket.instance} and its replacement instance={surge_index} were scaled down")
    if surge is None or surge.deleting:
        return _fail(ticket, ctx, "MigrationSurgeCreateBlocked", f"surge instance={surge_index} ended before it served")
    if source is None:
        # The source went another way (its node was lost and it was removed): the replacement
        # is the copy that serves now, so it stays.
        return _Step(replace(ticket, phase=P.COMPLETED, message=f"migrated to instance={surge_index}", ended_at=ctx.now),
                     (_completed_event(ticket, ctx),))
    if surge.phase == InstancePhase.FAILED:
        pod, reason = ctx.failed_pods.get(surge.index, ("", surge.failure_reason or "Failed"))
        if reason == "Unschedulable":
            return _fail(ticket, ctx, "MigrationSurgeCreateBlocked",
                         f"surge instance={surge_index} cannot be placed off node {ticket.from_node}: {reason}")
        return _fail(ticket, ctx, "MigrationSurgeWedged",
                     f"surge pod {pod or surge_index} wedged in {reason} past the stuck-pod grace")
    if _expired(ticket, ctx):
        what = f"surge instance={surge_index} not serving" if ticket.phase == P.SURGE_PENDING else "source not drained"
        return _fail(ticket, ctx, "MigrationExpired", f"deadline exceeded in phase {ticket.phase.value}: {what}")
    arrived = surge.phase == InstancePhase.READY and surge.at_rest and surge.serving
    if not arrived:
        return _wait(ticket, f"surge instance={surge_index} coming up (phase={surge.phase.value})")
    if not surge.settled(ctx.now, ctx.min_ready_seconds):
        return _Step(replace(ticket, message=f"surge instance={surge_index} serving; settling for minReadySeconds"),
                     wake=surge.settles_at(ctx.min_ready_seconds))
    ready = replace(ticket, phase=P.SURGE_READY, message=f"surge instance={surge_index} ready and serving")
    if ctx.paused:
        return _Step(replace(ready, message=f"{ready.message}; the source drains when the component is resumed"))
    draining = replace(ready, phase=P.DRAINING, message=f"instance={ticket.instance} leaving rotation; its pods go next")
    return _Step(draining, drain=(ticket.instance,))


def _draining(ticket: MigrationTicket, by_index: Mapping[int, InstanceFacts], ctx: MigrationContext) -> _Step:
    """The source is out of rotation and going: done when it is gone, or when its drain is
    overdue (§15 `DrainOverdue`: pods stuck Terminating on a dead node) and nothing of it
    serves; the replacement has served all along, so the move itself is complete."""
    source = by_index.get(ticket.instance)
    if source is not None:
        overdue_at = ctx.drain_deadlines.get(ticket.instance)
        if overdue_at is None or ctx.now < overdue_at or source.serving:
            return _Step(ticket, wake=overdue_at if overdue_at is not None and ctx.now < overdue_at else None)
    done = replace(ticket, phase=P.COMPLETED, message=f"migrated to instance={ticket.surge_instance}", ended_at=ctx.now)
    return _Step(done, (_completed_event(ticket, ctx),))


def _completed_event(ticket: MigrationTicket, ctx: MigrationContext) -> PlannedEvent:
    return PlannedEvent(
        "Normal",
        "MigrationCompleted",
        f"OMENative migration uuid={ticket.uuid} complete: component={ctx.component} instance={ticket.instance} "
        f"-> instance={ticket.surge_instance} (revision={ctx.revision_names.get(ticket.revision or '', ticket.revision)})",
        on_isvc=True,
    )


def lowest_unused(taken: set[int]) -> int:
    index = 0
    while index in taken:
        index += 1
    return index


def retained(tickets: Sequence[MigrationTicket], now: datetime) -> list[MigrationTicket]:
    """The tickets still listed: every active one, and ended ones within their audit window."""
    kept: list[MigrationTicket] = []
    for ticket in tickets:
        window = timedelta(seconds=ticket.audit.window_seconds) if ticket.audit else DEFAULT_RETENTION
        if ticket.active or ticket.ended_at is None or now < ticket.ended_at + window:
            kept.append(ticket)
    return kept


def not_started(ticket: MigrationTicket) -> MigrationTicket:
    """`ticket` back in `Accepted`: its replacement could not start (the index was taken by
    an Instance still closing), so the next pass chooses again."""
    return replace(
        ticket,
        phase=P.ACCEPTED,
        surge_instance=None,
        revision=None,
        began_at=None,
        message="waiting to start the replacement again (its index was still being released)",
    )


def fail_all(tickets: Sequence[MigrationTicket], now: datetime, message: str) -> list[MigrationTicket]:
    """Every active ticket ended as `Failed` (the InferenceReplica is going away)."""
    return [
        replace(t, phase=P.FAILED, failure_reason="MigrationRequestRejected", message=message, ended_at=now)
        if t.active
        else t
        for t in tickets
    ]

