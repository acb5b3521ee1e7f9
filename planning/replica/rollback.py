"""A canary rollback: the InferenceReplica moves its Instances back to the stable revision
(spec reference §1.5, §1.6).

A rollout run rolls a canary group back (an operator's request, or failed analysis) while the
InferenceService spec still names the canary revision: it sets `Coordination.rollback_to` to
the stable revision's hash. While it is set, the InferenceReplica plans and acts toward
`rollback_to` in place of the spec's update revision (`steer`):

- every Instance on, or moving to, the canary revision moves back, with the stable
  revision's component spec (the workflow keeps one per revision it still retains); new
  Instances start on it; the component's own strategy and budgets pace the moves
  (SurgeThenDrain: the stable pod serves before the canary pod drains); a partition holds
  nothing back;
- the run's cap does not apply (`limit`, `gate`, `reason`): whatever limit the run sends, a
  rollback is not paced by the canary's capacity. The run's drain hold and a rolling-update
  group's budgets still apply, and so does a pause;
- status shows `updateRevision` = the stable revision and `updatedReplicas` the Instances on
  it; `currentRevision` stays the stable revision (or becomes it once every Instance is back,
  when the canary had already completed on this component).

A rollback to a revision whose spec this InferenceReplica no longer keeps (history trimmed,
or never seen) is never guessed at: nothing moves and the hold says why (`missing_denial`,
gate `Held`, `StableRevisionMissing`). `Coordination.stable` names the revision a rollback
would return to while a run is under way, so trimming keeps it (`protected`) and a replica
that lacks it says so before any rollback is asked for (`stable_missing`). While rolling
back, the InferenceReplica reports how many Instances each revision still has
(`revision_counts`), so the run sees when none is left on the canary revision.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass, replace

from planning.replica.coordination import Coordination
from planning.replica.facts import InstanceFacts
from planning.replica.hold import HoldDenial, HoldGate
from planning.replica.update import UpdatePlan

STABLE_REVISION_MISSING = "StableRevisionMissing"


@dataclass(frozen=True)
class Steering:
    """Which revision one pass moves Instances to, and under which cap."""

    revision: str
    """The revision hash the InferenceReplica plans and acts toward: `rollback_to` while
    rolling back, else the spec's update revision."""
    cap: Coordination | None
    """The run's cap on Instances on `revision`; None while rolling back (and outside a run)."""
    rolling_back: bool = False
    missing: str | None = None
    """`rollback_to` when its spec is no longer kept: nothing moves (`hold_back`)."""


def rollback_target(update_revision: str, coordination: Coordination | None) -> str | None:
    """The revision hash the run rolls back to; None when it doesn't (or names the spec's own)."""
    back = coordination.rollback_to if coordination is not None else None
    return back if back is not None and back != update_revision else None


def steer(update_revision: str, coordination: Coordination | None, retained: Container[str] | None) -> Steering:
    """The pass's steering; `retained`: revision hashes with a kept spec (None: every one)."""
    back = rollback_target(update_revision, coordination)
    if back is None:
        return Steering(update_revision, coordination)
    if retained is not None and back not in retained:
        return Steering(update_revision, coordination, missing=back)
    return Steering(back, None, rolling_back=True)


def stable_missing(update_revision: str, coordination: Coordination | None, retained: Container[str]) -> str | None:
    """The revision the run would (or does) roll back to that is not retained; None if kept."""
    if coordination is None:
        return None
    back = rollback_target(update_revision, coordination) or coordination.stable
    return back if back is not None and back not in retained else None


def protected(coordination: Coordination | None, names: Mapping[str, str]) -> set[str]:
    """Revision names history trimming must keep: those the run names to return to."""
    if coordination is None:
        return set()
    hashes = {coordination.stable, coordination.rollback_to} - {None}
    return {names[digest] for digest in hashes if digest is not None and digest in names}


def revision_counts(instances: Sequence[InstanceFacts]) -> dict[str, int]:
    """Instances per revision hash they run or move to (one moving counts under both): what
    a run rolling back reads to see how many are still on the canary revision."""
    counts: Counter[str] = Counter()
    for instance in instances:
        counts.update({revision for revision in (instance.running_revision, instance.target_revision) if revision})
    return dict(sorted(counts.items()))


def missing_reason(revision: str) -> str:
    return (
        f"rollback to {revision} impossible: the stable revision is no longer retained "
        f"({STABLE_REVISION_MISSING})"
    )


def missing_denial(revision: str) -> HoldDenial:
    return HoldDenial(HoldGate.HELD, missing_reason(revision), revision)


def hold_back(plan: UpdatePlan, denial: HoldDenial) -> UpdatePlan:
    """`plan` with nothing started and `denial` as its hold (a pause keeps its own)."""
    if plan.paused:
        return plan
    return replace(
        plan,
        start=(),
        denial=denial,
        wake_at=None,
        waiting=plan.waiting + plan.start,
        retry_attempt=False,
        complete=False,
    )
