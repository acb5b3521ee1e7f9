"""A rollout run's cap on an InferenceReplica's starts, and the hold it shows."""

from __future__ import annotations

import pytest

from models.instance import UpdateStrategyType
from planning.replica.budget import UpdatePolicy
from planning.replica.coordination import Coordination, coordinated, opening
from planning.replica.hold import HoldGate
from planning.replica.update import plan_update
from tests.unit.planning.replica.rows import NEW, NOW, OLD, failed, ready, updating

pytestmark = pytest.mark.unit

FOUR = [ready(i) for i in range(4)]
NO_BUDGET = UpdatePolicy(strategy=UpdateStrategyType.SURGE_THEN_DRAIN)


@pytest.mark.parametrize(
    "instances, coordination, started, gate, reason",
    [
        (FOUR, None, (3, 2, 1, 0), None, None),
        (FOUR, Coordination(2, NEW, 1), (3,), None, None),
        # One already moving counts against the cap: no room left.
        ([*FOUR[:3], updating(3)], Coordination(2, NEW, 1, "Budget", "blue-green wave 1 of 4"), (), "Budget", "blue-green wave 1 of 4"),
        (FOUR, Coordination(2, NEW, 0, "Sequential", "Sequential waiting on decoder"), (), "Sequential", "Sequential waiting on decoder"),
        (FOUR, opening(2, NEW), (), "Plan", "rollout run 2 has not pinned its plan yet"),
        # The run moves another revision: this one waits for its own run (fail closed).
        (FOUR, Coordination(2, "chat-engine-rev-cccccccc", 4), (), "Plan", f"revision {NEW} waits for its rollout run to pin a plan"),
        (FOUR, Coordination(2, NEW, 4), (3, 2, 1, 0), None, None),
    ],
    ids=["uncoordinated", "cap 1", "cap used", "sequential", "opening", "other target", "cap all"],
)
def test_the_run_caps_the_starts_and_names_its_gate(
    instances: list, coordination: Coordination | None, started: tuple[int, ...], gate: str | None, reason: str | None
) -> None:
    plan = coordinated(plan_update(instances, 4, NEW, NO_BUDGET, NOW), instances, NEW, coordination)
    assert plan.start == started
    assert (plan.denial.gate if plan.denial else None) == (HoldGate(gate) if gate else None)
    assert (plan.denial.reason if plan.denial else None) == reason


def test_the_components_own_budget_still_applies_under_the_cap() -> None:
    policy = UpdatePolicy(strategy=UpdateStrategyType.SURGE_THEN_DRAIN, max_surge=1)
    plan = coordinated(plan_update(FOUR, 4, NEW, policy, NOW), FOUR, NEW, Coordination(2, NEW, 4))
    assert plan.start == (3,)


def test_a_paused_plan_is_left_as_it_is() -> None:
    paused = plan_update(FOUR, 4, NEW, NO_BUDGET, NOW, paused=True)
    assert coordinated(paused, FOUR, NEW, opening(2, NEW)) is paused


def test_a_pass_under_a_run_shows_the_runs_gate_on_the_revisions_name() -> None:
    from planning.replica.reconcile import reconcile

    names = {NEW: "chat-engine-7d9f"}
    actions = reconcile(
        desired=4,
        instances=FOUR,
        update_revision=NEW,
        current_revision="chat-engine-rev-aaaaaaaa",
        revision_names=names,
        policy=NO_BUDGET,
        retry_blocks=[],
        previous_hold=None,
        paused=False,
        now=NOW,
        coordination=Coordination(2, NEW, 0, "Sequential", "Sequential waiting on decoder"),
    )
    assert actions.update == () and actions.hold is not None
    assert (actions.hold.gate, actions.hold.reason, actions.hold.target) == (
        HoldGate.SEQUENTIAL, "Sequential waiting on decoder", "chat-engine-7d9f",
    )


# --- a canary step's capacity: the highest indexes move, like a partition -------------------

SURGE_1 = UpdatePolicy(strategy=UpdateStrategyType.SURGE_THEN_DRAIN, max_surge=1)
RECREATE_1 = UpdatePolicy(strategy=UpdateStrategyType.RECREATE_POD, max_unavailable=1)


def _settle(rows: dict, limit: int, policy: UpdatePolicy) -> list[int]:  # type: ignore[type-arg]
    """Passes under a cap of `limit`, each started move done and settled at once, until none
    starts; the indexes then on the new revision."""
    from planning.replica.reconcile import reconcile

    for _ in range(3 * len(rows) + 3):
        actions = reconcile(
            desired=len(rows),
            instances=list(rows.values()),
            update_revision=NEW,
            current_revision=OLD,
            revision_names={},
            policy=policy,
            retry_blocks=[],
            previous_hold=None,
            paused=False,
            now=NOW,
            coordination=Coordination(2, NEW, limit),
        )
        if not actions.update:
            break
        for index in actions.update:
            rows[index] = ready(index, NEW)
    return sorted(index for index, row in rows.items() if row.running_revision == NEW)


CASES = [(n, k) for n in range(1, 6) for k in range(n + 1)]


@pytest.mark.parametrize("policy", [NO_BUDGET, SURGE_1, RECREATE_1], ids=["no budget", "maxSurge 1", "recreate"])
@pytest.mark.parametrize("n, k", CASES, ids=[f"{k} of {n}" for n, k in CASES])
def test_a_cap_of_k_of_n_puts_exactly_the_highest_k_indexes_on_the_new_revision(
    n: int, k: int, policy: UpdatePolicy
) -> None:
    assert _settle({i: ready(i) for i in range(n)}, k, policy) == list(range(n - k, n))


@pytest.mark.parametrize("policy", [NO_BUDGET, SURGE_1, RECREATE_1], ids=["no budget", "maxSurge 1", "recreate"])
def test_steps_that_raise_the_cap_keep_the_new_revision_on_the_highest_indexes(policy: UpdatePolicy) -> None:
    rows = {i: ready(i) for i in range(5)}
    for k in (1, 2, 4, 5):
        assert _settle(rows, k, policy) == list(range(5 - k, 5))


@pytest.mark.parametrize("policy", [NO_BUDGET, SURGE_1], ids=["no budget", "maxSurge 1"])
def test_a_broken_low_index_holds_the_previous_revision_under_a_cap(policy: UpdatePolicy) -> None:
    # Outside a cap a broken Instance moves first (it costs no budget); under a canary step's
    # cap the new revision still goes to the highest indexes, as a partition would place it.
    rows = {0: failed(0), **{i: ready(i) for i in range(1, 4)}}
    assert _settle(rows, 1, policy) == [3]
    assert rows[0].running_revision == OLD


def test_a_broken_low_index_spends_the_unavailability_a_capped_move_needs() -> None:
    # As under a partition: the broken Instance is not moved in the highest one's place; the
    # highest waits on the budget until the broken one serves again.
    from planning.replica.reconcile import reconcile

    rows = {0: failed(0), **{i: ready(i) for i in range(1, 4)}}
    assert _settle(rows, 1, RECREATE_1) == []
    actions = reconcile(
        desired=4, instances=list(rows.values()), update_revision=NEW, current_revision=OLD, revision_names={},
        policy=RECREATE_1, retry_blocks=[], previous_hold=None, paused=False, now=NOW,
        coordination=Coordination(2, NEW, 1),
    )
    assert actions.update == () and actions.hold is not None
    assert (actions.hold.gate, actions.hold.reason) == (
        HoldGate.BUDGET, "per-Component unavailability budget 1 exhausted (would become 2)",
    )
    rows[0] = ready(0)
    assert _settle(rows, 1, RECREATE_1) == [3]
